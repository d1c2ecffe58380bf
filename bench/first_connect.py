"""Benchmark (not a test): where the first ``connect()`` to a server just started spends its time.

Usage::

    PYTHONPATH=. .venv/bin/python bench/first_connect.py [--rounds 2] [--conf KEY=VALUE ...]

Each round starts a new embedded server (``delta_connect_py.embedded``, the same settings as
``server/start-local.sh``, plus any ``--conf``), then times, one after the other, in a new
Connect session: the server's start until its port is open; ``SparkSession...create()``; the
first analysis request (``spark.version``); a job without Python (``spark.range(1).collect()``:
the JVM's first job, its class loading and JIT); the first Python job (the worker Python version
probe ``prepare_session`` runs: the Python daemon's start, a worker's imports, the unpickling
of the function); the same probe again (a warm worker); and then a second server's
``connect()`` as a user does it (``prepare_session`` first). One JSON line per round.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from delta_connect_py.embedded import EmbeddedServer, _conf_pair
from delta_connect_py.session import _worker_python_version
from delta_connect_py.worker.archives import in_worker

ROOT = Path(__file__).resolve().parents[1]


def _timed(out: dict[str, float], name: str, fn: Any) -> Any:
    started = time.perf_counter()
    result = fn()
    out[name] = round(time.perf_counter() - started, 3)
    return result


def breakdown(conf: dict[str, str]) -> dict[str, float]:
    """The steps of a first connection, each timed, on a new server."""
    from pyspark.sql import SparkSession

    from delta_connect_py.session import register_worker_code

    out: dict[str, float] = {}
    worker = ROOT / ".venv-worker" / "bin" / "python"
    server = EmbeddedServer(worker_python=str(worker), extra_conf=conf)
    _timed(out, "server_start", server.start)
    try:
        spark = _timed(out, "session_create", SparkSession.builder.remote(server.remote).create)
        _timed(out, "first_analysis", lambda: spark.version)
        _timed(out, "first_jvm_job", lambda: spark.range(1).collect())
        register_worker_code()
        probe = spark.range(0, 1, 1, 1)

        def python_job() -> Any:
            return probe.mapInArrow(in_worker(_worker_python_version), "python string").collect()

        _timed(out, "first_python_job", python_job)
        _timed(out, "second_python_job", python_job)
        spark.stop()
    finally:
        server.stop()
    return out


def as_user(conf: dict[str, str]) -> dict[str, float]:
    """``connect(remote)`` on a new server, as a user calls it: session and probe together."""
    from delta_connect_py import connect

    out: dict[str, float] = {}
    worker = ROOT / ".venv-worker" / "bin" / "python"
    server = EmbeddedServer(worker_python=str(worker), extra_conf=conf)
    _timed(out, "server_start", server.start)
    try:
        spark = _timed(out, "connect", lambda: connect(server.remote))
        spark.stop()
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--conf", type=_conf_pair, action="append", default=[])
    args = parser.parse_args(argv)
    conf = dict(args.conf)
    for round_ in range(args.rounds):
        print(json.dumps({"round": round_, "steps": breakdown(conf), "conf": conf}), flush=True)
        print(json.dumps({"round": round_, "user": as_user(conf), "conf": conf}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
