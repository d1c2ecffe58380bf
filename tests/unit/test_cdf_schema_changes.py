"""Which schema changes CDF reads may cross, and where streams put schema-change barriers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.cdf import (
    BASE_INDEX,
    END_INDEX,
    METADATA_CHANGE_INDEX,
    AdmissionLimits,
    DeltaSourceOffset,
    VersionFiles,
    file_changes,
    filter_cdc_actions,
    index_commit,
    next_offset,
)
from delta_connect_py.protocol.schema_changes import (
    batch_cdf_read_compatible,
    changes_stream_metadata,
    has_no_column_mapping_schema_changes,
    is_read_compatible,
    is_type_widening,
    stream_backfill_readable,
)

CM = {"delta.columnMapping.mode": "name"}


def _field(name: str, type_: Any = "long", nullable: bool = True, physical: str | None = None):
    metadata = {"delta.columnMapping.physicalName": physical} if physical else {}
    return {"name": name, "type": type_, "nullable": nullable, "metadata": metadata}


def _metadata(*fields: dict[str, Any], config: dict[str, str] | None = None, parts=()) -> Metadata:
    schema = json.dumps({"type": "struct", "fields": list(fields)})
    return Metadata.from_action(
        {
            "id": "t",
            "schemaString": schema,
            "partitionColumns": list(parts),
            "configuration": config or {},
        }
    )


def _struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


# ------------------------------------------------------------------------ column mapping


def test_rename_and_drop_are_column_mapping_changes_but_add_is_not() -> None:
    old = _metadata(_field("a", physical="c1"), _field("b", physical="c2"), config=CM)
    renamed = _metadata(_field("a", physical="c1"), _field("x", physical="c2"), config=CM)
    dropped = _metadata(_field("a", physical="c1"), config=CM)
    added = _metadata(
        _field("a", physical="c1"),
        _field("b", physical="c2"),
        _field("c", physical="c3"),
        config=CM,
    )
    assert not has_no_column_mapping_schema_changes(renamed, old)
    assert not has_no_column_mapping_schema_changes(dropped, old)
    assert has_no_column_mapping_schema_changes(added, old)
    # Direction matters: seen from the wider schema, an ADD looks like a DROP.
    assert not has_no_column_mapping_schema_changes(old, added)


def test_nested_renames_are_found_through_arrays() -> None:
    inner = _struct(_field("n", physical="p-n"))
    renamed = _struct(_field("m", physical="p-n"))
    array = {"type": "array", "elementType": inner, "containsNull": True}
    old = _metadata(_field("s", array, physical="c1"), config=CM)
    new = _metadata(
        _field("s", {**array, "elementType": renamed}, physical="c1"),
        config=CM,
    )
    assert not has_no_column_mapping_schema_changes(new, old)


def test_upgrade_keeps_names_as_physical_names_and_downgrade_is_refused() -> None:
    plain = _metadata(_field("a"), _field("b"))
    upgraded = _metadata(_field("a", physical="a"), _field("b", physical="b"), config=CM)
    renamed_after_upgrade = _metadata(
        _field("a", physical="a"), _field("z", physical="b"), config=CM
    )
    assert has_no_column_mapping_schema_changes(upgraded, plain)
    assert not has_no_column_mapping_schema_changes(renamed_after_upgrade, plain)
    assert not has_no_column_mapping_schema_changes(plain, upgraded)


def test_partition_column_changes_count_only_under_column_mapping() -> None:
    """delta-spark's ``hasNoColumnMappingSchemaChanges`` compares nothing when neither side
    is column-mapped (its batch CDF reads across such a repartitioning, checked on its
    server); a column-mapped one (or an upgrade) must keep its partition columns."""
    a = _metadata(_field("a"), _field("p", "string"), parts=["p"])
    b = _metadata(_field("a"), _field("p", "string"))
    assert has_no_column_mapping_schema_changes(b, a)
    mapped_a = _metadata(
        _field("a", physical="c1"), _field("p", "string", physical="c2"), parts=["p"], config=CM
    )
    mapped_b = _metadata(
        _field("a", physical="c1"), _field("p", "string", physical="c2"), config=CM
    )
    assert not has_no_column_mapping_schema_changes(mapped_b, mapped_a)
    upgraded = _metadata(_field("a", physical="a"), _field("p", "string", physical="p"), config=CM)
    assert not has_no_column_mapping_schema_changes(upgraded, a)


# ------------------------------------------------------------------------ read compatibility


def test_the_empty_schema_of_a_metadata_without_schema_string_is_compared_as_no_columns() -> None:
    some = _struct(_field("a"))
    assert is_read_compatible({}, {}, forbid_tighten_nullability=True)
    assert is_read_compatible({}, some, forbid_tighten_nullability=True)
    assert not is_read_compatible(some, {}, forbid_tighten_nullability=True)


def test_read_compatibility_allows_only_added_columns_and_same_types() -> None:
    base = _struct(_field("a"), _field("b", "string"))
    assert is_read_compatible(
        base, _struct(*base["fields"], _field("c")), forbid_tighten_nullability=True
    )
    assert not is_read_compatible(base, _struct(_field("a")), forbid_tighten_nullability=True)
    assert not is_read_compatible(
        base,
        _struct(_field("a", "integer"), _field("b", "string")),
        forbid_tighten_nullability=True,
    )
    assert not is_read_compatible(
        base, _struct(_field("A"), _field("b", "string")), forbid_tighten_nullability=True
    )


def test_nullability_rules_follow_the_direction() -> None:
    nullable, required = _struct(_field("a")), _struct(_field("a", nullable=False))
    # Data written nullable cannot be read as non-nullable when the read schema is newer...
    assert not is_read_compatible(nullable, required, forbid_tighten_nullability=True)
    assert is_read_compatible(required, nullable, forbid_tighten_nullability=True)
    # ...and the other way round when the metadata is the newer one.
    assert is_read_compatible(nullable, required, forbid_tighten_nullability=False)
    assert not is_read_compatible(required, nullable, forbid_tighten_nullability=False)


def test_batch_check_picks_the_older_schema_by_version() -> None:
    narrow = _metadata(_field("a", physical="c1"), config=CM)
    wide = _metadata(_field("a", physical="c1"), _field("b", physical="c2"), config=CM)
    # The read schema (v5) added a column after v3: readable.
    assert batch_cdf_read_compatible(wide, 5, narrow, 3)
    # A metadata after the read schema's version that added a column: readable too.
    assert batch_cdf_read_compatible(narrow, 3, wide, 5)
    # The read schema dropped what v3 had: not readable.
    assert not batch_cdf_read_compatible(narrow, 5, wide, 3)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("byte", "short"),
        ("short", "long"),
        ("integer", "long"),
        ("float", "double"),
        ("integer", "double"),
        ("date", "timestamp_ntz"),
        ("decimal(10,2)", "decimal(12,4)"),
        ("integer", "decimal(10,0)"),
        ("byte", "decimal(12,2)"),
        ("long", "decimal(20,0)"),
    ],
)
def test_type_widening_follows_delta_spark(old: str, new: str) -> None:
    assert is_type_widening(old, new)
    assert not is_type_widening(new, old)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("long", "double"),  # a long does not fit a double exactly
        ("short", "decimal(9,0)"),  # delta-spark asks decimal(10,0) of every INT32 type
        ("long", "decimal(20,1)"),
        ("decimal(10,2)", "decimal(11,1)"),
        ("integer", "string"),
        ("timestamp", "timestamp_ntz"),
        ("date", "timestamp"),
    ],
)
def test_changes_that_are_not_widening(old: str, new: str) -> None:
    assert not is_type_widening(old, new)


def test_a_stream_backfills_over_added_columns_and_only_supported_widenings() -> None:
    narrow = _metadata(_field("a", "integer"))
    read = _metadata(_field("a", "long"), _field("b", "string"))
    assert stream_backfill_readable(read, narrow, widen_types=True)
    # Without type widening in the protocol, a type change is not readable.
    assert not stream_backfill_readable(read, narrow, widen_types=False)
    assert stream_backfill_readable(
        _metadata(_field("a", "integer"), _field("b")), narrow, widen_types=False
    )
    # A tighter nullability or other partition columns are not readable either.
    required = _metadata(_field("a", "integer", nullable=False))
    assert not stream_backfill_readable(required, narrow, widen_types=True)
    assert stream_backfill_readable(narrow, required, widen_types=False)
    partitioned = _metadata(_field("a", "integer"), parts=["a"])
    assert not stream_backfill_readable(partitioned, narrow, widen_types=True)
    # Widening reaches into structs, arrays and maps.
    nested = _metadata(_field("s", _struct(_field("x", "integer"))))
    wider = _metadata(_field("s", _struct(_field("x", "long"))))
    assert stream_backfill_readable(wider, nested, widen_types=True)


# ------------------------------------------------------------------------ stream barriers


def test_stream_metadata_changes_are_schema_partitioning_or_delta_configuration() -> None:
    base = _metadata(_field("a"), config={"delta.enableChangeDataFeed": "true"})
    assert not changes_stream_metadata(base, base)
    described = Metadata(**{**base.__dict__, "description": "new"})
    assert not changes_stream_metadata(described, base)
    user_setting = _metadata(_field("a"), config={**base.configuration, "owner": "me"})
    assert not changes_stream_metadata(user_setting, base)
    assert changes_stream_metadata(_metadata(_field("a"), _field("b")), base)
    assert changes_stream_metadata(_metadata(_field("a"), config={}), base)


def _version(version: int, *lines: dict[str, Any], barrier: bool = False) -> VersionFiles:
    changes = filter_cdc_actions(version, [{"commitInfo": {}}, *lines])
    return VersionFiles(version, index_commit(changes, schema_change=barrier))


def _add(path: str) -> dict[str, Any]:
    return {"add": {"path": path, "dataChange": True, "size": 10}}


def test_a_batch_ends_at_the_first_barrier_and_resumes_after_it() -> None:
    versions = [
        _version(1, _add("a")),
        _version(2, _add("b"), barrier=True),
        _version(3, _add("c"), barrier=True),
    ]
    positions = []
    offset = DeltaSourceOffset("t", 1, BASE_INDEX, False)
    for limits in (None, AdmissionLimits.of(100)):
        positions.clear()
        offset = DeltaSourceOffset("t", 1, BASE_INDEX, False)
        while True:
            files = file_changes(versions, offset.reservoir_version, offset.index, limits)
            following = next_offset(offset, files)
            if following == offset:
                break
            # BASE sentinels carry nothing (a limited read skips them at a barrier's version).
            positions.append([(f.version, f.index) for f in files if f.index != BASE_INDEX])
            offset = following
            limits = None if limits is None else AdmissionLimits.of(100)
        assert positions == [
            [(1, 0), (1, END_INDEX), (2, METADATA_CHANGE_INDEX)],
            [(2, 0), (2, END_INDEX), (3, METADATA_CHANGE_INDEX)],
            [(3, 0), (3, END_INDEX)],
        ]
    assert offset.to_dict()["index"] == -1


def test_barrier_offsets_serialize_with_source_version_3() -> None:
    files = file_changes([_version(2, _add("b"), barrier=True)], 1, END_INDEX - 1)
    offset = next_offset(DeltaSourceOffset("t", 1, 0, False), files)
    assert offset.position == (2, METADATA_CHANGE_INDEX)
    assert offset.to_dict()["sourceVersion"] == 3
    assert DeltaSourceOffset.from_json(offset.to_json()) == offset
