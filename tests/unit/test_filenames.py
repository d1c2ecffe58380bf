"""Log file name recognition and building (notes 1.1, delta-spark FileNames)."""

from __future__ import annotations

import pytest

from delta_connect_py.protocol.filenames import (
    LogFileKind,
    checkpoint_name,
    checksum_name,
    commit_name,
    compaction_name,
    multipart_checkpoint_name,
    parse_log_file,
    uuid_checkpoint_name,
)

UUID = "f5ee283b-37c7-46af-b64c-8f77c6a5c43a"


def test_commit() -> None:
    f = parse_log_file("s3a://b/t/_delta_log/00000000000000000007.json", 12, 34)
    assert f is not None
    assert (f.kind, f.version, f.size, f.modification_time) == (LogFileKind.COMMIT, 7, 12, 34)
    assert f.name == "00000000000000000007.json"
    assert f.path == "s3a://b/t/_delta_log/00000000000000000007.json"
    assert not f.is_checkpoint
    assert (f.part, f.num_parts, f.start_version) == (None, None, None)


@pytest.mark.parametrize(
    "name",
    [
        "7.json",
        "000000000000000000014.json",  # 21 digits: a stray copy, not version 14
        "0000000000000000014.json",
        "0000000000000000010.checkpoint.parquet",
        "000000000000000000010.checkpoint.0000000001.0000000001.parquet",
        f"0000000000000000006.checkpoint.{UUID}.json",
        "0000000000000000003.crc",
        "00000000000000000004.0000000000000000009.compacted.json",
    ],
)
def test_only_twenty_digit_versions_name_log_files(name: str) -> None:
    """As the protocol names them, and delta-rs and Delta Kernel read them."""
    assert parse_log_file(f"/t/_delta_log/{name}", 1, 1) is None


def test_classic_checkpoint() -> None:
    f = parse_log_file("/t/_delta_log/00000000000000000010.checkpoint.parquet", 5, 6)
    assert f is not None and f.kind is LogFileKind.CHECKPOINT and f.version == 10
    assert f.is_checkpoint


def test_multipart_checkpoint() -> None:
    f = parse_log_file("00000000000000000001.checkpoint.0000000002.0000000003.parquet", 1, 1)
    assert f is not None
    assert (f.kind, f.version, f.part, f.num_parts) == (
        LogFileKind.MULTIPART_CHECKPOINT,
        1,
        2,
        3,
    )
    assert f.is_checkpoint


def test_multipart_part_out_of_range_is_ignored() -> None:
    assert parse_log_file("1.checkpoint.0000000004.0000000003.parquet", 1, 1) is None
    assert parse_log_file("1.checkpoint.0000000000.0000000003.parquet", 1, 1) is None


@pytest.mark.parametrize("ext", ["json", "parquet"])
def test_uuid_checkpoint(ext: str) -> None:
    f = parse_log_file(f"00000000000000000006.checkpoint.{UUID}.{ext}", 1, 1)
    assert f is not None and f.kind is LogFileKind.UUID_CHECKPOINT and f.version == 6
    assert f.is_checkpoint


def test_compaction_version_is_end() -> None:
    f = parse_log_file("00000000000000000004.00000000000000000009.compacted.json", 1, 1)
    assert f is not None and f.kind is LogFileKind.COMPACTION
    assert (f.start_version, f.version) == (4, 9)
    assert not f.is_checkpoint
    assert parse_log_file("9.4.compacted.json", 1, 1) is None


def test_checksum() -> None:
    f = parse_log_file("00000000000000000003.crc", 1, 1)
    assert f is not None and f.kind is LogFileKind.CHECKSUM and f.version == 3


@pytest.mark.parametrize(
    "name",
    [
        "_last_checkpoint",
        ".00000000000000000000.json.crc",
        ".00000000000000000000.crc.crc",
        "00000000000000000000.crc.crc",
        ".00000000000000000001.json.8f0a1b.tmp",
        "00000000000000000001.json.tmp",
        "00000000000000000001.checkpoint.parquet.crc",
        "00000000000000000001.checkpoint.a.b.parquet",
        "00000000000000000001.checkpoint.x.avro",
        "_sidecars",
        "abc.json",
        "00000000000000000001.json/",
        "",
    ],
)
def test_not_log_files(name: str) -> None:
    assert parse_log_file(f"/t/_delta_log/{name}", 1, 1) is None


def test_name_builders_round_trip() -> None:
    assert commit_name(7) == "00000000000000000007.json"
    assert checkpoint_name(10) == "00000000000000000010.checkpoint.parquet"
    assert (
        multipart_checkpoint_name(1, 2, 3)
        == "00000000000000000001.checkpoint.0000000002.0000000003.parquet"
    )
    assert uuid_checkpoint_name(6, UUID, "json") == f"00000000000000000006.checkpoint.{UUID}.json"
    assert checksum_name(3) == "00000000000000000003.crc"
    assert compaction_name(4, 9) == "00000000000000000004.00000000000000000009.compacted.json"
    names = [
        commit_name(7),
        checkpoint_name(10),
        multipart_checkpoint_name(1, 2, 3),
        uuid_checkpoint_name(6, UUID, "parquet"),
        checksum_name(3),
        compaction_name(4, 9),
    ]
    kinds = [parse_log_file(n, 1, 1) for n in names]
    assert [k.kind if k else None for k in kinds] == [
        LogFileKind.COMMIT,
        LogFileKind.CHECKPOINT,
        LogFileKind.MULTIPART_CHECKPOINT,
        LogFileKind.UUID_CHECKPOINT,
        LogFileKind.CHECKSUM,
        LogFileKind.COMPACTION,
    ]


def test_name_builders_reject_bad_input() -> None:
    with pytest.raises(ValueError):
        commit_name(-1)
    with pytest.raises(ValueError):
        multipart_checkpoint_name(1, 0, 2)
    with pytest.raises(ValueError):
        multipart_checkpoint_name(1, 3, 2)
    with pytest.raises(ValueError):
        uuid_checkpoint_name(1, UUID, "avro")
    with pytest.raises(ValueError):
        uuid_checkpoint_name(1, "a.b", "json")
    with pytest.raises(ValueError):
        compaction_name(5, 5)
