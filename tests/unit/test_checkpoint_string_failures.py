"""The failure a query raises on a checkpoint string that is not UTF-8 (a sidecar's name, the
protocol or metadata the client reads), as the client decodes it from Spark's error text
(``plans.checkpoint_strings.not_utf8_failure``)."""

from __future__ import annotations

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.plans.checkpoint_strings import MARKER, not_utf8_failure
from delta_connect_py.plans.raised_failures import SEPARATOR

FILE = "file:/data/my table/_delta_log/00000000000000000010.checkpoint.parquet"


def test_the_raised_message_names_the_file_the_version_and_the_column() -> None:
    raised = f"[USER_RAISED_EXCEPTION] {MARKER}{SEPARATOR}{FILE}{SEPARATOR}10{SEPARATOR}txn"
    error = not_utf8_failure(f"{raised}{SEPARATOR} SQLSTATE: P0001")
    assert isinstance(error, CorruptLogFileError)
    message = str(error)
    assert FILE in message
    assert "version 10: a value of its txn column is not valid UTF-8" in message


def test_the_expression_printed_by_another_failure_is_not_decoded() -> None:
    """An analysis failure of a plan holding the test prints its expression, marker and
    separators included: that names no file and is not the test's failure."""
    printed = (
        f"[DATATYPE_MISMATCH] concat({MARKER}{SEPARATOR}, _metadata#795878.file_path, "
        f"{SEPARATOR}10{SEPARATOR}, CASE WHEN ... END, {SEPARATOR})"
    )
    assert not_utf8_failure(printed) is None
    assert not_utf8_failure("[USER_RAISED_EXCEPTION] something else") is None
