"""Fixtures for comparing delta_connect_py with delta-spark itself.

``delta_spark``: a plain Spark Connect session to a server running the real delta-spark jars
(``tests/delta_spark_server.py``): $DELTA_SPARK_REMOTE if set, else one server started for the
session (port 15041 when free). Skipped only when ``.delta-jars/`` is missing and
DELTA_SPARK_REQUIRED is unset; with DELTA_SPARK_REQUIRED set a missing jar fails the tests.

``oracle_tables``: fresh tables written by delta-spark (SQL and DataFrameWriter over that
session), built once per session; see ``tables.build_tables`` for what each one exercises.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.delta_spark_server import JARS_DIR, delta_spark_server
from tests.integration.delta_spark.tables import OracleTables, build_tables


@pytest.fixture(scope="session", autouse=True)
def _delta_jars() -> None:
    """Skip (before any server starts) only when the jars folder is missing and not required."""
    if os.environ.get("DELTA_SPARK_REMOTE") or JARS_DIR.is_dir():
        return
    message = f"{JARS_DIR} is missing: run server/fetch-delta-jars.sh"
    if os.environ.get("DELTA_SPARK_REQUIRED"):
        pytest.fail(f"DELTA_SPARK_REQUIRED is set but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def delta_spark_remote() -> Iterator[str]:
    remote = os.environ.get("DELTA_SPARK_REMOTE")
    if remote:
        yield remote
        return
    server = delta_spark_server().start()  # raises when the delta-spark jar is missing
    try:
        yield server.remote
    finally:
        server.stop()


@pytest.fixture(scope="session")
def delta_spark(spark: Any, delta_spark_remote: str) -> Any:
    """A plain Spark Connect session on the delta-spark server (nothing of ours involved).

    Depends on ``spark`` so that the vanilla session is created first and stays pyspark's
    default/active session: pyspark 4.1 binds a ``localCheckpoint`` result to
    ``SparkSession.active()``, not to the checkpointed DataFrame's session, so with the oracle
    session active our materialized state would be looked up on the oracle server ("No
    DataFrame with id ... is found in the session").
    """
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote(delta_spark_remote).create()
    yield session
    session.stop()
    # Our materialized snapshots that are garbage by now release their server-side state while
    # the vanilla server still runs (``spark`` is torn down after this fixture), instead of at
    # interpreter exit, when pyspark would retry against a stopped server for ~10 minutes.
    gc.collect()


@pytest.fixture(scope="session")
def oracle_tables(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> OracleTables:
    return build_tables(delta_spark, tmp_path_factory.mktemp("delta-spark-tables"))
