"""Argument checks and short reprs on a real table and server: a bad argument is refused with
``DELTA_CONNECT_INVALID_ARGUMENT`` (not a misleading Delta error after a job), good arguments of
the accepted types still read, and the reprs show what is known without listing the log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import DeltaTable
from delta_connect_py.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    VersionNotFoundError,
)
from delta_connect_py.protocol.filenames import checkpoint_name, commit_name

TABLE = "dat/basic_append/delta"  # versions 0 and 1


def test_bad_arguments_on_a_real_table(spark: Any, conformance_table: Any) -> None:
    table = DeltaTable.for_path(spark, conformance_table(TABLE))  # a pathlib.Path
    with pytest.raises(InvalidArgumentTypeError, match=r"version=1\.5"):
        table.snapshot(1.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentTypeError, match=r"version='1'"):
        table.snapshot("1")  # type: ignore[arg-type]
    # A negative version is an int: left to delta-spark's error, which lists the versions.
    with pytest.raises(VersionNotFoundError, match=r"version -1\. Available versions: \[0, 1\]"):
        table.snapshot(-1)
    snapshot = table.snapshot(1)
    with pytest.raises(InvalidArgumentTypeError, match="filter=\"letter = 'a'\" \\(str\\)"):
        snapshot.to_df(filter="letter = 'a'")
    with pytest.raises(InvalidArgumentTypeError, match="columns='letter'"):
        snapshot.to_df(columns="letter")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="limit=-1"):
        table.history(-1)
    # The accepted forms still read: a tuple of columns, a tuple filter.
    rows = snapshot.to_df(columns=("letter",), filter=("letter", "=", "a")).collect()  # type: ignore[arg-type]
    assert rows and {row["letter"] for row in rows} == {"a"}


def test_reprs_on_a_real_table(spark: Any, conformance_table: Any) -> None:
    root = conformance_table(TABLE)
    table = DeltaTable.for_path(spark, str(root))
    assert repr(table) == f"DeltaTable('file:{root}')"
    snapshot = table.snapshot()
    before = repr(snapshot)
    assert before == (
        f"Snapshot('file:{root}', version=1, checkpoint=none, commits_after_checkpoint=2)"
    )
    assert commit_name(0) not in before
    state = snapshot.state
    assert repr(snapshot) == before[:-1] + (
        f", files={state.num_of_files}, size_in_bytes={state.size_in_bytes})"
    )

    result = table.create_checkpoint()
    text = repr(result)
    assert text.startswith("CheckpointResult(version=1, parts=1, ")
    assert f"files=[{checkpoint_name(1)}]" in text and str(root) not in text
    hint = json.loads((Path(root) / "_delta_log" / "_last_checkpoint").read_text())
    assert result.last_checkpoint is not None and json.loads(result.last_checkpoint) == hint
    assert result.last_checkpoint not in text and "_last_checkpoint written" in text
