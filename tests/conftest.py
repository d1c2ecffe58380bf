"""Shared fixtures: one Spark Connect server for the whole run, conformance table copies, and
a count of the library's log listings.

SPARK_REMOTE set: tests use that server (e.g. the compose service). Unset: one standalone server
is started from the installed pyspark for the session, its Python workers running
DELTA_CONNECT_WORKER_PYTHON (an interpreter that cannot import delta_connect_py), and stopped at
the end.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CONFORMANCE = Path(
    os.environ.get(
        "DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[2] / "shared" / "conformance"
    )
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        if "integration" in parts or "conformance" in parts:
            item.add_marker(pytest.mark.integration)
        if "conformance" in parts:
            item.add_marker(pytest.mark.conformance)


def _vanilla_worker_python() -> str:
    """The repo's .venv-worker (pyarrow, no delta_connect_py) if made, else this interpreter."""
    candidate = Path(__file__).resolve().parents[1] / ".venv-worker" / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


@pytest.fixture(scope="session")
def spark_remote() -> Iterator[str]:
    """``sc://`` address of the server under test: SPARK_REMOTE, else one started for the run."""
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        yield remote
        return
    from delta_connect_py.embedded import EmbeddedServer

    worker_python = os.environ.get("DELTA_CONNECT_WORKER_PYTHON") or _vanilla_worker_python()
    server = EmbeddedServer(worker_python=worker_python).start()
    try:
        yield server.remote
    finally:
        _close_sessions_of(server.remote)
        server.stop()


def _close_sessions_of(remote: str) -> None:
    """Close every client session of ``remote`` before its server goes: server-side caches
    still referenced at exit would otherwise be released against a dead server, with minutes
    of retries."""
    from delta_connect_py import session as sessions

    for target, session in list(sessions._sessions.items()):
        if target == remote:
            session.stop()


def require(missing: list[str], suite: str, required_variable: str) -> None:
    """Skip ``suite``'s tests when something they need is ``missing``; fail them instead when
    ``required_variable`` is set (CI), so a broken install cannot pass as skipped."""
    if not missing:
        return
    message = f"{suite} tests need " + " and ".join(missing)
    if os.environ.get(required_variable):
        pytest.fail(f"{required_variable} is set but {message}", pytrace=False)
    pytest.skip(message)


def serve(server: Any) -> Iterator[str]:
    """A started server's remote for a session fixture; its client sessions are closed, then
    the server stopped, at the end."""
    try:
        yield server.remote
    finally:
        _close_sessions_of(server.remote)
        server.stop()


def worker_python() -> str:
    """The interpreter of the servers' Python workers that the tests start."""
    return os.environ.get("DELTA_CONNECT_WORKER_PYTHON") or _vanilla_worker_python()


def log_bytes(log: Path) -> dict[str, bytes]:
    """The content of every file directly in the ``_delta_log`` folder ``log``, by name: what
    an operation must leave as it was."""
    return {path.name: path.read_bytes() for path in log.iterdir() if path.is_file()}


def sorted_rows(df: Any, drop: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """A DataFrame's rows as tuples (without the ``drop`` columns), in a fixed order."""
    columns = [c for c in df.columns if c not in drop]
    return sorted((tuple(row) for row in df.select(*columns).collect()), key=repr)


@pytest.fixture(scope="session")
def spark(spark_remote: str) -> Iterator[object]:
    from delta_connect_py import connect

    session = connect(spark_remote)
    yield session
    # Closing the client first: a server-side cached state still referenced at exit would
    # otherwise be released against a stopped server, with retries for minutes.
    session.stop()


@pytest.fixture
def conformance_table(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Copy a conformance table (relative to ../shared/conformance) into tmp and return it."""

    def copy(relative: str) -> Path:
        source = CONFORMANCE / relative
        target = tmp_path / relative.replace("/", "__")
        # ../shared is read-only: copy contents, not modes, so tests may write to the copy.
        shutil.copytree(source, target, copy_function=shutil.copyfile)
        for directory, _, _ in os.walk(target):
            os.chmod(directory, 0o755)
        return target

    return copy


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ``_delta_log`` folders the library listed (one Spark job each), in order."""
    from delta_connect_py import table_log

    listed: list[str] = []
    real = table_log.list_log

    def counting(spark: Any, log_dir: str, *args: Any) -> Any:
        listed.append(log_dir)
        return real(spark, log_dir, *args)

    monkeypatch.setattr(table_log, "list_log", counting)
    return listed


@pytest.fixture
def checkpoint_files_joined() -> Iterator[None]:
    """A checkpoint's file actions joined to the replay at query time whatever its size (a
    large checkpoint's path), not replayed with its commits as a small one's are."""
    from tests.checkpoint_paths import checkpoint_files

    with checkpoint_files(joined=True):
        yield
