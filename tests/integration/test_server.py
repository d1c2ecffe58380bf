"""The server is vanilla: our worker code runs there by value, and it cannot import us.

Also: the embedded default server (``connect()`` without SPARK_REMOTE) starts Spark 4.1, and its
sessions share one Python daemon.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark import cloudpickle

from delta_connect_py.pyspark_client import spark_line
from delta_connect_py.session import (
    CLIENT_PYSPARK,
    CLIENT_PYTHON,
    LOCAL_RELATION_CHUNK_CONF,
    LOCAL_RELATION_SIZE_CONF,
)
from delta_connect_py.worker.archives import in_worker

# Functions defined here run on the server's workers, which cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

REPO = Path(__file__).resolve().parents[2]
VANILLA_WORKER_PYTHON = REPO / ".venv-worker" / "bin" / "python"


def _probe_worker(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import importlib.util
    import sys as worker_sys

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict(
        {
            "executable": [worker_sys.executable],
            "has_delta_connect_py": [importlib.util.find_spec("delta_connect_py") is not None],
        }
    )


def _worker_python_version(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import sys as worker_sys

    for _ in batches:
        pass
    version = f"{worker_sys.version_info.major}.{worker_sys.version_info.minor}"
    yield pa.RecordBatch.from_pydict({"python": [version]})


def test_package_worker_code_runs_by_value(spark: Any) -> None:
    """``in_worker``'s wrapper, a function of the package, runs on a worker that cannot import
    the package: it was pickled by value."""
    frame = spark.range(1, numPartitions=1)
    rows = frame.mapInArrow(in_worker(_worker_python_version), "python string")
    assert [row["python"] for row in rows.collect()] == [CLIENT_PYTHON]


def test_local_data_reaches_the_server_whatever_its_spark_version(spark: Any) -> None:
    """``createDataFrame`` of local rows (every listing sends one) works on the server under
    test: a pyspark 4.1 client reads settings a Spark 4.0 server does not define, and a 4.2
    client one that a 4.1 server gives with a unit, which ``prepare_session`` sets (4.1's
    defaults, as numbers) for such pairs."""
    frame = spark.createDataFrame([(2, "b"), (1, "a")], "id long, name string")
    assert [tuple(row) for row in frame.orderBy("id").collect()] == [(1, "a"), (2, "b")]
    if (spark_line(CLIENT_PYSPARK) or (0, 0)) >= (4, 1):
        # Defined by a 4.1 server, set by prepare_session on an older one: readable either way.
        for key in LOCAL_RELATION_CHUNK_CONF:
            assert int(spark.conf.get(key)) > 0
    if (spark_line(CLIENT_PYSPARK) or (0, 0)) >= (4, 2):
        for key in LOCAL_RELATION_SIZE_CONF:
            assert int(spark.conf.get(key)) > 0


def _worker_daemon_pid(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import os as worker_os

    for _ in batches:
        pass
    # pyspark's workers are forked by its daemon process.
    yield pa.RecordBatch.from_pydict({"daemon": [worker_os.getppid()]})


def test_embedded_server_sessions_share_one_python_daemon(spark_remote: str) -> None:
    """Artifact isolation off (``embedded.LAUNCH_CONF``): a new session reuses the daemon and
    its warm workers rather than leaving another idle daemon behind (SPARK-54055)."""
    from pyspark.sql.connect.session import SparkSession

    sessions = [SparkSession.builder.remote(spark_remote).create() for _ in range(3)]
    try:
        if sessions[0].conf.get("spark.sql.artifact.isolation.enabled") != "false":
            pytest.skip("this server isolates its sessions (not the embedded server)")
        daemons = {
            session.range(1, numPartitions=1)
            .mapInArrow(_worker_daemon_pid, "daemon long")
            .collect()[0]["daemon"]
            for session in sessions
        }
    finally:
        for session in sessions:
            session.stop()
        # Finalize them now: a Connect SparkSession's __del__ closes its client, which shuts
        # down the release thread pool all clients share; run by the garbage collector inside
        # that pool's submit (a later test's query), it deadlocks (SPARK-55362, SPARK-55406).
        del sessions, session
        gc.collect()
    assert len(daemons) == 1, f"one Python daemon per session: {sorted(daemons)}"


@pytest.mark.cluster
def test_server_workers_cannot_import_delta_connect_py(spark: Any) -> None:
    if not os.environ.get("SPARK_REMOTE") and not os.environ.get("DELTA_CONNECT_WORKER_PYTHON"):
        pytest.skip("the embedded server's workers run this interpreter, which has our package")
    schema = "executable string, has_delta_connect_py boolean"
    [row] = spark.range(1, numPartitions=1).mapInArrow(_probe_worker, schema).collect()
    assert not row["has_delta_connect_py"], (
        f"the server's worker Python {row['executable']} can import delta_connect_py; "
        "the server must be vanilla"
    )


# Runs in a fresh interpreter: connect() reuses any Spark Connect session already active in the
# process (SparkSession.builder.getOrCreate), which would hide the embedded server.
EMBEDDED_PROBE = """
import json
from delta_connect_py import connect, session

spark = connect()
server = session._embedded
print(json.dumps({
    "version": spark.version,
    "remote": server.remote,
    "pid": server.process.pid,
    "scratch": str(server.scratch_dir),
}))
spark.stop()
server.stop()
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left for whoever adopted an orphan to reap does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# Starts the embedded server, reports its process, then waits to be killed.
KILLED_CLIENT = """
import json, sys, time
from delta_connect_py import connect, session

spark = connect()
spark.range(10).repartition(2).collect()  # a shuffle: block manager files in Spark's local dir
server = session._embedded
print(json.dumps({"pid": server.process.pid, "scratch": str(server.scratch_dir)}), flush=True)
time.sleep(600)
"""


def _embedded_env() -> dict[str, str]:
    """This environment without SPARK_REMOTE (so ``connect()`` starts the embedded server),
    its workers on the vanilla worker Python when there is one."""
    env = {key: value for key, value in os.environ.items() if key != "SPARK_REMOTE"}
    if VANILLA_WORKER_PYTHON.exists():
        env["DELTA_CONNECT_WORKER_PYTHON"] = str(VANILLA_WORKER_PYTHON)
    return env


@pytest.mark.embedded
def test_embedded_server_stops_when_its_client_is_killed() -> None:
    """A client killed outright (no exit handlers run) does not leave its server running, nor
    its scratch folder (log and Spark's local directory) behind."""
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT],
        env=_embedded_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert client.stdout is not None
    started = json.loads(client.stdout.readline())
    server_pid, scratch = started["pid"], Path(started["scratch"])
    try:
        assert _alive(server_pid)
        assert list((scratch / "spark-local").glob("blockmgr-*")), "Spark's local dir elsewhere"
        client.kill()
        client.wait(timeout=30)
        deadline = time.monotonic() + 60
        while (_alive(server_pid) or scratch.exists()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _alive(server_pid), "the embedded server outlived its killed client"
        assert not scratch.exists(), "the killed client's server left its scratch folder"
    finally:
        client.kill()
        if _alive(server_pid):
            os.killpg(server_pid, signal.SIGKILL)


@pytest.mark.embedded
def test_connect_starts_the_embedded_server() -> None:
    result = subprocess.run(
        [sys.executable, "-c", EMBEDDED_PROBE],
        env=_embedded_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    try:
        assert probe["version"].startswith("4.1")
        assert probe["remote"].startswith("sc://127.0.0.1:")
        assert not _alive(probe["pid"]), "the embedded server outlived its stop()"
        assert not Path(probe["scratch"]).exists(), "stop() left the server's scratch folder"
    finally:
        if _alive(probe["pid"]):
            os.killpg(probe["pid"], signal.SIGKILL)


@pytest.mark.embedded
def test_snapshot_state_stays_on_its_own_server(spark_remote: str) -> None:
    """pyspark binds a checkpoint's result to the *active* session; ours must not follow it."""
    from pyspark.sql.connect.session import SparkSession

    from delta_connect_py import DeltaTable, connect
    from delta_connect_py.embedded import EmbeddedServer
    from tests.conftest import CONFORMANCE

    other = EmbeddedServer(
        worker_python=os.environ.get("DELTA_CONNECT_WORKER_PYTHON", sys.executable)
    )
    other.start()
    try:
        other_session = connect(other.remote)
        # A session of its own (not connect()'s shared one), so it can be closed here.
        main_session = SparkSession.builder.remote(spark_remote).create()
        table = DeltaTable.for_path(main_session, str(CONFORMANCE / "delta-rs/simple_table/delta"))
        snapshot = table.snapshot()
        assert snapshot.state.num_of_files == snapshot.all_files().count() == 5
        assert snapshot.state_df().sparkSession is main_session
        del snapshot, table
        main_session.stop()
        other_session.stop()
    finally:
        other.stop()


@pytest.mark.embedded
def test_a_class_archive_is_built_once_and_mapped_by_later_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first server of an installation records its classes; once it stopped, the archive is
    built in the background, and the next server maps it (``-Xshare:on``: a JVM that cannot
    map it refuses to start) and reads a table."""
    from delta_connect_py import DeltaTable, class_archive, connect
    from delta_connect_py.embedded import SERVER_CONF, EmbeddedServer
    from tests.conftest import CONFORMANCE

    monkeypatch.setenv(class_archive.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(class_archive.ENABLED_ENV, raising=False)
    worker_python = os.environ.get("DELTA_CONNECT_WORKER_PYTHON", sys.executable)
    first = EmbeddedServer(worker_python=worker_python).start()
    archive = first.class_archive
    try:
        assert archive is not None
        assert first.class_archive_option == f"-XX:DumpLoadedClassList={archive.class_list}"
        spark = connect(first.remote)
        assert spark.range(3).count() == 3
        spark.stop()
    finally:
        first.stop()
    deadline = time.monotonic() + 600
    while not archive.published and time.monotonic() < deadline:
        time.sleep(1)
    assert archive.published, f"no class archive built in {tmp_path}"
    assert sorted(p.name for p in archive.path.parent.iterdir()) == [archive.path.name]

    required = f"{SERVER_CONF['spark.driver.extraJavaOptions']} -Xshare:on"
    second = EmbeddedServer(
        worker_python=worker_python, extra_conf={"spark.driver.extraJavaOptions": required}
    ).start()
    try:
        assert second.class_archive_option == f"-XX:SharedArchiveFile={archive.path}"
        spark = connect(second.remote)
        table = DeltaTable.for_path(spark, str(CONFORMANCE / "delta-rs/simple_table/delta"))
        assert table.snapshot().state.num_of_files == 5
        del table
        spark.stop()
    finally:
        second.stop()
        gc.collect()  # see test_embedded_server_sessions_share_one_python_daemon
