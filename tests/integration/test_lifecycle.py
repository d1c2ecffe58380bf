"""A session's life against real servers: fail fast, survive restarts, one-line errors.

- Fail fast: a port where nothing listens, and a server stopped after ``connect``, raise
  ``SERVER_UNAVAILABLE`` after the session's bounded retry policy (``server_timeout``), never
  pyspark's default minutes of retries.
- Restarts: a new server on the same port, and a second session after the first was stopped,
  serve every call (pyspark's active and default sessions are never relied on).
- ``connect`` runs no job; a server whose Python workers run another Python minor version fails
  the first call that runs a job on them with ``PythonVersionMismatchError`` naming both.
- Spark failures (a cast, an unknown scheme, a read-only table directory) are one-line
  DeltaErrors with the original failure as ``cause`` and no chained trace, and a refused write
  leaves nothing behind in ``_delta_log``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import DeltaTable, connect, connections, session
from delta_connect_py.embedded import EmbeddedServer, free_port
from delta_connect_py.errors import (
    CastFailedError,
    CorruptLogFileError,
    DeltaError,
    InvalidArgumentError,
    PythonVersionMismatchError,
    ServerFileNotFoundError,
    ServerFileSystemMissingError,
    ServerUnavailableError,
    StorageAccessDeniedError,
)

SAMPLE_TABLE = Path(__file__).resolve().parents[2] / "examples" / "sample_table"


def _worker_python() -> str:
    return os.environ.get("DELTA_CONNECT_WORKER_PYTHON", sys.executable)


def _sample_copy(tmp_path: Path, name: str = "sample") -> Path:
    target = tmp_path / name
    shutil.copytree(SAMPLE_TABLE, target)
    return target


def _one_line_error(error: DeltaError) -> None:
    """Raised ``from None`` (no chained trace), the Spark failure kept as ``cause``."""
    assert error.__suppress_context__ and error.__cause__ is None
    assert error.cause is not None and not isinstance(error.cause, DeltaError)
    assert "\n" not in str(error) and "JVM stacktrace" not in str(error)


def test_nothing_listening_is_server_unavailable_after_the_bound() -> None:
    remote = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailableError) as raised:
        connect(remote, server_timeout=1.5)
    error = raised.value
    assert error.error_class == "SERVER_UNAVAILABLE"
    assert error.message_parameters["address"] == remote
    assert error.message_parameters["bound"] == "1.5 s"
    _one_line_error(error)
    assert remote not in session._sessions or session._sessions[remote].is_stopped


def test_the_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(session.SERVER_TIMEOUT_ENV, "0.5")
    remote = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnavailableError) as raised:
        connect(remote)
    assert raised.value.message_parameters["bound"] == "0.5 s"


def test_the_bounded_policy_is_pysparks_default_with_fewer_retries() -> None:
    from pyspark.sql.connect.client.retries import DefaultPolicy, Retrying

    policy = connections.bounded_retry_policy(30)
    assert isinstance(policy, DefaultPolicy)
    assert policy.max_retries is not None and 0 < policy.max_retries < DefaultPolicy().max_retries
    # Every wait pyspark's own Retrying would sleep, jitter included, sums to at most the bound.
    waits: list[float] = []
    unavailable = _unavailable_error()
    retrying = Retrying([policy], sleep=waits.append)
    with pytest.raises(Exception) as raised:
        for attempt in retrying:
            with attempt:
                raise unavailable
    # pyspark 4.1 and later give up with the last failure; 4.0 with RetriesExceeded from it.
    assert unavailable in (raised.value, raised.value.__cause__)
    assert len(waits) == policy.max_retries
    assert sum(waits) <= 30


def _unavailable_error() -> Exception:
    import grpc

    class Unavailable(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAVAILABLE

        def trailing_metadata(self) -> None:
            return None

    return Unavailable()


@pytest.fixture
def own_servers() -> Iterator[list[EmbeddedServer]]:
    """Servers of the test's own (the first started here), all on one port; every one is
    stopped at the end, and the sessions ``connect`` made to them are dropped."""
    servers = [EmbeddedServer(worker_python=_worker_python()).start()]
    try:
        yield servers
    finally:
        for target, connected in list(session._sessions.items()):
            if target == servers[0].remote:
                session._drop(target, connected)
        for server in servers:
            server.stop()


#: A worker Python that says it is Python 3.10 (pyspark's worker compares ``sys.version_info``
#: with the client's version before it unpickles anything): this machine has one Python only.
_OTHER_PYTHON_SITECUSTOMIZE = """
import collections, sys
sys.version_info = collections.namedtuple("version_info", "major minor micro releaselevel serial")(
    3, 10, 0, "final", 0
)
"""


def _worker_python_claiming_3_10(folder: Path) -> Path:
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(_OTHER_PYTHON_SITECUSTOMIZE)
    wrapper = folder / "python"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="{folder}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f'exec "{_worker_python()}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.embedded
def test_a_worker_python_of_another_minor_version_fails_the_first_job_not_connect(
    tmp_path: Path,
) -> None:
    worker = _worker_python_claiming_3_10(tmp_path / "other-python")
    server = EmbeddedServer(worker_python=str(worker)).start()
    try:
        spark = connect(server.remote)  # no job: the workers are not asked yet
        table = DeltaTable.for_path(spark, str(_sample_copy(tmp_path)))
        with pytest.raises(PythonVersionMismatchError) as raised:
            table.snapshot()  # its listing is the first job on the workers
        assert raised.value.message_parameters == {
            "server_version": "3.10",
            "client_version": session.CLIENT_PYTHON,
        }
        assert "PYSPARK_PYTHON" in str(raised.value)
        _one_line_error(raised.value)
    finally:
        for target, connected in list(session._sessions.items()):
            if target == server.remote:
                session._drop(target, connected)
        server.stop()


@pytest.mark.embedded
def test_a_stopped_server_is_unavailable_and_a_restarted_one_serves_a_new_connect(
    own_servers: list[EmbeddedServer], tmp_path: Path
) -> None:
    root = str(_sample_copy(tmp_path))
    remote = own_servers[0].remote
    spark = connect(remote, server_timeout=2)
    assert connections.retry_bound_seconds(spark) == 2
    expected = DeltaTable.for_path(spark, root).snapshot().state.num_of_files

    own_servers[0].stop()
    with pytest.raises(ServerUnavailableError) as raised:
        DeltaTable.for_path(spark, root).snapshot().state  # noqa: B018
    assert raised.value.message_parameters["address"] == remote
    assert raised.value.message_parameters["bound"] == "2 s"
    _one_line_error(raised.value)

    own_servers.append(
        EmbeddedServer(port=own_servers[0].port, worker_python=_worker_python()).start()
    )
    # No call failed on the new server: connect() finds the session's server application
    # changed (a restarted server accepts the old session id as a new, empty session).
    again = connect(remote, server_timeout=2)
    assert again is not spark and spark.is_stopped
    snapshot = DeltaTable.for_path(again, root).snapshot()
    assert snapshot.state.num_of_files == expected
    assert snapshot.all_files().count() == expected


def test_a_second_session_works_after_the_first_is_stopped(
    spark_remote: str, tmp_path: Path
) -> None:
    """pyspark makes the first session the default and active one; stopping it leaves none,
    and pyspark's ``localCheckpoint`` looks the active session up."""
    from pyspark.sql.connect.session import SparkSession

    root = str(_sample_copy(tmp_path))
    saved_default = SparkSession._default_session
    saved_active = getattr(SparkSession._active_session, "session", None)
    SparkSession._default_session = None
    SparkSession._active_session.session = None
    first = second = None
    try:
        first = SparkSession.builder.remote(spark_remote).create()
        second = SparkSession.builder.remote(spark_remote).create()
        assert SparkSession.getActiveSession() is first
        DeltaTable.for_path(first, root).snapshot().state  # noqa: B018
        first.stop()
        with pytest.raises(Exception, match="NO_ACTIVE_OR_DEFAULT_SESSION"):
            SparkSession.active()  # what pyspark's checkpoint result would be bound to

        table = DeltaTable.for_path(second, root)
        snapshot = table.snapshot()
        state = snapshot.state
        files = snapshot.all_files()
        assert files.sparkSession is second
        assert files.count() == state.num_of_files > 0
        assert snapshot.to_df().count() > 0
        changes = table.load_cdf(0)
        assert changes.sparkSession is second
        assert changes.count() > 0
    finally:
        for made in (first, second):
            if made is not None:
                made.stop()
        SparkSession._default_session = saved_default
        SparkSession._active_session.session = saved_active


def test_a_filter_value_of_another_type_is_refused_before_any_job(
    spark: Any, tmp_path: Path
) -> None:
    snapshot = DeltaTable.for_path(spark, str(_sample_copy(tmp_path))).snapshot()
    with pytest.raises(InvalidArgumentError) as raised:
        snapshot.to_df(filter=[("order_id", ">", "abc")])
    assert raised.value.message_parameters["argument"] == "filter"
    assert "bigint" in raised.value.message_parameters["expected"]
    # A number written as a string is still compared as Spark would (cast), as before.
    assert snapshot.to_df(filter=[("order_id", "=", "1")]).count() == 1
    # A string for a date column is cast by the server now (no job), not when rows are read.
    with pytest.raises(InvalidArgumentError) as raised:
        snapshot.to_df(filter=[("order_date", ">", "not a date")])
    assert "a string Spark casts to a date" in raised.value.message_parameters["expected"]
    assert "'not a date'" in raised.value.message_parameters["value"]
    all_rows = snapshot.to_df().count()
    assert snapshot.to_df(filter=[("order_date", ">=", "1970-01-01")]).count() == all_rows


def test_a_cast_the_server_refuses_is_a_one_line_error(spark: Any, tmp_path: Path) -> None:
    """The same failure met inside one of our jobs (here: a collect of ours over a frame of
    ours filtered by the caller, a date column compared with a word)."""
    import pyspark.sql.connect.functions as F

    from delta_connect_py.plans.spark import collect

    snapshot = DeltaTable.for_path(spark, str(_sample_copy(tmp_path))).snapshot()
    frame = snapshot.to_df().where(F.col("order_date") > F.lit("not a date"))
    with pytest.raises(CastFailedError) as raised:
        collect(frame)
    assert raised.value.message_parameters["value"] == "'not a date'"
    assert raised.value.message_parameters["target_type"] == "DATE"
    _one_line_error(raised.value)


@pytest.mark.parametrize("scheme", ["foo", "s3a"])
def test_a_scheme_the_server_has_no_file_system_for(spark: Any, scheme: str) -> None:
    """A stock server: no ``foo:`` file system, and no hadoop-aws for ``s3a:``."""
    with pytest.raises(ServerFileSystemMissingError) as raised:
        DeltaTable.for_path(spark, f"{scheme}://bucket/table").snapshot().state  # noqa: B018
    assert raised.value.message_parameters["scheme"] == scheme
    _one_line_error(raised.value)


@pytest.fixture
def read_only_table(tmp_path: Path) -> Iterator[Path]:
    """The sample table with commits 0-3 expired, its directory bind-mounted read-only (root
    ignores file modes, not a read-only mount)."""
    root = _sample_copy(tmp_path)
    old = time.time() - 60 * 86400
    for path in (root / "_delta_log").iterdir():
        os.utime(path, (old, old))
    mount = subprocess.run(["mount", "--bind", str(root), str(root)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mount.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(root)], check=True)
        probe = root / "_delta_log" / "probe"
        with pytest.raises(OSError):
            probe.write_text("x")
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


def _listing(root: Path) -> dict[str, tuple[int, float]]:
    log = root / "_delta_log"
    return {
        str(path.relative_to(log)): (path.stat().st_size, path.stat().st_mtime)
        for path in sorted(log.rglob("*"))
    }


@pytest.mark.parametrize("operation", ["create_checkpoint", "cleanup_metadata"])
def test_a_read_only_table_refuses_writes_in_one_line_and_keeps_its_log(
    spark: Any, read_only_table: Path, operation: str
) -> None:
    table = DeltaTable.for_path(spark, str(read_only_table))
    if operation == "cleanup_metadata":
        assert table.cleanup_metadata(dry_run=True)  # there is something to delete
    before = _listing(read_only_table)
    with pytest.raises(StorageAccessDeniedError) as raised:
        getattr(table, operation)()
    _one_line_error(raised.value)
    assert "_delta_log" in raised.value.message_parameters["path"]
    assert _listing(read_only_table) == before


def test_a_log_file_deleted_after_the_snapshot_is_a_one_line_error(
    spark: Any, tmp_path: Path
) -> None:
    root = _sample_copy(tmp_path)
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    (root / "_delta_log" / "00000000000000000005.json").unlink()
    with pytest.raises(ServerFileNotFoundError) as raised:
        snapshot.state  # noqa: B018
    assert raised.value.message_parameters["file"].endswith("00000000000000000005.json")
    _one_line_error(raised.value)


def test_a_corrupt_commit_is_one_line(spark: Any, tmp_path: Path) -> None:
    root = _sample_copy(tmp_path)
    commit = root / "_delta_log" / "00000000000000000005.json"
    commit.write_text(commit.read_text()[:40] + "\n")
    with pytest.raises(CorruptLogFileError) as raised:
        DeltaTable.for_path(spark, str(root)).snapshot().state  # noqa: B018
    assert raised.value.message_parameters["file"].endswith("00000000000000000005.json")
    _one_line_error(raised.value)
