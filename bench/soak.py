"""Soak bench: a long-running reader polling with ``update()`` while delta-rs changes the table.

A delta-rs writer thread appends, deletes, compacts and now and then checkpoints a fresh table
for as long as the reader runs; the reader takes a snapshot and then ``--updates`` times calls
``update()`` and reads the new snapshot's computedState, as a poller would. Every
``--check-every`` updates the files of our snapshot must equal a fresh delta-rs read of the same
version. Every ``--sample-every`` updates it samples the server: the JVM's resident memory,
split into the Java heap's resident pages and the rest (``/proc/<pid>/smaps``), the live heap
and the cached relations alive there (``jcmd GC.class_histogram``, after the full GC it runs:
the bytes of all objects, and the ``LocalCheckpointRDD`` objects, one per cached state), the
server's Python worker processes, and the committed memory of each Native Memory Tracking
category (when the JVM tracks it). Prints one JSON line: the figures, and the mean of each over
the first and the last 100 updates (a leak shows as growth between them); with ``progress``,
one JSON line a sample as it goes.

The bench runs until it has made its ``--updates``: a loaded machine makes it slower, not
shorter (``--max-seconds`` is a safety bound only; ``stopped_by`` says which ended it).

The server is found by the port of ``--remote`` (a JVM whose command line binds it: a server
on this machine). Without ``--remote`` the bench starts its own server (``--driver-memory``)
and stops it at the end.

    .venv/bin/python bench/soak.py --updates 1000
    .venv/bin/python bench/soak.py --remote sc://127.0.0.1:15002 --updates 60
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

#: A cached state on the server is a local checkpoint: one ``LocalCheckpointRDD`` object each.
CACHED_RELATION_CLASS = "org.apache.spark.rdd.LocalCheckpointRDD"
#: How many updates at each end the flatness check compares.
WINDOW = 100


# --- The server process --------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        children = _children(current)
        tree += children
        todo += children
    return tree


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def server_jvm(port: int) -> int | None:
    """The pid of the JVM serving Spark Connect on ``port`` on this machine, if any."""
    needle = f"spark.connect.grpc.binding.port={port}".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        pid = int(cmdline.parent.name)
        if needle in text and _comm(pid) == "java":
            return pid
    return None


def python_workers(jvm: int) -> int:
    """The server's Python worker processes (its daemon and the workers forked from it)."""
    return sum(1 for pid in _descendants(jvm) if _comm(pid).startswith("python"))


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(match[1]) / 1024 if match else 0.0


def _java_tool(name: str) -> str:
    from delta_connect_py.embedded import find_java

    return str(Path(find_java()).resolve().parent / name)


@dataclass(frozen=True)
class Histogram:
    """What ``jcmd GC.class_histogram`` reports, after the full GC it runs first."""

    #: Live ``LocalCheckpointRDD`` objects: the cached states.
    cached_relations: int
    #: The bytes of all live objects (its "Total" line): the live heap, in MB.
    live_heap_mb: float


def class_histogram(jvm: int) -> Histogram:
    histogram = subprocess.run(
        [_java_tool("jcmd"), str(jvm), "GC.class_histogram"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    cached, live_bytes = 0, 0
    for line in histogram.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3] == CACHED_RELATION_CLASS:
            cached = int(fields[1])
        elif len(fields) == 3 and fields[0] == "Total":
            live_bytes = int(fields[2])
    return Histogram(cached, live_bytes / 2**20)


def _jcmd(jvm: int, command: str) -> str:
    return subprocess.run(
        [_java_tool("jcmd"), str(jvm), command],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


#: ``GC.heap_info``'s first line ends with the reserved heap's address range.
_HEAP_RANGE = re.compile(r"\[(0x[0-9a-f]+), (0x[0-9a-f]+)\)")


def heap_range(jvm: int) -> tuple[int, int] | None:
    """The Java heap's reserved address range (``jcmd GC.heap_info``)."""
    match = _HEAP_RANGE.search(_jcmd(jvm, "GC.heap_info"))
    return (int(match[1], 16), int(match[2], 16)) if match else None


def heap_resident_mb(jvm: int, heap: tuple[int, int]) -> float:
    """The resident part of the Java heap's mappings (``/proc/<pid>/smaps``): the heap pages
    touched so far, which the JVM's resident memory includes whether or not they hold live data."""
    resident_kb, inside = 0, False
    for line in Path(f"/proc/{jvm}/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            start, end = (int(part, 16) for part in line.split(" ", 1)[0].split("-"))
            inside = start < heap[1] and end > heap[0]
        elif inside and line.startswith("Rss:"):
            resident_kb += int(line.split()[1])
    return resident_kb / 1024


#: A category line of ``jcmd VM.native_memory summary`` (JDK 17).
_NMT_CATEGORY = re.compile(r"^-\s+(.+?) \(reserved=(\d+)KB, committed=(\d+)KB\)", re.M)


def native_memory_mb(jvm: int) -> dict[str, float]:
    """Committed memory per Native Memory Tracking category, empty when the JVM tracks none
    (it must start with ``-XX:NativeMemoryTracking=summary``)."""
    try:
        summary = _jcmd(jvm, "VM.native_memory summary")
    except subprocess.CalledProcessError:
        return {}
    return {name: int(committed) / 1024 for name, _, committed in _NMT_CATEGORY.findall(summary)}


@dataclass
class Sample:
    update: int
    rss_mb: float
    live_heap_mb: float
    cached_relations: int
    python_workers: int
    #: The resident pages of the Java heap's mappings, and the rest of the resident memory.
    heap_resident_mb: float | None = None
    non_heap_rss_mb: float | None = None
    native_memory_mb: dict[str, float] = field(default_factory=dict)


def sample(
    jvm: int, update: int, heap: tuple[int, int] | None = None, native: bool = False
) -> Sample:
    histogram = class_histogram(jvm)
    rss = rss_mb(jvm)
    taken = Sample(
        update, rss, histogram.live_heap_mb, histogram.cached_relations, python_workers(jvm)
    )
    if heap is not None:
        taken.heap_resident_mb = heap_resident_mb(jvm, heap)
        taken.non_heap_rss_mb = rss - taken.heap_resident_mb
    taken.native_memory_mb = native_memory_mb(jvm) if native else {}
    return taken


# --- The writer ------------------------------------------------------------------------------


@dataclass
class Writer:
    """delta-rs changing the table until stopped: appends, deletes, compactions, checkpoints."""

    root: str
    seed: int
    interval_s: float
    commits: int = 0
    checkpoints: int = 0
    error: BaseException | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import deltalake
        import pyarrow as pa

        rng = random.Random(self.seed)
        try:
            while not self.stop.wait(self.interval_s):
                table = deltalake.DeltaTable(self.root)
                choice = rng.random()
                if choice < 0.6:
                    ids = [rng.randrange(10_000) for _ in range(rng.randint(1, 20))]
                    data = pa.table({"id": ids, "part": [rng.choice("abc") for _ in ids]})
                    deltalake.write_deltalake(self.root, data, mode="append")
                elif choice < 0.8:
                    table.delete(f"id % 7 = {rng.randrange(7)} AND id < {rng.randrange(10_000)}")
                else:
                    table.optimize.compact()
                self.commits += 1
                if rng.random() < 0.03:
                    deltalake.DeltaTable(self.root).create_checkpoint()
                    self.checkpoints += 1
        except BaseException as exc:  # reported by the reader
            self.error = exc


def create_table(root: str) -> None:
    import deltalake
    import pyarrow as pa

    data = pa.table({"id": list(range(20)), "part": ["abc"[i % 3] for i in range(20)]})
    deltalake.write_deltalake(root, data, partition_by=["part"])


def delta_rs_files(root: str, version: int) -> list[str]:
    import deltalake

    actions = deltalake.DeltaTable(root, version=version).get_add_actions(flatten=True)
    return sorted(actions.column("path").to_pylist())


# --- The reader ------------------------------------------------------------------------------


@dataclass
class SoakResult:
    updates: int
    new_versions: int
    fresh_snapshots: int
    checks: int
    mismatches: list[int]
    first_version: int
    last_version: int
    writer_commits: int
    writer_checkpoints: int
    seconds: float
    samples: list[Sample]
    #: "updates" when the reader made its ``--updates``, "time" when ``--max-seconds`` cut it.
    stopped_by: str = "updates"

    def window_means(self) -> dict[str, dict[str, float | None]]:
        """Each figure's mean over the samples of the first and the last ``WINDOW`` updates,
        and the change between them in percent."""
        last_start = max(self.updates - WINDOW, 0)
        figures: dict[str, list[tuple[float, float]]] = {}
        for name in ("rss_mb", "live_heap_mb", "cached_relations", "python_workers"):
            figures[name] = [(s.update, getattr(s, name)) for s in self.samples]
        for name in ("heap_resident_mb", "non_heap_rss_mb"):
            if all(getattr(s, name) is not None for s in self.samples):
                figures[name] = [(s.update, getattr(s, name)) for s in self.samples]
        for category in self.samples[0].native_memory_mb:
            figures[f"nmt_{category}_mb"] = [
                (s.update, s.native_memory_mb.get(category, 0.0)) for s in self.samples
            ]
        means: dict[str, dict[str, float | None]] = {}
        for name, values in figures.items():
            early = statistics.fmean(v for u, v in values if u <= WINDOW)
            late = statistics.fmean(v for u, v in values if u >= last_start)
            change = round(100 * (late - early) / early, 1) if early else None
            means[name] = {"first": round(early, 1), "last": round(late, 1), "change_pct": change}
        return means


def soak(
    spark: Any,
    jvm: int | None,
    *,
    updates: int,
    check_every: int,
    sample_every: int,
    seed: int = 0,
    writer_interval_s: float = 0.3,
    max_seconds: float | None = None,
    progress: TextIO | None = None,
) -> SoakResult:
    """Poll a table delta-rs changes; see the module docstring."""
    from delta_connect_py import DeltaTable

    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        root = str(Path(tmp) / "table")
        create_table(root)
        writer = Writer(root, seed, writer_interval_s)
        thread = threading.Thread(target=writer.run, daemon=True)
        started = time.perf_counter()
        snapshot = DeltaTable.for_path(spark, root).snapshot()
        snapshot.state  # noqa: B018 - the reader's first state
        first_version = snapshot.version
        thread.start()
        samples, mismatches = [], []
        new_versions = fresh = checks = done = 0
        stopped_by = "updates"
        heap = heap_range(jvm) if jvm is not None else None
        native = jvm is not None and bool(native_memory_mb(jvm))  # tracked at all
        try:
            for update in range(1, updates + 1):
                if max_seconds is not None and time.perf_counter() - started > max_seconds:
                    stopped_by = "time"
                    break
                done = update
                updated = snapshot.update()
                if updated is not snapshot:
                    new_versions += 1
                    fresh += updated.previous is None  # a new checkpoint: a fresh snapshot
                snapshot = updated
                snapshot.state  # noqa: B018 - a poller reads the state after each update
                last = update == updates
                if update % check_every == 0 or last:
                    checks += 1
                    ours = sorted(r["path"] for r in snapshot.all_files().select("path").collect())
                    if ours != delta_rs_files(root, snapshot.version):
                        mismatches.append(snapshot.version)
                if jvm is not None and (update % sample_every == 0 or update == 1 or last):
                    samples.append(sample(jvm, update, heap, native))
                    if progress is not None:  # a long run's log, one line a sample
                        elapsed = round(time.perf_counter() - started)
                        print(json.dumps({"s": elapsed, **asdict(samples[-1])}), file=progress)
                        progress.flush()
                if writer.error is not None:
                    raise RuntimeError("the delta-rs writer failed") from writer.error
        finally:
            writer.stop.set()
            thread.join(timeout=60)
            snapshot.unpersist()
        return SoakResult(
            updates=done,
            new_versions=new_versions,
            fresh_snapshots=fresh,
            checks=checks,
            mismatches=mismatches,
            first_version=first_version,
            last_version=snapshot.version,
            writer_commits=writer.commits,
            writer_checkpoints=writer.checkpoints,
            seconds=round(time.perf_counter() - started, 1),
            samples=samples,
            stopped_by=stopped_by,
        )


#: The bench's own server: its whole heap resident from the start (``-XX:+AlwaysPreTouch``: a
#: fixed heap's pages otherwise become resident only as the collector first uses them, which
#: grows the resident memory by hundreds of MB over a soak without any live data behind it),
#: so that a growing resident memory is memory outside the heap; and Native Memory Tracking on,
#: so that the samples say which part of the JVM's memory that is.
SERVER_JAVA_OPTIONS = "-XX:NativeMemoryTracking=summary"
PRE_TOUCH_OPTION = "-XX:+AlwaysPreTouch"


def own_server(driver_memory: str, pre_touch: bool) -> Any:
    from delta_connect_py.embedded import EmbeddedServer, fixed_heap_options

    worker = Path(__file__).resolve().parents[1] / ".venv-worker" / "bin" / "python"
    worker_python = os.environ.get("DELTA_CONNECT_WORKER_PYTHON") or str(worker)
    options = [fixed_heap_options(driver_memory), SERVER_JAVA_OPTIONS]
    options += [PRE_TOUCH_OPTION] if pre_touch else []
    conf = {"spark.driver.defaultJavaOptions": " ".join(options)}
    server = EmbeddedServer(
        worker_python=worker_python, driver_memory=driver_memory, extra_conf=conf
    )
    return server.start()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--remote", help="sc://host:port of a server on this machine")
    parser.add_argument("--updates", type=int, default=1050, help="the updates to make")
    parser.add_argument("--check-every", type=int, default=25)
    parser.add_argument("--sample-every", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--writer-interval", type=float, default=1.0, help="seconds")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=6 * 3600.0,
        help="a safety bound only (default 6 h): a loaded machine slows the updates, and the"
        " bench counts updates, not time; the output says which of the two stopped it",
    )
    parser.add_argument(
        "--driver-memory",
        default=os.environ.get("DELTA_CONNECT_DRIVER_MEMORY", "3g"),
        help="the bench's own server's fixed heap (default $DELTA_CONNECT_DRIVER_MEMORY or 3g)",
    )
    parser.add_argument(
        "--no-pre-touch",
        action="store_true",
        help="start the bench's own server without -XX:+AlwaysPreTouch",
    )
    args = parser.parse_args()

    from delta_connect_py import connect

    server = None
    remote = args.remote
    if remote is None:
        server = own_server(args.driver_memory, pre_touch=not args.no_pre_touch)
        remote = server.remote
    try:
        spark = connect(remote)
        jvm = server_jvm(int(remote.rsplit(":", 1)[1].split("/")[0]))
        result = soak(
            spark,
            jvm,
            updates=args.updates,
            check_every=args.check_every,
            sample_every=args.sample_every,
            seed=args.seed,
            writer_interval_s=args.writer_interval,
            max_seconds=args.max_seconds,
            progress=sys.stderr,
        )
        spark.stop()
    finally:
        if server is not None:
            server.stop()
    report: dict[str, Any] = {"server": "own" if server is not None else remote}
    if server is not None:
        report["server_java_options"] = server.extra_conf["spark.driver.defaultJavaOptions"]
    report |= asdict(result)
    report["windows"] = result.window_means() if result.samples else {}
    report["server_jvm_found"] = jvm is not None
    print(json.dumps(report))
    return 0 if not result.mismatches and result.stopped_by == "updates" else 1


if __name__ == "__main__":
    sys.exit(main())
