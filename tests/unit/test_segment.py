"""Log segment choice (notes 2.4) on synthetic listings, random listings and real tables."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.errors import (
    DeltaError,
    LogFileNotFoundError,
    MissingDeltaTableError,
    MissingPartFilesError,
    TruncatedTransactionLogError,
    VersionNotFoundError,
    VersionsNotContiguousError,
)
from delta_connect_py.protocol.filenames import (
    LogFile,
    LogFileKind,
    checkpoint_name,
    checksum_name,
    commit_name,
    compaction_name,
    multipart_checkpoint_name,
    parse_log_file,
    uuid_checkpoint_name,
)
from delta_connect_py.protocol.last_checkpoint import (
    CorruptLastCheckpointError,
    LastCheckpoint,
    parse_last_checkpoint,
)
from delta_connect_py.protocol.segment import (
    LogSegment,
    build_log_segment,
    complete_checkpoints,
    earliest_reconstructable_version,
)

TABLE = "s3a://bucket/t"
LOG = f"{TABLE}/_delta_log"
CONFORMANCE = "/work/shared/conformance"


def listing(*names: str, sizes: dict[str, int] | None = None) -> list[LogFile]:
    files = []
    for name in names:
        size = (sizes or {}).get(name, 100)
        mtime = 1000 * (parse_log_file(name, 0, 0) or _fail(name)).version + len(name)
        file = parse_log_file(f"{LOG}/{name}", size, mtime)
        assert file is not None
        files.append(file)
    return files


def _fail(name: str) -> LogFile:
    raise AssertionError(f"not a log file: {name}")


def commits(versions: Iterable[int]) -> list[str]:
    return [commit_name(v) for v in versions]


def build(files: list[LogFile], **kwargs: object) -> LogSegment:
    return build_log_segment(TABLE, LOG, files, **kwargs)  # type: ignore[arg-type]


def versions(segment: LogSegment) -> list[int]:
    return [f.version for f in segment.commits]


def test_commits_only() -> None:
    files = listing(*commits(range(4)))
    seg = build(files)
    assert seg.version == 3 and seg.checkpoint is None and versions(seg) == [0, 1, 2, 3]
    assert seg.last_commit_timestamp == files[3].modification_time
    assert seg.log_path == LOG and seg.checksum is None
    assert seg.all_commits == tuple(files)


def test_checkpoint_and_later_commits() -> None:
    seg = build(listing(*commits(range(6)), checkpoint_name(3), checksum_name(5), checksum_name(4)))
    assert seg.checkpoint is not None and seg.checkpoint.version == 3
    assert seg.checkpoint.kind is LogFileKind.CHECKPOINT
    assert versions(seg) == [4, 5]
    assert seg.checksum is not None and seg.checksum.name == checksum_name(5)
    assert len(seg.all_commits) == 6


def test_time_travel_before_checkpoint_and_commits_above_ignored() -> None:
    files = listing(*commits(range(8)), checkpoint_name(5))
    seg = build(files, version=2)
    assert seg.version == 2 and seg.checkpoint is None and versions(seg) == [0, 1, 2]
    seg = build(files, version=6)
    assert seg.checkpoint is not None and seg.checkpoint.version == 5 and versions(seg) == [6]
    seg = build(files, version=5)
    assert seg.commits == () and seg.checkpoint is not None
    assert seg.last_commit_timestamp == files[5].modification_time  # commit file of v5


def test_checkpoint_only_version_uses_checkpoint_mtime() -> None:
    files = listing(checkpoint_name(108))
    seg = build(files)
    assert seg.version == 108 and seg.commits == ()
    assert seg.last_commit_timestamp == files[0].modification_time


def test_gap_before_checkpoint_is_harmless() -> None:
    seg = build(listing(commit_name(0), *commits(range(2, 6)), checkpoint_name(3)))
    assert versions(seg) == [4, 5]


def test_zero_size_checkpoint_ignored() -> None:
    names = [*commits(range(6)), checkpoint_name(2), checkpoint_name(4)]
    seg = build(listing(*names, sizes={checkpoint_name(4): 0}))
    assert seg.checkpoint is not None and seg.checkpoint.version == 2
    assert versions(seg) == [3, 4, 5]


def test_multipart_complete_and_incomplete() -> None:
    names = [
        *commits(range(6)),
        multipart_checkpoint_name(2, 1, 2),
        multipart_checkpoint_name(2, 2, 2),
        multipart_checkpoint_name(4, 1, 3),
        multipart_checkpoint_name(4, 3, 3),
    ]
    seg = build(listing(*names))
    assert seg.checkpoint is not None and seg.checkpoint.version == 2
    assert seg.checkpoint.kind is LogFileKind.MULTIPART_CHECKPOINT
    assert [f.part for f in seg.checkpoint.files] == [1, 2]
    assert versions(seg) == [3, 4, 5]


def test_checkpoint_format_order() -> None:
    uuid = "0e0e0e0e-0000-0000-0000-000000000000"
    names = [
        checkpoint_name(3),
        multipart_checkpoint_name(3, 1, 1),
        multipart_checkpoint_name(3, 2, 2),
        multipart_checkpoint_name(3, 1, 2),
        uuid_checkpoint_name(3, uuid, "json"),
        checkpoint_name(1),
    ]
    choices = complete_checkpoints(reversed(listing(*names)))
    assert [(c.version, c.kind, c.num_parts) for c in choices] == [
        (1, LogFileKind.CHECKPOINT, 1),
        (3, LogFileKind.CHECKPOINT, 1),
        (3, LogFileKind.MULTIPART_CHECKPOINT, 1),
        (3, LogFileKind.MULTIPART_CHECKPOINT, 2),
        (3, LogFileKind.UUID_CHECKPOINT, 1),
    ]
    seg = build(listing(*commits(range(5)), *names))
    assert seg.checkpoint is not None and seg.checkpoint.kind is LogFileKind.UUID_CHECKPOINT


def test_stale_hint_ignored() -> None:
    files = listing(*commits(range(5)), checkpoint_name(1), checkpoint_name(3))
    seg = build(files, last_checkpoint=LastCheckpoint(version=1, size=6))
    assert seg.checkpoint is not None and seg.checkpoint.version == 3 and versions(seg) == [4]


def test_hint_to_missing_checkpoint_falls_back() -> None:
    files = listing(*commits(range(5)), checkpoint_name(1), multipart_checkpoint_name(3, 1, 2))
    seg = build(files, last_checkpoint=LastCheckpoint(version=3, size=6, parts=2))
    assert seg.checkpoint is not None and seg.checkpoint.version == 1
    assert versions(seg) == [2, 3, 4]
    seg = build(listing(*commits(range(5))), last_checkpoint=LastCheckpoint(version=4, size=1))
    assert seg.checkpoint is None and versions(seg) == [0, 1, 2, 3, 4]


def test_checkpoint_before_leaves_out_later_checkpoints_and_the_hint() -> None:
    files = listing(*commits(range(3, 9)), checkpoint_name(3), checkpoint_name(6))
    hint = LastCheckpoint(version=6, size=6)
    seg = build(files, last_checkpoint=hint, checkpoint_before=6)
    assert seg.checkpoint is not None and seg.checkpoint.version == 3
    assert versions(seg) == [4, 5, 6, 7, 8]
    seg = build(files, version=6, checkpoint_before=6)
    assert seg.checkpoint is not None and seg.checkpoint.version == 3 and versions(seg) == [4, 5, 6]
    # nothing earlier rebuilds the version: delta-spark's truncated log
    with pytest.raises(TruncatedTransactionLogError):
        build(files, checkpoint_before=3)
    seg = build(listing(*commits(range(9)), checkpoint_name(3)), checkpoint_before=3)
    assert seg.checkpoint is None and versions(seg) == list(range(9))


def test_missing_part_files() -> None:
    names = [*commits(range(3, 7)), multipart_checkpoint_name(3, 1, 2)]
    hint = LastCheckpoint(version=3, size=6, parts=2)
    with pytest.raises(MissingPartFilesError) as info:
        build(listing(*names), last_checkpoint=hint)
    assert info.value.getMessageParameters() == {"version": "3", "path": TABLE}
    # commits from 0 are available: read them instead
    seg = build(listing(*names, *commits(range(3))), last_checkpoint=hint)
    assert seg.checkpoint is None and versions(seg) == list(range(7))
    # without the hint the listing alone says the log is truncated
    with pytest.raises(TruncatedTransactionLogError):
        build(listing(*names))


def test_only_incomplete_checkpoints() -> None:
    with pytest.raises(MissingPartFilesError):
        build(listing(multipart_checkpoint_name(3, 1, 2)))
    with pytest.raises(LogFileNotFoundError):
        build(listing(checkpoint_name(3), sizes={checkpoint_name(3): 0}))


def test_missing_table() -> None:
    for files in ([], listing(checksum_name(0))):
        with pytest.raises(MissingDeltaTableError) as info:
            build(files)
        parameters = info.value.getMessageParameters()
        assert (parameters["path"], parameters["log_path"]) == (TABLE, LOG)
        assert "Check the path" in str(info.value)


@pytest.mark.parametrize(
    ("path", "parent"),
    [(LOG, TABLE), ("file:/x/t/_delta_log/", "file:/x/t"), ("/x/t/_delta_log", "/x/t")],
)
def test_a_path_naming_a_log_folder_is_told_to_name_its_table(path: str, parent: str) -> None:
    error = MissingDeltaTableError(path=path, log_path=f"{path.rstrip('/')}/_delta_log")
    assert f"give the table's own path, {parent}." in str(error)
    assert "Check the path" not in str(error)


def test_a_folder_at_the_root_named_like_a_log_is_not_given_an_empty_parent() -> None:
    for path in ("/_delta_log", "file:/_delta_log", "file:///_delta_log"):
        error = MissingDeltaTableError(path=path, log_path=f"{path}/_delta_log")
        assert "Check the path" in str(error)


def test_version_not_found() -> None:
    files = listing(*commits(range(3, 6)), checkpoint_name(3))
    for bad in (-1, 6):
        with pytest.raises(VersionNotFoundError) as info:
            build(files, version=bad)
        params = info.value.getMessageParameters()
        assert (params["earliest"], params["latest"], params["version"]) == ("3", "5", str(bad))


def test_truncated() -> None:
    with pytest.raises(TruncatedTransactionLogError) as info:
        build(listing(*commits(range(3, 6))))
    params = info.value.getMessageParameters()
    assert params["version"] == "5" and params["earliest_version"] == "none"
    assert params["log_retention"] == "unknown" and params["checkpoint_retention"] == "unknown"
    message = str(info.value)
    assert "restore the deleted log files" in message and "after none" not in message
    with pytest.raises(TruncatedTransactionLogError) as info:
        build(listing(checkpoint_name(5), *commits(range(7, 9))))
    assert info.value.getMessageParameters()["earliest_version"] == "none"
    # time travel before the earliest rebuildable version: delta-spark's checkVersionExists
    files = listing(*commits(range(2, 9)), checkpoint_name(4))
    with pytest.raises(VersionNotFoundError) as info:
        build(files, version=3)
    params = info.value.getMessageParameters()
    assert (params["earliest"], params["latest"], params["version"]) == ("4", "8", "3")
    # no rebuildable version at all: truncated, for an explicit version too
    with pytest.raises(TruncatedTransactionLogError):
        build(listing(*commits(range(3, 6))), version=4)


def test_not_contiguous() -> None:
    with pytest.raises(VersionsNotContiguousError) as info:
        build(listing(*commits([0, 1, 3, 4, 6])))
    params = info.value.getMessageParameters()
    assert params["versions"] == "0, 1, 3, 4, 6"
    assert (params["start_version"], params["end_version"]) == ("1", "3")
    assert params["version_to_load"] == "6" and params["path"] == TABLE
    # loading a version before the gap works
    assert versions(build(listing(*commits([0, 1, 3, 4, 6])), version=1)) == [0, 1]


def test_log_file_not_found() -> None:
    with pytest.raises(LogFileNotFoundError) as info:
        build(listing(checkpoint_name(5), commit_name(7)), version=6)
    assert info.value.getMessageParameters() == {
        "version": "6",
        "checkpoint_version": "5",
        "path": LOG,
    }
    with pytest.raises(LogFileNotFoundError):
        build(listing(*commits([0, 1, 2, 4])), version=3)


def test_compactions() -> None:
    base = [*commits(range(11)), checkpoint_name(2)]
    seg = build(listing(*base, compaction_name(3, 6)), use_compactions=True)
    assert [(f.kind, f.start_version, f.version) for f in seg.commits[:2]] == [
        (LogFileKind.COMPACTION, 3, 6),
        (LogFileKind.COMMIT, None, 7),
    ]
    assert versions(seg) == [6, 7, 8, 9, 10]
    # overlapping compactions: greedy left to right
    seg = build(listing(*base, compaction_name(3, 6), compaction_name(5, 8)), use_compactions=True)
    assert versions(seg) == [6, 7, 8, 9, 10]
    seg = build(listing(*base, compaction_name(3, 4), compaction_name(5, 8)), use_compactions=True)
    assert versions(seg) == [4, 8, 9, 10]
    # not after the checkpoint, or beyond the target: unused
    assert versions(build(listing(*base, compaction_name(1, 4)), use_compactions=True)) == list(
        range(3, 11)
    )
    assert versions(
        build(listing(*base, compaction_name(3, 9)), version=8, use_compactions=True)
    ) == list(range(3, 9))
    # a compaction does not paper over a missing commit
    with pytest.raises(VersionsNotContiguousError):
        build(
            listing(*[n for n in base if n != commit_name(5)], compaction_name(3, 6)),
            use_compactions=True,
        )


def test_compactions_are_not_used_by_default() -> None:
    base = [*commits(range(11)), checkpoint_name(2)]
    assert versions(build(listing(*base, compaction_name(3, 6)))) == list(range(3, 11))


def test_earliest_reconstructable_version() -> None:
    assert earliest_reconstructable_version(listing(*commits(range(4)))) == 0
    assert earliest_reconstructable_version(listing(*commits(range(3, 9)), checkpoint_name(5))) == 5
    gap = listing(*commits([0, 1, 3, 4, 5, 6]), checkpoint_name(2), checkpoint_name(4))
    assert earliest_reconstructable_version(gap) == 2
    assert earliest_reconstructable_version(listing(checkpoint_name(108))) == 108
    with pytest.raises(ValueError):
        earliest_reconstructable_version(listing(*commits(range(3, 6))))


# --- property: random listings -------------------------------------------------------------

MAX_V = 12


@st.composite
def random_listing(draw: st.DrawFn) -> list[LogFile]:
    present = draw(st.sets(st.integers(0, MAX_V)))
    names = commits(present)
    for v in draw(st.sets(st.integers(0, MAX_V), max_size=4)):
        kind = draw(st.sampled_from(["classic", "multi", "uuid", "empty"]))
        if kind == "multi":
            n = draw(st.integers(1, 3))
            parts = draw(st.sets(st.integers(1, n), min_size=1))
            names += [multipart_checkpoint_name(v, p, n) for p in parts]
        elif kind == "uuid":
            names.append(uuid_checkpoint_name(v, "u", "json"))
        else:
            names.append(checkpoint_name(v))
    for start in draw(st.sets(st.integers(0, MAX_V - 1), max_size=3)):
        names.append(compaction_name(start, draw(st.integers(start + 1, MAX_V))))
    empty = {n: 0 for n in names if n.endswith(".checkpoint.parquet") and draw(st.booleans())}
    return listing(*names, sizes=empty)


def _reconstructable(files: list[LogFile], target: int) -> bool:
    commit_versions = {f.version for f in files if f.kind is LogFileKind.COMMIT}
    cps = [c.version for c in complete_checkpoints(files) if c.version <= target]
    start = max(cps) if cps else -1
    if start < 0 and 0 not in commit_versions:
        return False
    return all(v in commit_versions for v in range(start + 1, target + 1))


@settings(max_examples=400, deadline=None)
@given(random_listing(), st.data())
def test_random_listings(files: list[LogFile], data: st.DataObject) -> None:
    version = data.draw(st.one_of(st.none(), st.integers(0, MAX_V)))
    try:
        seg = build(files, version=version)
    except (MissingDeltaTableError, VersionNotFoundError, MissingPartFilesError):
        return
    except DeltaError:
        if not any(f.kind is LogFileKind.COMMIT for f in files) and not complete_checkpoints(files):
            return  # nothing readable at all
        target = version if version is not None else _latest(files)
        assert not _reconstructable(files, target)
        return
    target = seg.version
    assert version is None or target == version
    assert _reconstructable(files, target)
    cp = seg.checkpoint
    assert cp is None or (cp in complete_checkpoints(files) and cp.version <= target)
    covered = [v for f in seg.commits for v in range(_start(f), f.version + 1)]
    first = (cp.version if cp else -1) + 1
    assert covered == list(range(first, target + 1))
    if not seg.commits:
        assert cp is not None and cp.version == target


def _start(file: LogFile) -> int:
    return file.version if file.start_version is None else file.start_version


def _latest(files: list[LogFile]) -> int:
    found = [f.version for f in files if f.kind is LogFileKind.COMMIT]
    return max(found + [c.version for c in complete_checkpoints(files)])


# --- real tables ---------------------------------------------------------------------------


def real_listing(case: str) -> tuple[str, list[LogFile], LastCheckpoint | None]:
    root = f"{CONFORMANCE}/{case}/delta"
    log = f"{root}/_delta_log"
    if not os.path.isdir(log):
        pytest.skip(f"conformance table {case} not available")
    files = []
    for name in sorted(os.listdir(log)):
        stat = os.stat(f"{log}/{name}")
        parsed = parse_log_file(f"{log}/{name}", stat.st_size, int(stat.st_mtime * 1000))
        if parsed is not None:
            files.append(parsed)
    hint = None
    if os.path.exists(f"{log}/_last_checkpoint"):
        with open(f"{log}/_last_checkpoint", encoding="utf-8") as handle:
            try:
                hint = parse_last_checkpoint(handle.read())
            except CorruptLastCheckpointError:
                hint = None
    return root, files, hint


def real_segment(case: str, version: int | None = None) -> LogSegment:
    root, files, hint = real_listing(case)
    return build_log_segment(
        root, f"{root}/_delta_log", files, version=version, last_checkpoint=hint
    )


def test_real_multi_part_checkpoint() -> None:
    seg = real_segment("golden/multi-part-checkpoint")
    assert seg.version == 1 and seg.commits == ()
    assert seg.checkpoint is not None and seg.checkpoint.kind is LogFileKind.MULTIPART_CHECKPOINT
    assert len(seg.checkpoint.files) == 2


def test_real_stale_hint() -> None:
    _, _, hint = real_listing("delta-rs/table_failed_last_checkpoint_update")
    assert hint is not None and hint.version == 1
    seg = real_segment("delta-rs/table_failed_last_checkpoint_update")
    assert seg.version == 3 and seg.checkpoint is not None and seg.checkpoint.version == 3


def test_real_versions_not_contiguous() -> None:
    with pytest.raises(VersionsNotContiguousError):
        real_segment("golden/versions-not-contiguous")


def test_real_gap_after_checkpoint() -> None:
    with pytest.raises(VersionsNotContiguousError) as info:
        real_segment("delta-rs/err-logs-table_c")
    assert info.value.getMessageParameters()["start_version"] == "11"
    assert versions(real_segment("delta-rs/err-logs-table_c", version=11)) == [11]


def test_real_checkpoints_vacuumed() -> None:
    seg = real_segment("delta-rs/checkpoints_vacuumed")
    assert seg.version == 12 and seg.checkpoint is not None and seg.checkpoint.version == 10
    assert versions(seg) == [11, 12]
    _, files, _ = real_listing("delta-rs/checkpoints_vacuumed")
    assert earliest_reconstructable_version(files) == 5
    assert real_segment("delta-rs/checkpoints_vacuumed", version=5).commits == ()
    with pytest.raises(VersionNotFoundError, match=r"Available versions: \[5, 12\]"):
        real_segment("delta-rs/checkpoints_vacuumed", version=4)


def test_real_checkpoint_only_table() -> None:
    seg = real_segment("delta-rs/table-with-domain-metadata")
    assert seg.version == 108 and seg.commits == () and seg.all_commits == ()
    assert seg.checkpoint is not None
    assert seg.last_commit_timestamp == seg.checkpoint.files[0].modification_time


def test_real_corrupted_last_checkpoint() -> None:
    _, _, hint = real_listing("golden/corrupted-last-checkpoint-kernel")
    assert hint is None
    seg = real_segment("golden/corrupted-last-checkpoint-kernel")
    assert seg.version == 11 and seg.checkpoint is not None and seg.checkpoint.version == 10
    assert versions(seg) == [11]


def _index_cases() -> list[dict[str, object]]:
    path = f"{CONFORMANCE}/index.json"
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        tables = json.load(handle)["tables"]
    return [t for t in tables if t["path"].count("/") == 1 and t["table_path"].endswith("/delta")]


@pytest.mark.parametrize("case", _index_cases(), ids=lambda c: str(c["path"]))
def test_real_latest_version_matches_delta_rs(case: dict[str, object]) -> None:
    delta_rs = case["delta_rs"]
    assert isinstance(delta_rs, dict)
    if not delta_rs.get("loads"):
        pytest.skip("delta-rs does not load this table")
    seg = real_segment(str(case["path"]))
    assert seg.version == delta_rs["latest_version"]
