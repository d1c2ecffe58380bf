"""Progress reporting: the library's log records of long jobs, and the command line's progress
bars of Spark jobs (pyspark's progress handlers), against a real server."""

from __future__ import annotations

import io
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import DeltaTable
from delta_connect_py.cli_progress import spark_progress_shown
from delta_connect_py.errors import MissingDeltaTableError

pytestmark = pytest.mark.integration

SAMPLE_TABLE = Path(__file__).resolve().parents[2] / "examples" / "sample_table"


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as stderr is for a user at a shell."""

    def isatty(self) -> bool:
        return True


def _handlers(spark: Any) -> list[Any]:
    return list(spark._client._progress_handlers)


@pytest.fixture
def sample_table(tmp_path: Path) -> Path:
    copy = tmp_path / "sample_table"
    shutil.copytree(SAMPLE_TABLE, copy)
    return copy


def test_state_job_logs_its_start_and_end(
    spark: Any, sample_table: Path, caplog: pytest.LogCaptureFixture
) -> None:
    snap = DeltaTable.for_path(spark, sample_table).snapshot()
    with caplog.at_level(logging.INFO, logger="delta_connect_py"):
        transactions = snap.transactions
        again = snap.transactions
    assert transactions == again
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("delta_connect_py")]
    assert any("runs the state job" in m for m in messages), messages
    for job in ("state reconstruction", "state"):
        started = [m for m in messages if m.startswith(f"{job} table=") and m.endswith("started")]
        ended = [m for m in messages if m.startswith(f"{job} table=") and ": done in " in m]
        assert len(started) == len(ended) == 1, messages
        assert f"version={snap.version}" in started[0]
    # The second read ran no job, and said nothing.
    assert sum("runs the state job" in m for m in messages) == 1


def test_failed_job_is_logged_as_failed(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = DeltaTable.for_path(spark, tmp_path / "no_table")
    with (
        caplog.at_level(logging.INFO, logger="delta_connect_py"),
        pytest.raises(MissingDeltaTableError),
    ):
        table.cleanup_metadata(dry_run=True)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("delta_connect_py")]
    assert any(m.startswith("log cleanup ") and ": failed after " in m for m in messages)


def test_progress_handler_is_registered_for_the_block_and_removed(spark: Any) -> None:
    before = _handlers(spark)
    terminal = Terminal()
    with spark_progress_shown(spark, terminal) as handler:
        assert handler is not None
        assert handler in _handlers(spark)
        assert spark.range(0, 200_000, 1, 4).selectExpr("sum(id)").collect()[0][0] > 0
    assert _handlers(spark) == before
    assert handler.updates >= 1  # at least the operation's final ("done") report


def test_progress_handler_is_removed_when_the_block_fails(spark: Any) -> None:
    before = _handlers(spark)
    with pytest.raises(RuntimeError), spark_progress_shown(spark, Terminal()) as handler:
        assert handler in _handlers(spark)
        raise RuntimeError("the command failed")
    assert _handlers(spark) == before


def test_no_progress_when_the_stream_is_not_a_terminal(spark: Any) -> None:
    before = _handlers(spark)
    stream = io.StringIO()
    with spark_progress_shown(spark, stream) as handler:
        assert handler is None
        assert _handlers(spark) == before
        spark.range(10).count()
    assert stream.getvalue() == ""
