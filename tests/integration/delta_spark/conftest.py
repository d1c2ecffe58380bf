"""Fixtures for comparing delta_connect_py with delta-spark itself.

``delta_spark``: a plain Spark Connect session to a server running the real delta-spark jars
(``tests/delta_spark_server.py``): $DELTA_SPARK_REMOTE if set, else one server started for the
session ($DELTA_SPARK_PORT, else 15041 when free, else any free port).

``oracle_tables``: fresh tables written by delta-spark (SQL and DataFrameWriter over that
session), built once per session; see ``tables.build_tables`` for what each one exercises.

Both come from one background thread, launched (autouse) before any test of this folder asks
for ``spark``: it starts the delta-spark server and writes the tables while the vanilla server
starts, so the two JVMs start side by side and the tables are written meanwhile.

Skipped only when ``.delta-jars/`` is missing and DELTA_SPARK_REQUIRED is unset; with
DELTA_SPARK_REQUIRED set (``make test-delta-spark``, CI) a missing jar, or a server that does
not start, fails the tests.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from tests.delta_spark_server import JARS_DIR, delta_spark_server
from tests.integration.delta_spark.tables import OracleTables, build_tables

#: Seconds spent outside the tests proper, printed at the end of the run.
TIMINGS: dict[str, float] = {}


@dataclass
class Oracle:
    session: Any
    tables: OracleTables


@pytest.fixture(scope="session", autouse=True)
def _delta_jars() -> None:
    """Skip (before any server starts) only when the jars folder is missing and not required."""
    if os.environ.get("DELTA_SPARK_REMOTE") or JARS_DIR.is_dir():
        return
    message = f"{JARS_DIR} is missing: run server/fetch-delta-jars.sh"
    if os.environ.get("DELTA_SPARK_REQUIRED"):
        pytest.fail(f"DELTA_SPARK_REQUIRED is set but {message}", pytrace=False)
    pytest.skip(message)


def _session(remote: str) -> Any:
    """A session that never becomes pyspark's default or active one (``SparkSession(...)``,
    not ``builder.create()``): pyspark 4.1 binds a ``localCheckpoint`` result to
    ``SparkSession.active()``, not to the checkpointed DataFrame's session, so with the oracle
    session active our materialized state would be looked up on the oracle server ("No
    DataFrame with id ... is found in the session")."""
    from pyspark.sql.connect.session import SparkSession

    return SparkSession(connection=remote)


@pytest.fixture(scope="session", autouse=True)
def _oracle(_delta_jars: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[Any]]:
    """Start the oracle server and write the tables in a thread; the tests wait for it."""
    remote = os.environ.get("DELTA_SPARK_REMOTE")
    server = None if remote else delta_spark_server()  # raises when the jar is missing
    root = tmp_path_factory.mktemp("delta-spark-tables")
    sessions: list[Any] = []

    def prepare() -> Oracle:
        began = time.monotonic()
        address = remote
        if server is not None:
            address = server.start().remote
            TIMINGS["delta-spark server start"] = time.monotonic() - began
        assert address is not None
        sessions.append(_session(address))
        tables = build_tables(sessions[0], root)
        TIMINGS["delta-spark writes the tables"] = tables.build_seconds
        return Oracle(sessions[0], tables)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="delta-spark") as pool:
        future = pool.submit(prepare)
        try:
            yield future
        finally:
            future.exception()  # wait for the thread however it ends
            for session in sessions:
                session.stop()
            if server is not None:
                server.stop()


def _ready(oracle: Future[Any]) -> Oracle:
    began = time.monotonic()
    result: Oracle = oracle.result()
    TIMINGS.setdefault("waiting for them after the vanilla server", time.monotonic() - began)
    return result


@pytest.fixture(scope="session")
def delta_spark(_oracle: Future[Any], spark: Any) -> Iterator[Any]:
    """A plain Spark Connect session on the delta-spark server (nothing of ours involved)."""
    yield _ready(_oracle).session
    # Torn down before ``spark``: our materialized snapshots that are garbage by now release
    # their server-side state while the vanilla server still runs, instead of at interpreter
    # exit, when pyspark would retry against a stopped server for ~10 minutes.
    gc.collect()


@pytest.fixture(scope="session")
def oracle_tables(_oracle: Future[Any], spark: Any) -> OracleTables:
    return _ready(_oracle).tables


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the phase's time goes (the test durations do not show the fixtures' share)."""
    if TIMINGS:
        parts = ", ".join(f"{label}: {seconds:.1f} s" for label, seconds in TIMINGS.items())
        terminalreporter.write_line(f"delta_spark timings: {parts}")
