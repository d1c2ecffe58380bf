"""Benchmark (not a test): interactive latency, with the Spark jobs and Connect RPCs of each call.

Usage::

    # the shared bench tables (see bench/README.md for S; K is 100 commits with a checkpoint)
    python /work/shared/bench/gen_log.py /tmp/bench/S --force --with-stats --files 10000 \\
        --commits 1000 --partitions 100 --txn-apps 4 --seed 1
    python /work/shared/bench/gen_log.py /tmp/bench/K --force --with-stats --files 10000 \\
        --commits 100 --checkpoint-every 90 --partitions 10 --txn-apps 4 --seed 1
    PYTHONPATH=. .venv/bin/python bench/latency.py \\
        --table small=../shared/conformance/delta-rs/table_with_liquid_clustering/delta \\
        --table S=/tmp/bench/S --table K=/tmp/bench/K [--rounds 3] [--counts-only]

Starts one Spark Connect server with delta-spark's jars and its SQL extension
(``tests.delta_spark_server``, Spark's defaults, Spark's UI on a free loopback port for the job
counts) that serves both our library and delta-spark's SQL, warms it (``--warmup`` uncached
calls on a copy of each table), and then measures, per table, each call of ours, delta-spark's
SQL for the same question, and delta-rs (``deltalake``):

- **cold**: the first access of the path on that warm server (every round copies the table to
  a new path, so no reader has anything of it cached);
- **warm**: the same call again on the same path, the log unchanged;
- **new commit**: the same call after one commit (one new add) was appended to that path.

One JSON line per case: the median seconds of the rounds and, from the last round, the Spark
jobs the server ran (Spark's REST API: the number of job ids issued during the call) and the
Connect RPCs the client sent (counted by wrapping the client's gRPC stub; ``ExecutePlan`` is
split by what it runs, ``AnalyzePlan`` by what it asks, ``ReleaseExecute`` is asynchronous and
not a round trip the caller waits for). ``--counts-only`` runs one round of ours, for the
counts. Our calls: ``snapshot()``, ``.state`` (after ``snapshot()``, so it is the state's own
cost), ``all_files()`` (collected), ``to_df()`` (collected; tables with data files only),
``history()`` (collected), and ``snapshot().state`` as one call, the number compared with
delta-spark's ``DESCRIBE DETAIL`` and delta-rs's ``DeltaTable(path)`` with its add actions.

``--calls`` keeps the calls of those names (any reader's: ``--calls 'snapshot().state,DESCRIBE
DETAIL'``); ``--trace`` adds to each line the RPCs in the order sent, each with the innermost
functions of ours that sent it and the Spark jobs run before the next RPC, and the jobs' names.

Targets checked at the end: the small table's cold ``snapshot().state`` at most 2.0x
delta-spark's first ``DESCRIBE DETAIL``; S cold at most 1.0x delta-rs.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from delta_connect_py import DeltaTable
from delta_connect_py.embedded import free_port

#: The stub methods whose calls the client waits for; ReleaseExecute runs in a thread pool.
ASYNC_RPCS = {"ReleaseExecute"}


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------


def _rpc_label(method: str, request: Any) -> str:
    """``ExecutePlan:root`` / ``ExecutePlan:<command>``, ``AnalyzePlan:<what>``, else the name."""
    with contextlib.suppress(Exception):
        if method == "ExecutePlan":
            plan = request.plan
            kind = plan.WhichOneof("op_type")
            if kind == "command":
                return f"ExecutePlan:{plan.command.WhichOneof('command_type')}"
            return "ExecutePlan:root"
        if method == "AnalyzePlan":
            return f"AnalyzePlan:{request.WhichOneof('analyze')}"
        if method == "Config":
            return f"Config:{request.operation.WhichOneof('op_type')}"
    return method


@dataclass
class RpcCounter:
    """Counts the RPCs a Connect client sends, by wrapping its gRPC stub in place."""

    counts: collections.Counter[str] = field(default_factory=collections.Counter)
    seconds: collections.Counter[str] = field(default_factory=collections.Counter)
    #: With ``--trace``: each waited-for RPC in the order sent, with our innermost calls that
    #: sent it, and the Spark jobs issued before it (so the jobs between two RPCs are known).
    sequence: list[dict[str, Any]] = field(default_factory=list)
    jobs: JobCounter | None = None

    def install(self, spark: Any) -> None:
        client = spark.client
        stub = client._internal_stub
        if isinstance(stub, _CountingStub):
            return
        client._internal_stub = _CountingStub(stub, self)

    def snapshot(self) -> collections.Counter[str]:
        return collections.Counter(self.counts)


class _CountingStub:
    def __init__(self, stub: Any, counter: RpcCounter) -> None:
        self._stub = stub
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._stub, name)
        if not callable(target):
            return target
        counter = self._counter

        def call(request: Any, *args: Any, **kwargs: Any) -> Any:
            label = _rpc_label(name, request)
            counter.counts[label] += 1
            if counter.jobs is not None and name not in ASYNC_RPCS:
                issued = counter.jobs.issued()
                counter.sequence.append({"rpc": label, "by": _our_callers(), "issued": issued})
            started = time.perf_counter()
            result = target(request, *args, **kwargs)
            counter.seconds[label] += time.perf_counter() - started
            return result

        return call


def _our_callers(depth: int = 4) -> str:
    """The innermost ``delta_connect_py`` functions on the stack, innermost first."""
    frames = [
        f"{Path(frame.filename).stem}.{frame.name}"
        for frame in traceback.extract_stack()
        if "/delta_connect_py/" in frame.filename
    ]
    return " < ".join(reversed(frames[-depth:]))


class JobCounter:
    """Spark jobs run by the server, from its UI's REST API (job ids are issued in order)."""

    def __init__(self, ui_url: str) -> None:
        self.ui_url = ui_url.rstrip("/")
        apps = self._get("/api/v1/applications")
        self.app = apps[0]["id"]

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.ui_url + path, timeout=120) as response:
            return json.loads(response.read())

    def described(self, first: int, end: int) -> list[str]:
        """The names (description, else call site) of jobs ``first`` to ``end - 1``."""
        jobs = self._get(f"/api/v1/applications/{self.app}/jobs")
        ours = sorted(
            (job for job in jobs if first <= job["jobId"] < end), key=lambda j: j["jobId"]
        )
        return [
            str(job.get("description") or job.get("name")).splitlines()[0][:160] for job in ours
        ]

    def issued(self) -> int:
        """Job ids issued so far, once the UI's listener has caught up (two equal reads)."""
        previous = -1
        for _ in range(50):
            jobs = self._get(f"/api/v1/applications/{self.app}/jobs")
            issued = 1 + max((job["jobId"] for job in jobs), default=-1)
            if issued == previous:
                return issued
            previous = issued
            time.sleep(0.15)
        return previous


@dataclass
class Meter:
    rpcs: RpcCounter
    jobs: JobCounter | None
    #: Also record each call's RPCs in order and its jobs' names (``--trace``).
    trace: bool = False

    @contextlib.contextmanager
    def measure(self) -> Iterator[dict[str, Any]]:
        """Seconds, jobs and RPCs of the block (the job count after the block's timing)."""
        out: dict[str, Any] = {}
        jobs_before = self.jobs.issued() if self.jobs else None
        rpcs_before = self.rpcs.snapshot()
        sequence_start = len(self.rpcs.sequence)
        started = time.perf_counter()
        yield out
        out["seconds"] = time.perf_counter() - started
        rpcs = self.rpcs.snapshot() - rpcs_before
        out["rpcs"] = sum(n for k, n in rpcs.items() if k.split(":")[0] not in ASYNC_RPCS)
        out["rpc_kinds"] = dict(sorted(rpcs.items()))
        if self.jobs is not None and jobs_before is not None:
            jobs_after = self.jobs.issued()
            out["jobs"] = jobs_after - jobs_before
            if self.trace:
                out["job_names"] = self.jobs.described(jobs_before, jobs_after)
        if self.trace and self.jobs is not None:
            sent = self.rpcs.sequence[sequence_start:]
            # Each RPC is followed by the jobs run until the next one was sent.
            ends = [rpc["issued"] for rpc in sent[1:]] + [self.jobs.issued()] * bool(sent)
            out["rpc_sequence"] = [
                f"{rpc['rpc']} [{end - rpc['issued']} jobs] by {rpc['by']}"
                for rpc, end in zip(sent, ends, strict=True)
            ]


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------


def copy_table(source: str, into: Path) -> str:
    """A copy of the table (log and data files) at a new path; returns that path."""
    target = into / f"t{time.monotonic_ns()}"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("_gen_manifest.json"))
    return str(target)


def append_commit(table: str) -> None:
    """One more commit: a commitInfo and one add (the last add seen, under a new name, with a
    copy of its data file when the table has it)."""
    log = Path(table) / "_delta_log"
    commits = sorted(p for p in log.glob("*.json") if p.stem.isdigit())
    version = int(commits[-1].stem) + 1
    add: dict[str, Any] | None = None
    for commit in reversed(commits):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                add = action["add"]
        if add is not None:
            break
    if add is None:
        add = {"path": "x.parquet", "partitionValues": {}, "size": 1, "dataChange": True}
    new_path = f"latency-bench-{version}.parquet"
    data_file = Path(table) / urllib.parse.unquote(add["path"])
    if data_file.is_file():  # a table with data files gets a real one (to_df reads it)
        shutil.copyfile(data_file, Path(table) / new_path)
    add = {**add, "path": new_path, "dataChange": True}
    add["modificationTime"] = int(time.time() * 1000)
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    lines = [json.dumps(info), json.dumps({"add": add})]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def has_data_files(table: str) -> bool:
    return any("_delta_log" not in p.parts for p in Path(table).rglob("*.parquet"))


# --------------------------------------------------------------------------------------------
# The calls
# --------------------------------------------------------------------------------------------


def our_calls(spark: Any, with_data: bool) -> dict[str, Callable[[str], Any]]:
    def snapshot(path: str) -> Any:
        return DeltaTable.for_path(spark, path).snapshot()

    def snapshot_state(path: str) -> Any:
        return DeltaTable.for_path(spark, path).snapshot().state

    calls: dict[str, Callable[[str], Any]] = {
        "snapshot().state": snapshot_state,
        "snapshot()": snapshot,
        # .state, all_files(), to_df() are timed on a snapshot taken (untimed) just before.
        ".state": lambda s: s.state,
        "all_files()": lambda s: s.all_files().collect(),
        "history()": lambda path: DeltaTable.for_path(spark, path).history().collect(),
    }
    if with_data:
        calls["to_df()"] = lambda s: s.to_df().collect()
    return calls


ON_SNAPSHOT = {".state", "all_files()", "to_df()"}


def delta_spark_calls(spark: Any, with_data: bool) -> dict[str, Callable[[str], Any]]:
    calls: dict[str, Callable[[str], Any]] = {
        "DESCRIBE DETAIL": lambda p: spark.sql(f"DESCRIBE DETAIL delta.`{p}`").collect(),
        "inputFiles()": lambda p: spark.read.format("delta").load(p).inputFiles(),
        "DESCRIBE HISTORY": lambda p: spark.sql(f"DESCRIBE HISTORY delta.`{p}`").collect(),
    }
    if with_data:
        calls["read.collect()"] = lambda p: spark.read.format("delta").load(p).collect()
    return calls


def delta_rs_calls(with_data: bool) -> dict[str, Callable[[str], Any]]:
    import deltalake

    calls: dict[str, Callable[[str], Any]] = {
        "DeltaTable+add_actions": lambda p: deltalake.DeltaTable(p).get_add_actions(flatten=True),
        "history()": lambda p: deltalake.DeltaTable(p).history(),
    }
    if with_data:
        calls["to_pyarrow_table()"] = lambda p: deltalake.DeltaTable(p).to_pyarrow_table()
    return calls


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    table: str
    reader: str
    call: str
    phase: str
    seconds: list[float] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)

    def line(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.table,
            "reader": self.reader,
            "call": self.call,
            "phase": self.phase,
            "median_s": round(statistics.median(self.seconds), 4) if self.seconds else None,
            "rounds_s": [round(s, 4) for s in self.seconds],
        }
        for key in ("jobs", "rpcs", "rpc_kinds", "job_names", "rpc_sequence", "error"):
            if key in self.last:
                out[key] = self.last[key]
        return out


class Bench:
    def __init__(self, spark: Any, meter: Meter, scratch: Path) -> None:
        self.spark = spark
        self.meter = meter
        self.scratch = scratch
        self.cases: dict[tuple[str, str, str, str], Case] = {}

    def case(self, table: str, reader: str, call: str, phase: str) -> Case:
        key = (table, reader, call, phase)
        if key not in self.cases:
            self.cases[key] = Case(table, reader, call, phase)
        return self.cases[key]

    def timed(self, case: Case, fn: Callable[[], Any]) -> None:
        with self.meter.measure() as out:
            try:
                fn()
            except Exception as exc:  # a bench line, not a test: report and go on
                out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        case.seconds.append(out["seconds"])
        case.last = out
        progress = {**case.line(), "rounds_s": None, "seconds": round(out["seconds"], 4)}
        print(json.dumps({"progress": True, **progress}), file=sys.stderr, flush=True)

    def run_reader(
        self,
        name: str,
        source: str,
        reader: str,
        calls: dict[str, Callable[[str], Any]],
        phases: tuple[str, ...],
    ) -> None:
        """Each call on its own fresh copy: cold, warm, then after a new commit."""
        for call, fn in calls.items():
            path = copy_table(source, self.scratch)
            try:
                for phase in phases:
                    if phase == "new commit":
                        append_commit(path)
                    case = self.case(name, reader, call, phase)
                    self.timed(case, self._bound(reader, call, fn, path))
            finally:
                shutil.rmtree(path, ignore_errors=True)

    def _bound(
        self, reader: str, call: str, fn: Callable[[str], Any], path: str
    ) -> Callable[[], Any]:
        if reader == "ours" and call in ON_SNAPSHOT:
            # The snapshot is taken outside the timing (its own line is "snapshot()").
            snap = DeltaTable.for_path(self.spark, path).snapshot()
            return lambda: fn(snap)
        return lambda: fn(path)


def start_server(args: argparse.Namespace) -> tuple[Any, str]:
    from tests.delta_spark_server import delta_spark_server

    ui_port = free_port()
    server = delta_spark_server(port=free_port(), fast_start=False)
    server.extra_conf.update({"spark.ui.enabled": "true", "spark.ui.port": str(ui_port)})
    server.start()
    ui = f"http://127.0.0.1:{ui_port}"
    print(f"# server {server.remote} (UI {ui}, log {server.log_path})", flush=True)
    return server, ui


def warm_up(bench: Bench, source: str, times: int, delta_spark: bool) -> None:
    """The server's JIT and Python workers warmed by our calls and, when it is measured,
    delta-spark's, on a copy."""
    path = copy_table(source, bench.scratch)
    try:
        for _ in range(times):
            # Uncached: each round lists and replays, as a cold call does (a cached snapshot
            # would warm only the unchanged-log path).
            table = DeltaTable.for_path(bench.spark, path, snapshot_cache=False)
            _ = table.snapshot().state
            table.snapshot().all_files().collect()
            if delta_spark:
                bench.spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="append", required=True, metavar="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--counts-only", action="store_true", help="one round of ours")
    parser.add_argument("--remote", help="a running server (with delta-spark) instead")
    parser.add_argument("--ui", help="its Spark UI, for job counts (with --remote)")
    parser.add_argument("--readers", default="ours,delta-spark,delta-rs")
    parser.add_argument(
        "--trace", action="store_true", help="each call's RPCs in order and its jobs' names"
    )
    parser.add_argument(
        "--calls", help="only the calls of these names, any reader's (comma-separated)"
    )
    args = parser.parse_args(argv)
    tables = [tuple(t.split("=", 1)) for t in args.table]
    readers = args.readers.split(",")

    from pyspark.sql import SparkSession

    server = None
    if args.remote:
        remote, ui = args.remote, args.ui
    else:
        server, ui = start_server(args)
        remote = server.remote
    try:
        started = time.perf_counter()
        spark = SparkSession.builder.remote(remote).create()
        rpcs = RpcCounter()
        rpcs.install(spark)
        meter = Meter(rpcs, JobCounter(ui) if ui else None, trace=args.trace)
        if args.trace:
            rpcs.jobs = meter.jobs
        with tempfile.TemporaryDirectory(prefix="latency-bench-") as scratch:
            bench = Bench(spark, meter, Path(scratch))
            with meter.measure() as first:
                DeltaTable.for_path(spark, tables[0][1])
            print(json.dumps({"case": "first prepare_session", **first}), flush=True)
            if not args.counts_only:
                for _, source in tables:
                    warm_up(bench, source, args.warmup, "delta-spark" in readers)
            print(f"# warm after {time.perf_counter() - started:.1f} s", flush=True)
            rounds = 1 if args.counts_only else args.rounds
            phases = ("cold", "warm", "new commit")
            for _ in range(rounds):
                for name, source in tables:
                    with_data = has_data_files(source)
                    if "ours" in readers:
                        calls = chosen(our_calls(spark, with_data), args.calls)
                        bench.run_reader(name, source, "ours", calls, phases)
                    if args.counts_only:
                        continue
                    if "delta-spark" in readers:
                        calls = chosen(delta_spark_calls(spark, with_data), args.calls)
                        bench.run_reader(name, source, "delta-spark", calls, phases)
                    if "delta-rs" in readers:
                        calls = chosen(delta_rs_calls(with_data), args.calls)
                        bench.run_reader(name, source, "delta-rs", calls, phases)
            for case in bench.cases.values():
                print(json.dumps(case.line()), flush=True)
            report_targets(bench, [name for name, _ in tables])
        spark.stop()
    finally:
        if server is not None:
            server.stop()
    return 0


def chosen(
    calls: dict[str, Callable[[str], Any]], names: str | None
) -> dict[str, Callable[[str], Any]]:
    """The ``calls`` named in ``names`` (comma-separated; None: all)."""
    if names is None:
        return calls
    wanted = names.split(",")
    return {name: call for name, call in calls.items() if name in wanted}


def report_targets(bench: Bench, names: list[str]) -> None:
    def median(table: str, reader: str, call: str, phase: str = "cold") -> float | None:
        case = bench.cases.get((table, reader, call, phase))
        return statistics.median(case.seconds) if case and case.seconds else None

    for name in names:
        ours = median(name, "ours", "snapshot().state")
        detail = median(name, "delta-spark", "DESCRIBE DETAIL")
        rs = median(name, "delta-rs", "DeltaTable+add_actions")
        out: dict[str, Any] = {"target": name, "ours_cold_s": ours}
        if ours and detail:
            out["vs_describe_detail"] = round(ours / detail, 2)
        if ours and rs:
            out["vs_delta_rs"] = round(ours / rs, 2)
        for phase in ("warm", "new commit"):
            out[f"ours_{phase}_s"] = median(name, "ours", "snapshot().state", phase)
            detail = median(name, "delta-spark", "DESCRIBE DETAIL", phase)
            out[f"describe_detail_{phase}_s"] = detail
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
