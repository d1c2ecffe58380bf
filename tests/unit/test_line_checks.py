"""The text checks of commit lines done on bytes in the workers (``worker.line_checks``)."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.plans.action_lines import corrupt_line_error
from delta_connect_py.worker.failures import WorkerFailure, decode_worker_failure
from delta_connect_py.worker.line_checks import (
    FREE_FORM_PREFIX,
    JOINED,
    JOINED_OBJECTS,
    LINE_PROBLEM_COLUMN,
    NO_END,
    NO_START,
    NON_STRING_PATH,
    PATH_NOT_STRING,
    line_problem,
    line_problems,
)
from delta_connect_py.worker.log_files import CommitLinesRead, read_commit_lines

ADD = (
    '{"add":{"path":"a%20b/x.parquet","partitionValues":{"p":"1"},"size":1,'
    '"modificationTime":1,"dataChange":true,'
    '"stats":"{\\"numRecords\\":1,\\"minValues\\":{\\"id\\":\\"}{\\\\\\"k\\\\\\":\\"}}"}}'
)

VALID = [
    ADD,
    '{"commitInfo":{"operationParameters":{"path":5},"x":[{"a":1},{"b":2}]}}',
    '{"futureAction":{"x":[1,{"y":2}]}}',
    '{"remove":{"path":null,"dataChange":true}}',
    ' \t{"txn":{"appId":"a","version":3}} ',
    '{"add":{"path":"x\u2028é}{\\"a\\":1}","size":1}}',
    '{"metaData":{"id":"i","configuration":{"k":"} {\\"q\\": 1"}}}',
    '{"cdc":{"path" : "c.parquet"}}',
    '{"add":{"path":\x0b\x0c"x.parquet"}}',  # vertical tab and form feed are whitespace
    "   ",
]

INVALID = {
    '"add":{"path":"x"}}': NO_START,
    '{"add":{"path":"x.parquet","size":': NO_END,
    '{"add":{"path":"x"}}{"add":{"path":"y"}}': JOINED,
    '{"add":{"path":"x"}} {"remove":{"path":"y"}}': JOINED,
    '{"add":{"path":"x"}}#{"add":{"path":"y"}}': JOINED,  # a damaged newline
    '{"add":{"path":"x"}}\x0b\x0b{"add":{"path":"y"}}': JOINED,
    '{"add":{"path":"x"}}é{"add":{"path":"y"}}': JOINED,  # ...damaged into two bytes
    '{"commitInfo":{}}{"add":{"path":"y"}}': JOINED,
    '{"add":{"path":5}}': NON_STRING_PATH,
    '{"remove":{"path" :true}}': NON_STRING_PATH,
    '{"add":{"path":{"a":"b"}}}': NON_STRING_PATH,
    '{"cdc":{"path":["x"]}}': NON_STRING_PATH,
}


@pytest.mark.parametrize("line", VALID)
def test_valid_lines_have_no_problem(line: str) -> None:
    assert line_problem(line.encode()) is None


@pytest.mark.parametrize(("line", "problem"), sorted(INVALID.items()))
def test_each_kind_of_invalid_line_is_named(line: str, problem: str) -> None:
    assert line_problem(line.encode()) == problem


def _spark_text_problem(line: str) -> str | None:
    """What ``action_lines.text_problem`` finds on a valid UTF-8 line, with Python's ``re`` in
    ASCII mode standing for Java's (whose ``\\s`` is ASCII whitespace) on the decoded text."""
    if re.fullmatch(r"\s*", line, re.ASCII):
        return None
    if not re.match(r"\s*\{", line, re.ASCII):
        return NO_START
    if not re.search(r"\}\s*\Z", line, re.ASCII):
        return NO_END
    if re.search(JOINED_OBJECTS, line, re.ASCII):
        return JOINED
    if not line.startswith(FREE_FORM_PREFIX) and re.search(PATH_NOT_STRING, line, re.ASCII):
        return NON_STRING_PATH
    return None


_FRAGMENTS = st.sampled_from(
    [
        *('{"add":', '{"commitInfo":', '"path"', ":", " ", "\t", "5", '"x"', "null", "n"),
        *("{", "}", ",", '"', "\\", "é", "€", "𝄞", "\u2028", '{"a":', "}}", "#", "\x0b", "\x0c"),
        *("}é", "}𝄞 ", "}#"),
    ]
)


@settings(max_examples=2000)
@given(st.lists(_FRAGMENTS, max_size=14).map("".join))
def test_byte_checks_find_what_the_spark_expressions_find(line: str) -> None:
    assert line_problem(line.encode()) == _spark_text_problem(line)


@settings(max_examples=300)
@given(st.lists(st.lists(_FRAGMENTS, max_size=14).map("".join), min_size=1, max_size=20))
def test_a_batch_of_lines_is_checked_as_each_line_alone(lines: list[str]) -> None:
    checked = line_problems(pa.array(lines, pa.string())).to_pylist()
    assert checked == [line_problem(line.encode()) for line in lines]


def test_the_batch_check_names_each_kind_of_problem() -> None:
    lines = [*VALID, *INVALID]
    expected = [None] * len(VALID) + list(INVALID.values())
    assert line_problems(pa.array(lines, pa.string())).to_pylist() == expected


def _read(tmp_path: Path, content: bytes, request: CommitLinesRead) -> list[dict[str, object]]:
    commit = tmp_path / "_delta_log" / f"{7:020d}.json"
    commit.parent.mkdir(exist_ok=True)
    commit.write_bytes(content)
    batch = pa.RecordBatch.from_pydict(
        {"version": [7], "path": [f"file:{commit}"]},
        schema=pa.schema([("version", pa.int64()), ("path", pa.string())]),
    )
    return [row for out in read_commit_lines(request, [batch]) for row in out.to_pylist()]


def test_returned_lines_carry_their_problem(tmp_path: Path) -> None:
    content = "\n".join([ADD, *INVALID]).encode()
    rows = _read(tmp_path, content, CommitLinesRead("t"))
    assert [row[LINE_PROBLEM_COLUMN] for row in rows] == [None, *INVALID.values()]


def _worker_error(tmp_path: Path, content: bytes, request: CommitLinesRead) -> CorruptLogFileError:
    with pytest.raises(WorkerFailure) as info:
        _read(tmp_path, content, request)
    error = decode_worker_failure(str(info.value))
    assert isinstance(error, CorruptLogFileError)
    return error


def test_a_left_out_line_that_is_not_one_object_fails_the_task(tmp_path: Path) -> None:
    """A line no query parses (a skipped commitInfo) is checked for its shape here."""
    content = f'{ADD}\n{{"commitInfo":{{}}}}{{"add":{{"path":"y"}}}}\n'.encode()
    request = CommitLinesRead("t", skip_prefixes=('{"commitInfo"',))
    error = _worker_error(tmp_path, content, request)
    message = str(error)
    assert f"{7:020d}.json" in message and "version 7:" in message
    assert f"a line is not a valid Delta action ({JOINED})" in message
    assert error.message_parameters["path"] == f"file://{tmp_path}/_delta_log"


def test_a_line_not_utf8_fails_the_task_as_the_spark_check_would_name_it(
    tmp_path: Path,
) -> None:
    content = f"{ADD}\n".encode() + b'{"add":{"path":"x\xff.parquet"}}\n'
    error = _worker_error(tmp_path, content, CommitLinesRead("t"))
    assert "version 7: a line is not a valid Delta action (it is not valid UTF-8)" in str(error)
    # The same text as the Spark-side failure of the same line decodes to.
    spark_side = corrupt_line_error(
        " \u241e ".join(
            [
                "DELTA_CONNECT_INVALID_ACTION_LINE",
                error.message_parameters["file"],
                "it is not valid UTF-8",
                '{"add":{"path":"x\ufffd.parquet"}}',
                "",
            ]
        )
    )
    assert spark_side is not None and str(spark_side) == str(error)


def test_the_check_expression_printed_by_another_failure_is_no_corrupt_line() -> None:
    """An analysis failure of a plan holding the check prints its expression, marker and
    separators included: that names no file and is not the check's failure."""
    printed = (
        "[DATATYPE_MISMATCH] concat(DELTA_CONNECT_INVALID_ACTION_LINE \u241e , _file#795878, "
        " \u241e , CASE WHEN isnotnull(_line_problem#12) THEN _line_problem#12 END,  \u241e , "
        "substring(value#3, 1, 200),  \u241e )"
    )
    assert corrupt_line_error(printed) is None
