"""Benchmark (not a test): a server's first calls, from its start to a warm snapshot.

Usage::

    PYTHONPATH=. .venv/bin/python bench/first_connect.py [--rounds 5] [--conf KEY=VALUE ...] \\
        [--table ../shared/conformance/dat/basic_append/delta] [--warm-calls 7] \\
        [--library DIR ...] [--class-archive {as-set,off,both}]

Every round starts new servers (``delta_connect_py.embedded``, the settings of
``server/start-local.sh`` plus any ``--conf``; ``DELTA_CONNECT_DRIVER_MEMORY`` sizes them) and
prints JSON lines:

- ``steps``: one server, timed step by step in a plain Connect session: the server's start until
  its gRPC port is open (``port_open``) and until it says it is ready (``ready``, the driver
  program's line, see ``server_driver``); ``SparkSession...create()``; the first analysis request
  (``spark.version``); a job without Python (``spark.range(1).collect()``: the JVM's first job,
  its class loading and JIT); the first Python job (a one-row ``mapInArrow``: the Python
  daemon's start, a worker's imports, the unpickling of the function); the same job again (a
  warm worker).
- ``user``: one server per library (``--library``, default this checkout; give two checkouts to
  compare them, alternating within each round), each called as a user does in a new client
  process: ``connect(remote)`` just after the server is ready, with the Connect RPCs it sent;
  the first ``DeltaTable.for_path(...).snapshot().state`` of a small table (a fresh copy of
  ``--table``); then ``--warm-calls`` more of them, the log unchanged (the snapshot cache's
  answer), and their median.

``--class-archive both`` runs each user round twice, alternating: with the embedded server's
class archive (see ``delta_connect_py.class_archive``; built first if there is none) and without
(``DELTA_CONNECT_CLASS_ARCHIVE=0``); ``off`` only without; ``as-set`` (default) as the
environment says.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "--client" not in sys.argv:  # a client process takes the library from its PYTHONPATH
    sys.path.insert(0, str(ROOT))

DEFAULT_TABLE = ROOT.parent / "shared" / "conformance" / "dat" / "basic_append" / "delta"
WORKER_PYTHON = ROOT / ".venv-worker" / "bin" / "python"


def _timed(out: dict[str, Any], name: str, fn: Any) -> Any:
    started = time.perf_counter()
    result = fn()
    out[name] = round(time.perf_counter() - started, 3)
    return result


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _python_version(batches: Any) -> Any:
    import sys as worker_sys

    import pyarrow as worker_pa

    for _ in batches:
        pass
    version = f"{worker_sys.version_info.major}.{worker_sys.version_info.minor}"
    yield worker_pa.RecordBatch.from_pydict({"python": [version]})


def start_server(conf: dict[str, str], out: dict[str, Any]) -> Any:
    """A new embedded server, started; ``out`` gets the seconds until its port opened and
    until it was ready."""
    from delta_connect_py.embedded import EmbeddedServer, _port_open, free_port

    server = EmbeddedServer(port=free_port(), worker_python=str(WORKER_PYTHON), extra_conf=conf)
    started = time.perf_counter()
    stop_polling = threading.Event()

    def poll_port() -> None:
        while not stop_polling.is_set():
            if _port_open(server.port):
                out["port_open"] = round(time.perf_counter() - started, 3)
                return
            time.sleep(0.05)

    poller = threading.Thread(target=poll_port, daemon=True)
    poller.start()
    try:
        server.start()
    finally:
        stop_polling.set()
        poller.join()
    out["ready"] = round(time.perf_counter() - started, 3)
    return server


def steps(conf: dict[str, str]) -> dict[str, Any]:
    """The steps of a first connection, each timed, on a new server."""
    from pyspark.sql import SparkSession

    out: dict[str, Any] = {"load_before": _load()}
    server = start_server(conf, out)
    try:
        spark = _timed(out, "session_create", SparkSession.builder.remote(server.remote).create)
        _timed(out, "first_analysis", lambda: spark.version)
        _timed(out, "first_jvm_job", lambda: spark.range(1).collect())
        probe = spark.range(0, 1, 1, 1)

        def python_job() -> Any:
            return probe.mapInArrow(_python_version, "python string").collect()

        _timed(out, "first_python_job", python_job)
        _timed(out, "second_python_job", python_job)
        spark.stop()
    finally:
        server.stop()
    out["load_after"] = _load()
    return out


def as_user(conf: dict[str, str], library: Path, table: Path, warm_calls: int) -> dict[str, Any]:
    """A new server, and a new client process of ``library`` calling it as a user does."""
    out: dict[str, Any] = {"library": str(library), "load_before": _load()}
    server = start_server(conf, out)
    try:
        command = [sys.executable, __file__, "--client", server.remote, "--table", str(table)]
        command += ["--warm-calls", str(warm_calls)]
        env = {**os.environ, "PYTHONPATH": str(library)}
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            out["error"] = done.stderr[-2000:]
        else:
            out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        server.stop()
    out["load_after"] = _load()
    return out


def client(remote: str, table: Path, warm_calls: int) -> dict[str, Any]:
    """In a client process: ``connect()``, the first snapshot, warm snapshots (see module)."""
    import pyspark.sql.connect.proto.base_pb2_grpc as grpc_lib

    import delta_connect_py
    from delta_connect_py import DeltaTable, connect

    # This script's folder is on sys.path: latency.py's stub wrapper counts the client's RPCs.
    # Imported after the library under test (latency puts this checkout first on sys.path).
    latency = importlib.import_module("latency")
    counter = latency.RpcCounter()
    stubs: Any = grpc_lib
    plain_stub = stubs.SparkConnectServiceStub
    stubs.SparkConnectServiceStub = lambda channel: latency._CountingStub(
        plain_stub(channel), counter
    )

    out: dict[str, Any] = {"package": delta_connect_py.__file__}
    spark = _timed(out, "connect", lambda: connect(remote))
    out["connect_rpcs"] = dict(counter.counts)
    with tempfile.TemporaryDirectory(prefix="first-connect-") as scratch:
        path = Path(scratch) / "table"
        shutil.copytree(table, path)

        def state() -> Any:
            return DeltaTable.for_path(spark, str(path)).snapshot().state

        counter.counts.clear()
        _timed(out, "first_state", state)
        out["first_state_rpcs"] = dict(counter.counts)
        warm: list[float] = []
        for _ in range(warm_calls):
            counter.counts.clear()
            started = time.perf_counter()
            state()
            warm.append(round(time.perf_counter() - started, 3))
        out["warm_state_rpcs"] = dict(counter.counts)  # the last one's
        out["warm_state_median"] = statistics.median(warm) if warm else None
        out["warm_state"] = warm
    spark.stop()
    return out


def _archive_settings(choice: str) -> list[str | None]:
    """The ``DELTA_CONNECT_CLASS_ARCHIVE`` values of each round (None: as set)."""
    if choice == "both":
        _ensure_class_archive()
        return ["1", "0"]
    return ["0"] if choice == "off" else [None]


def _ensure_class_archive() -> None:
    """Build the embedded server's class archive now if there is none: start and stop a server,
    then wait for the background build."""
    from delta_connect_py import class_archive
    from delta_connect_py.embedded import EmbeddedServer

    os.environ[class_archive.ENABLED_ENV] = "1"
    server = EmbeddedServer(worker_python=str(WORKER_PYTHON)).start()
    archive = server.class_archive
    server.stop()
    deadline = time.monotonic() + 900
    while archive is not None and not archive.published and time.monotonic() < deadline:
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    from delta_connect_py.embedded import _conf_pair

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--conf", type=_conf_pair, action="append", default=[])
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--warm-calls", type=int, default=7)
    parser.add_argument("--library", type=Path, action="append", default=[])
    parser.add_argument("--no-steps", action="store_true", help="only the user rounds")
    parser.add_argument("--class-archive", choices=("as-set", "off", "both"), default="as-set")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        print(json.dumps(client(args.client, args.table, args.warm_calls)), flush=True)
        return 0
    conf = dict(args.conf)
    libraries = args.library or [ROOT]
    archive_settings = _archive_settings(args.class_archive)
    variants = [(library, setting) for library in libraries for setting in archive_settings]
    summary: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for round_ in range(args.rounds):
        if not args.no_steps:
            print(json.dumps({"round": round_, "steps": steps(conf), "conf": conf}), flush=True)
        # Alternate which variant goes first, so that neither always meets the same load.
        order = variants if round_ % 2 == 0 else variants[::-1]
        for library, setting in order:
            label = str(library) if setting is None else f"{library}, class archive {setting}"
            if setting is not None:
                os.environ["DELTA_CONNECT_CLASS_ARCHIVE"] = setting
            user = as_user(conf, library, args.table, args.warm_calls)
            print(json.dumps({"round": round_, "variant": label, "user": user}), flush=True)
            for key in ("ready", "connect", "first_state", "warm_state_median"):
                if isinstance(user.get(key), float):
                    summary[label][key].append(user[key])
    for library, series in summary.items():
        medians = {key: statistics.median(values) for key, values in series.items()}
        print(json.dumps({"library": library, "medians": medians, "rounds": series}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
