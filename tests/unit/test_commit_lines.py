"""The worker that reads commit files many-per-task, without Spark."""

from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath
from urllib.parse import unquote

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.worker.failures import WorkerFailure, decode_worker_failure
from delta_connect_py.worker.log_files import (
    MAX_LISTED_CHECKSUM_BYTES,
    NO_LOG_DIR,
    PM_CHECKPOINT,
    PM_LINE,
    PM_SCAN,
    CommitLinesRead,
    LastCheckpointRead,
    file_uri,
    list_local_log,
    read_commit_lines,
)


def _batch(*pairs: tuple[int, str]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"version": [v for v, _ in pairs], "path": [p for _, p in pairs]},
        schema=pa.schema([("version", pa.int64()), ("path", pa.string())]),
    )


_SEGMENTS = st.lists(
    st.sampled_from(["a", "b c", "%25", "é", "#?", ":", ".", "..", "", "_delta_log", "0.json"]),
    max_size=6,
)


@settings(max_examples=500)
@given(st.sampled_from(["file:", "file:/", "file:///", "/", "//"]), _SEGMENTS)
def test_file_uri_of_a_local_path_is_its_pathlib_uri(prefix: str, segments: list[str]) -> None:
    """The per-directory URI cache gives exactly what pathlib gives for the whole path."""
    path = prefix + "/".join(segments)
    local = "/" + path.removeprefix("file:").lstrip("/") if path.startswith("file:") else path
    assert file_uri(path) == PurePosixPath(local).as_uri()


def test_lines_carry_version_and_file_uri(tmp_path: Path) -> None:
    log = tmp_path / "a b%25[x]" / "_delta_log"
    log.mkdir(parents=True)
    (log / "0.json").write_text('{"protocol":{}}\n\n{"metaData":{}}\n')
    (log / "1.json").write_text('{"commitInfo":{}}\n{"add":{"path":"x"}}')
    batch = _batch((0, f"file:{log}/0.json"), (1, f"file:{log}/1.json"))
    rows = [
        row for out in read_commit_lines(CommitLinesRead("t"), [batch]) for row in out.to_pylist()
    ]
    assert [(r["version"], r["value"]) for r in rows] == [
        (0, '{"protocol":{}}'),
        (0, '{"metaData":{}}'),
        (1, '{"commitInfo":{}}'),
        (1, '{"add":{"path":"x"}}'),
    ]
    assert rows[0]["_file"].startswith("file:///")
    assert unquote(rows[0]["_file"]) == f"file://{log}/0.json"


def test_only_containing_keeps_a_superset_of_matching_lines(tmp_path: Path) -> None:
    (tmp_path / "0.json").write_text('{"protocol":{}}\n{"add":{"path":"x"}}\n')
    request = CommitLinesRead("t", only_containing=('"protocol"',))
    out = list(read_commit_lines(request, [_batch((0, f"file:{tmp_path}/0.json"))]))
    assert [row["value"] for batch in out for row in batch.to_pylist()] == ['{"protocol":{}}']


def _values(request: CommitLinesRead, batch: pa.RecordBatch) -> list[tuple[int, str]]:
    return [
        (row["version"], row["value"])
        for out in read_commit_lines(request, [batch])
        for row in out.to_pylist()
    ]


def test_lines_split_where_spark_splits_them(tmp_path: Path) -> None:
    """\\n, \\r\\n and a lone \\r end a line (Hadoop's LineReader); U+2028, legal inside a JSON
    string, does not; whitespace-only lines are dropped."""
    (tmp_path / "0.json").write_bytes(b'{"a":1}\r\n{"b":"x\xe2\x80\xa8y"}\r{"c":3}\n \t\n\n{"d":4}')
    assert _values(CommitLinesRead("t"), _batch((0, f"file:{tmp_path}/0.json"))) == [
        (0, '{"a":1}'),
        (0, '{"b":"x\u2028y"}'),
        (0, '{"c":3}'),
        (0, '{"d":4}'),
    ]


def test_lines_come_in_bounded_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import delta_connect_py.worker.log_files as log_files

    monkeypatch.setattr(log_files, "LINE_BATCH_BYTES", 20)
    for version in range(3):
        (tmp_path / f"{version}.json").write_text('{"add":{"path":"x"}}\n' * 2)
    batch = _batch(*[(v, f"file:{tmp_path}/{v}.json") for v in range(3)])
    out = list(read_commit_lines(CommitLinesRead("t"), [batch]))
    assert len(out) == 3 and [b.num_rows for b in out] == [2, 2, 2]
    assert [row["version"] for b in out for row in b.to_pylist()] == [0, 0, 1, 1, 2, 2]


def test_a_commit_that_is_not_utf8_fails_with_the_file_named(tmp_path: Path) -> None:
    (tmp_path / "0.json").write_text('{"add":{"path":"x"}}\n')
    (tmp_path / "1.json").write_bytes(b'{"add":{"path":"\xff"}}\n')
    batch = _batch((0, f"file:{tmp_path}/0.json"), (1, f"file:{tmp_path}/1.json"))
    with pytest.raises(WorkerFailure) as info:
        list(read_commit_lines(CommitLinesRead("file:/t"), [batch]))
    error = decode_worker_failure(str(info.value))
    assert isinstance(error, CorruptLogFileError) and "1.json" in str(error)


def test_a_vanished_commit_fails_with_the_file_named(tmp_path: Path) -> None:
    missing = f"file:{tmp_path}/00000000000000000003.json"
    with pytest.raises(WorkerFailure) as info:
        list(read_commit_lines(CommitLinesRead("file:/t"), [_batch((3, missing))]))
    error = decode_worker_failure(str(info.value))
    assert isinstance(error, CorruptLogFileError)
    assert missing in str(error)


def test_newest_also_containing_applies_to_the_newest_version_only(tmp_path: Path) -> None:
    for version in (0, 1):
        (tmp_path / f"{version}.json").write_text(
            '{"commitInfo":{"inCommitTimestamp":5}}\n{"add":{"path":"x"}}\n'
        )
    request = CommitLinesRead(
        "t",
        only_containing=('"metaData"',),
        newest_also_containing=('"inCommitTimestamp"',),
        newest_version=1,
    )
    batch = _batch((0, f"file:{tmp_path}/0.json"), (1, f"file:{tmp_path}/1.json"))
    rows = [row for out in read_commit_lines(request, [batch]) for row in out.to_pylist()]
    assert [(r["version"], r["value"]) for r in rows] == [
        (1, '{"commitInfo":{"inCommitTimestamp":5}}')
    ]


def test_local_listing_sees_what_spark_file_sources_see(tmp_path: Path) -> None:
    log = tmp_path / "t %25" / "_delta_log"
    (log / "_sidecars").mkdir(parents=True)
    for name in ("00000000000000000000.json", "00000000000000000000.crc"):
        (log / name).write_text("{}")
    for hidden in (".00000000000000000000.json.crc", "_commits"):
        (log / hidden).write_text("{}")
    (log / "_last_checkpoint").write_text('{"version":0,"size":1}')
    request = LastCheckpointRead(log_dir=f"file:{log}", tries=1)
    rows = [row for out in list_local_log(request, None, []) for row in out.to_pylist()]
    hint_path = f"file:{log}/_last_checkpoint"
    files = sorted(row["path"] for row in rows if row["path"] != hint_path)
    assert files == [f"file:{log}/{name}" for name in ("0" * 20 + ".crc", "0" * 20 + ".json")]
    hint = [row for row in rows if row["path"] == hint_path]
    assert hint and hint[0]["content"] == '{"version":0,"size":1}'
    # The newest version checksum travels with the listing; no other file's content does.
    contents = {row["path"].rsplit("/", 1)[-1]: row["content"] for row in rows}
    assert contents["0" * 20 + ".crc"] == "{}"
    assert contents["0" * 20 + ".json"] is None


def test_local_listing_brings_only_the_newest_small_checksum(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    for version in (1, 2, 10):
        (log / f"{version:020d}.crc").write_text(f'{{"v":{version}}}')
    request = LastCheckpointRead(log_dir=f"file:{log}", tries=1)
    rows = [row for out in list_local_log(request, None, []) for row in out.to_pylist()]
    contents = {row["path"].rsplit("/", 1)[-1]: row["content"] for row in rows}
    assert contents[f"{10:020d}.crc"] == '{"v":10}'
    assert contents[f"{1:020d}.crc"] is None and contents[f"{2:020d}.crc"] is None
    (log / f"{11:021d}.crc").write_text('{"v":11}')  # not a version checksum's name
    rows = [row for out in list_local_log(request, None, []) for row in out.to_pylist()]
    contents = {row["path"].rsplit("/", 1)[-1]: row["content"] for row in rows}
    assert contents[f"{10:020d}.crc"] == '{"v":10}' and contents[f"{11:021d}.crc"] is None
    (log / f"{11:020d}.crc").write_text("x" * (MAX_LISTED_CHECKSUM_BYTES + 1))
    rows = [row for out in list_local_log(request, None, []) for row in out.to_pylist()]
    assert all(row["content"] is None for row in rows if row["path"].endswith(".crc"))


def test_local_listing_of_a_missing_log_says_so(tmp_path: Path) -> None:
    request = LastCheckpointRead(log_dir=f"file:{tmp_path}/nothing/_delta_log", tries=1)
    rows = [row for out in list_local_log(request, None, []) for row in out.to_pylist()]
    assert [row["length"] for row in rows] == [NO_LOG_DIR]


_PROTOCOL = '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}'
_METADATA = '{"metaData":{"id":"t","format":{"provider":"parquet"},"partitionColumns":[]}}'
_ADD = '{"add":{"path":"a","size":1,"modificationTime":1,"dataChange":true,"partitionValues":{}}}'
_INFO = '{"commitInfo":{"inCommitTimestamp":7,"operation":"WRITE"}}'


def _pm_log(tmp_path: Path, commits: int) -> Path:
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_text("\n".join([_INFO, _PROTOCOL, _METADATA, _ADD]) + "\n")
    for version in range(1, commits):
        (log / f"{version:020d}.json").write_text(f"{_INFO}\n{_ADD}\n")
    return log


def _scanned(log: Path, after: int, max_bytes: int = 1 << 20) -> list[dict[str, object]]:
    from delta_connect_py.plans.protocol_metadata import pm_lines_scan

    scan = dataclasses.replace(pm_lines_scan(after), max_bytes=max_bytes)
    request = LastCheckpointRead(log_dir=f"file:{log}", tries=1)
    rows = [row for out in list_local_log(request, scan, []) for row in out.to_pylist()]
    return [row for row in rows if row["length"] in (PM_LINE, PM_SCAN, PM_CHECKPOINT)]


def test_local_listing_brings_the_pm_lines_of_every_commit_after_a_version(
    tmp_path: Path,
) -> None:
    log = _pm_log(tmp_path, 3)
    rows = _scanned(log, -1)
    lines = [(row["modificationTime"], row["content"]) for row in rows if row["length"] == PM_LINE]
    # Protocol and metaData lines of every commit; the commit info only of the newest one.
    assert lines == [(0, _PROTOCOL), (0, _METADATA), (2, _INFO)]
    assert [(r["modificationTime"], r["content"]) for r in rows if r["length"] == PM_SCAN] == [
        (-1, "2")
    ]
    after_one = _scanned(log, 1)
    assert [(r["modificationTime"], r["content"]) for r in after_one] == [(2, _INFO), (1, "2")]


@pytest.mark.parametrize(
    "damage",
    ["checkpoint", "bytes", "joined line", "not utf-8", "path not a string"],
)
def test_local_listing_makes_no_pm_scan_the_pm_read_would_not_take(
    tmp_path: Path, damage: str
) -> None:
    log = _pm_log(tmp_path, 3)
    max_bytes = 1 << 20
    if damage == "checkpoint":
        (log / f"{1:020d}.checkpoint.parquet").write_bytes(b"PAR1")
    elif damage == "bytes":
        max_bytes = 100
    elif damage == "joined line":
        (log / f"{1:020d}.json").write_text(_ADD + _PROTOCOL + "\n")
    elif damage == "not utf-8":
        (log / f"{1:020d}.json").write_bytes(_PROTOCOL.encode()[:-2] + b"\xff}}\n")
    else:  # a line the P&M read parses (it names metaData), so checks in full
        (log / f"{1:020d}.json").write_text('{"add":{"path":5,"tags":{"metaData":"x"}}}\n')
    assert _scanned(log, -1, max_bytes) == []
    if damage == "checkpoint":  # commits after the checkpoint are scanned
        assert [r["length"] for r in _scanned(log, 1, max_bytes)] == [PM_LINE, PM_SCAN]


def test_local_listing_brings_the_newest_checkpoints_pm_and_the_commits_after_it(
    tmp_path: Path,
) -> None:
    import json

    import pyarrow.parquet as pq

    from delta_connect_py.protocol.actions import METADATA, PROTOCOL

    log = _pm_log(tmp_path, 4)
    schema = pa.schema([("protocol", PROTOCOL), ("metaData", METADATA)])
    actions = [json.loads(_PROTOCOL), json.loads(_METADATA)]
    for version in (0, 1):
        checkpoint = log / f"{version:020d}.checkpoint.parquet"
        pq.write_table(pa.Table.from_pylist(actions, schema=schema), checkpoint)
    rows = _scanned(log, -1)
    named = [(r["modificationTime"], r["path"]) for r in rows if r["length"] == PM_CHECKPOINT]
    assert named == [(1, f"file:{log}/{1:020d}.checkpoint.parquet")]
    lines = [
        (r["modificationTime"], json.loads(r["content"])) for r in rows if r["length"] == PM_LINE
    ]
    assert [(version, next(iter(action))) for version, action in lines] == [
        (1, "protocol"),
        (1, "metaData"),
        (3, "commitInfo"),
    ]
    assert lines[0][1]["protocol"]["minWriterVersion"] == 2
    assert [(r["modificationTime"], r["content"]) for r in rows if r["length"] == PM_SCAN] == [
        (1, "3")
    ]
    # Asked for the commits after a version at or past the newest checkpoint: no checkpoint.
    assert [r["length"] for r in _scanned(log, 2)] == [PM_LINE, PM_SCAN]
