"""CDF rules without Spark: filterCDCActions, indexing, offsets, admission (notes 2.7-2.9)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.errors import InvalidSourceOffsetError
from delta_connect_py.protocol.cdf import (
    BASE_INDEX,
    END_INDEX,
    METADATA_CHANGE_INDEX,
    AdmissionLimits,
    CommitChanges,
    DeltaSourceOffset,
    IndexedFile,
    VersionFiles,
    file_changes,
    filter_cdc_actions,
    index_commit,
    index_snapshot,
    is_noop_merge,
    next_offset,
    parse_size,
    validate_offsets,
)


def add(path: str, size: int = 10, data_change: bool = True, **extra: Any) -> dict[str, Any]:
    return {"add": {"path": path, "size": size, "dataChange": data_change, **extra}}


def remove(path: str, size: int | None = 10, data_change: bool = True) -> dict[str, Any]:
    return {"remove": {"path": path, "size": size, "dataChange": data_change}}


def cdc(path: str, size: int = 10) -> dict[str, Any]:
    return {"cdc": {"path": path, "size": size, "dataChange": False}}


def merge_info(inserted: str, updated: str, deleted: str) -> dict[str, Any]:
    metrics = {
        "numTargetRowsInserted": inserted,
        "numTargetRowsUpdated": updated,
        "numTargetRowsDeleted": deleted,
    }
    return {"commitInfo": {"operation": "MERGE", "operationMetrics": metrics}}


# ---------------------------------------------------------------------------- offsets


def test_offset_json_round_trip_uses_delta_spark_fields() -> None:
    offset = DeltaSourceOffset("tid", 7, 3, False)
    data = json.loads(offset.to_json())
    assert data == {
        "sourceVersion": 1,
        "reservoirId": "tid",
        "reservoirVersion": 7,
        "index": 3,
        "isStartingVersion": False,
    }
    assert DeltaSourceOffset.from_json(offset.to_json()) == offset


def test_base_index_is_serialized_as_minus_one_and_read_back() -> None:
    offset = DeltaSourceOffset("tid", 2, BASE_INDEX, True)
    assert offset.to_dict()["index"] == -1
    assert offset.to_dict()["sourceVersion"] == 1
    assert DeltaSourceOffset.from_json(offset.to_json()) == offset


def test_metadata_change_index_forces_source_version_3() -> None:
    offset = DeltaSourceOffset("tid", 2, METADATA_CHANGE_INDEX, False)
    assert offset.to_dict()["sourceVersion"] == 3
    assert DeltaSourceOffset.from_json(offset.to_json()) == offset


@pytest.mark.parametrize(
    ("source_version", "error_class"),
    [
        (2, "DELTA_INVALID_SOURCE_VERSION"),
        (0, "DELTA_INVALID_SOURCE_VERSION"),
        (4, "DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION"),
    ],
)
def test_unknown_source_versions_are_rejected(source_version: int, error_class: str) -> None:
    text = json.dumps(
        {"sourceVersion": source_version, "reservoirId": "t", "reservoirVersion": 1, "index": 0}
    )
    with pytest.raises(InvalidSourceOffsetError) as info:
        DeltaSourceOffset.from_json(text)
    assert info.value.getErrorClass() == error_class
    assert str(source_version) in str(info.value)


def test_malformed_offsets_are_rejected_with_delta_sparks_class() -> None:
    with pytest.raises(InvalidSourceOffsetError) as info:
        DeltaSourceOffset.from_json('{"sourceVersion": 1}')
    assert info.value.getErrorClass() == "DELTA_INVALID_SOURCE_OFFSET_FORMAT"


def test_end_index_is_never_serialized_and_minus_one_never_in_memory() -> None:
    with pytest.raises(ValueError):
        DeltaSourceOffset("t", 1, END_INDEX, False).to_json()
    with pytest.raises(ValueError):
        DeltaSourceOffset("t", 1, -1, False)


def test_validate_offsets() -> None:
    a = DeltaSourceOffset("t", 3, 2, False)
    validate_offsets(a, DeltaSourceOffset("t", 3, 5, False))
    validate_offsets(a, DeltaSourceOffset("t", 4, BASE_INDEX, False))
    for bad in (
        DeltaSourceOffset("t", 2, 9, False),
        DeltaSourceOffset("t", 3, 1, False),
        DeltaSourceOffset("t", 5, 1, True),
    ):
        with pytest.raises(ValueError):
            validate_offsets(a, bad)


def test_next_offset_after_end_moves_to_next_version_base() -> None:
    previous = DeltaSourceOffset("t", 4, BASE_INDEX, True)
    files = [IndexedFile(4, BASE_INDEX), IndexedFile(4, 0, "add", {"path": "a"})]
    assert next_offset(previous, files) == DeltaSourceOffset("t", 4, 0, True)
    files.append(IndexedFile(4, END_INDEX))
    assert next_offset(previous, files) == DeltaSourceOffset("t", 5, BASE_INDEX, False)
    assert next_offset(previous, []) == previous


# ---------------------------------------------------------------------------- filterCDCActions


def test_cdc_files_win_over_add_and_remove() -> None:
    changes = filter_cdc_actions(
        1, [{"commitInfo": {"operation": "UPDATE"}}, add("a"), cdc("c1"), remove("r"), cdc("c2")]
    )
    assert [(kind, a["path"]) for kind, a in changes.files] == [("cdc", "c1"), ("cdc", "c2")]
    assert changes.has_cdc and not changes.should_skip


def test_without_cdc_only_data_change_adds_and_removes_count() -> None:
    changes = filter_cdc_actions(
        1,
        [
            add("a"),
            add("b", data_change=False),
            remove("r"),
            remove("s", data_change=False),
            {"txn": {"appId": "x", "version": 1}},
        ],
    )
    assert [(kind, a["path"]) for kind, a in changes.files] == [("add", "a"), ("remove", "r")]


def test_noop_merge_is_skipped() -> None:
    assert is_noop_merge(merge_info("0", "0", "0")["commitInfo"])
    assert not is_noop_merge(merge_info("0", "1", "0")["commitInfo"])
    assert not is_noop_merge({"operation": "MERGE", "operationMetrics": {}})
    assert not is_noop_merge({"operation": "WRITE"})
    changes = filter_cdc_actions(3, [merge_info("0", "0", "0"), add("a"), remove("b")])
    assert changes.should_skip
    indexed = index_commit(changes)
    assert [f.index for f in indexed] == [BASE_INDEX, 0, 1, END_INDEX]
    kept = file_changes([VersionFiles(3, indexed)], 2, END_INDEX)
    assert [f.index for f in kept] == [BASE_INDEX, END_INDEX]


def test_in_commit_timestamp() -> None:
    changes = filter_cdc_actions(0, [{"commitInfo": {"inCommitTimestamp": 123}}, add("a")])
    assert changes.in_commit_timestamp == 123
    assert CommitChanges(0, ()).in_commit_timestamp is None


def test_snapshot_is_ordered_by_modification_time_then_path() -> None:
    adds = [
        {"path": "b", "modificationTime": 5, "dataChange": False, "stats": "{}"},
        {"path": "a", "modificationTime": 5, "dataChange": False},
        {"path": "z", "modificationTime": 1, "dataChange": False},
    ]
    indexed = index_snapshot(9, adds)
    assert [f.path for f in indexed] == [None, "z", "a", "b", None]
    assert [f.index for f in indexed] == [BASE_INDEX, 0, 1, 2, END_INDEX]
    assert all(f.action["dataChange"] is True for f in indexed if f.action)
    assert all(f.action["stats"] is None for f in indexed if f.action)


# ---------------------------------------------------------------------------- admission


def test_parse_size() -> None:
    assert parse_size("10g") == 10 << 30
    assert parse_size("512m") == 512 << 20
    assert parse_size("1k") == 1024
    assert parse_size("100") == 100
    assert parse_size(7) == 7
    with pytest.raises(ValueError):
        parse_size("ten")


def test_default_limits() -> None:
    assert AdmissionLimits.of().files_to_take == 1000
    assert AdmissionLimits.of(max_bytes="1k").files_to_take == (1 << 31) - 9
    with pytest.raises(ValueError):
        AdmissionLimits.of(0)


def _version(v: int, lines: list[dict[str, Any]]) -> VersionFiles:
    return VersionFiles(v, index_commit(filter_cdc_actions(v, lines)))


def _paths(files: list[IndexedFile]) -> list[str]:
    return [f.path for f in files if f.path is not None]


def test_bytes_limit_is_soft_and_admits_at_least_one_file() -> None:
    versions = [_version(0, [add("a", 100), add("b", 100)])]
    files = file_changes(versions, -1, END_INDEX, AdmissionLimits.of(max_bytes=10))
    assert _paths(files) == ["a"]


def test_cdc_files_of_a_commit_are_all_or_nothing() -> None:
    versions = [_version(0, [add("a")]), _version(1, [cdc("c1"), cdc("c2"), cdc("c3")])]
    files = file_changes(versions, -1, END_INDEX, AdmissionLimits.of(2))
    assert _paths(files) == ["a"]
    assert next_offset(DeltaSourceOffset("t", 0, BASE_INDEX, False), files).position == (
        1,
        BASE_INDEX,
    )


def test_first_commit_of_a_batch_is_admitted_whole() -> None:
    versions = [_version(1, [cdc("c1"), cdc("c2"), cdc("c3")]), _version(2, [add("x")])]
    files = file_changes(versions, 0, END_INDEX, AdmissionLimits.of(2))
    assert _paths(files) == ["c1", "c2", "c3"]


def test_dv_add_remove_pairs_are_all_or_nothing() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}
    versions = [
        _version(0, [add("a")]),
        _version(1, [remove("p"), add("p", deletionVector=dv)]),
    ]
    files = file_changes(versions, -1, END_INDEX, AdmissionLimits.of(2))
    assert _paths(files) == ["a"]


def test_resume_is_strictly_after_the_offset_and_stops_at_end() -> None:
    versions = [_version(0, [add("a"), add("b")]), _version(1, [add("c")]), _version(2, [add("d")])]
    assert _paths(file_changes(versions, 0, 0)) == ["b", "c", "d"]
    end = DeltaSourceOffset("t", 2, BASE_INDEX, False)
    assert _paths(file_changes(versions, 0, 0, end=end)) == ["b", "c"]


# ---------------------------------------------------------------------------- properties

SIZES = st.integers(min_value=0, max_value=50)


@st.composite
def commit_lines(draw: st.DrawFn, version: int) -> list[dict[str, Any]]:
    n = draw(st.integers(min_value=0, max_value=4))
    kind = draw(st.sampled_from(["cdc", "plain", "dv", "merge"]))
    names = [f"v{version}-{i}" for i in range(n)]
    if kind == "cdc":
        return [add("ignored"), *[cdc(p, draw(SIZES)) for p in names]]
    if kind == "dv":
        dv = {"storageType": "u", "pathOrInlineDv": "x"}
        return [add(p, draw(SIZES), deletionVector=dv) for p in names]
    lines: list[dict[str, Any]] = [
        add(p, draw(SIZES)) if draw(st.booleans()) else remove(p, draw(SIZES)) for p in names
    ]
    if kind == "merge":
        lines.insert(0, merge_info("0", "0", "0"))
    return lines


@st.composite
def change_logs(draw: st.DrawFn) -> tuple[list[VersionFiles], int]:
    """Indexed versions, optionally starting with an initial snapshot; and the start version."""
    start = draw(st.integers(min_value=0, max_value=3))
    versions: list[VersionFiles] = []
    if draw(st.booleans()):
        adds = [
            {"path": f"s{i}", "size": draw(SIZES), "modificationTime": draw(st.integers(0, 3))}
            for i in range(draw(st.integers(0, 5)))
        ]
        versions.append(VersionFiles(start, index_snapshot(start, adds), initial_snapshot=True))
        first = start + 1
    else:
        first = start
    count = draw(st.integers(min_value=0, max_value=6))
    for v in range(first, first + count):
        versions.append(_version(v, draw(commit_lines(v))))
    return versions, start


def _run_stream(
    versions: list[VersionFiles],
    start: DeltaSourceOffset,
    max_files: int | None,
    max_bytes: int | None,
) -> list[tuple[DeltaSourceOffset, list[IndexedFile]]]:
    """Micro-batches like stream_cdf, over an in-memory log."""
    batches = []
    previous = start
    for _ in range(200):
        usable = versions
        if not previous.is_starting_version:
            usable = [v for v in versions if not v.initial_snapshot]
        limits = AdmissionLimits.of(max_files, max_bytes)
        files = file_changes(usable, previous.reservoir_version, previous.index, limits)
        current = next_offset(previous, files)
        if current == previous:
            return batches
        validate_offsets(previous, current)
        batches.append((current, files))
        previous = current
    raise AssertionError("the stream made no progress")


def _file_ids(files: list[IndexedFile]) -> list[tuple[int, int]]:
    return [(f.version, f.index) for f in files if not f.is_sentinel and not f.should_skip]


LIMITS = st.tuples(
    st.one_of(st.none(), st.integers(min_value=1, max_value=4)),
    st.one_of(st.none(), st.integers(min_value=1, max_value=80)),
)


@settings(max_examples=400, deadline=None)
@given(change_logs(), LIMITS)
def test_batches_concatenate_to_the_unlimited_changes(
    log: tuple[list[VersionFiles], int], limits: tuple[int | None, int | None]
) -> None:
    versions, start_version = log
    snapshot = bool(versions) and versions[0].initial_snapshot
    start = DeltaSourceOffset("t", start_version, BASE_INDEX, snapshot)
    batches = _run_stream(versions, start, *limits)
    everything = _file_ids(file_changes(versions, start_version, BASE_INDEX))
    streamed = [fid for _, files in batches for fid in _file_ids(files)]
    assert streamed == everything


@settings(max_examples=400, deadline=None)
@given(change_logs(), LIMITS)
def test_no_batch_exceeds_the_limits_except_as_soft_rules_allow(
    log: tuple[list[VersionFiles], int], limits: tuple[int | None, int | None]
) -> None:
    versions, start_version = log
    snapshot = bool(versions) and versions[0].initial_snapshot
    start = DeltaSourceOffset("t", start_version, BASE_INDEX, snapshot)
    max_files, max_bytes = limits
    file_cap = max_files if max_files is not None else (1000 if max_bytes is None else 1 << 40)
    byte_cap = max_bytes if max_bytes is not None else 1 << 62
    for _, files in _run_stream(versions, start, max_files, max_bytes):
        admitted = [f for f in files if not f.is_sentinel]
        sizes = [f.size for f in admitted]
        within = len(admitted) <= file_cap and sum(sizes[:-1]) < byte_cap if sizes else True
        one_commit = len({f.version for f in admitted}) == 1
        assert within or one_commit, (files, limits)


@settings(max_examples=200, deadline=None)
@given(change_logs(), LIMITS)
def test_restarting_from_any_offset_loses_and_repeats_nothing(
    log: tuple[list[VersionFiles], int], limits: tuple[int | None, int | None]
) -> None:
    versions, start_version = log
    snapshot = bool(versions) and versions[0].initial_snapshot
    start = DeltaSourceOffset("t", start_version, BASE_INDEX, snapshot)
    batches = _run_stream(versions, start, *limits)
    for k, (offset, _) in enumerate(batches):
        restored = DeltaSourceOffset.from_json(offset.to_json())
        resumed = _run_stream(versions, restored, *limits)
        expected = [fid for _, files in batches[k + 1 :] for fid in _file_ids(files)]
        assert [fid for _, files in resumed for fid in _file_ids(files)] == expected
