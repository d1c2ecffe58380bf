"""The change data feed as a stream of micro-batches: ``DeltaTable.stream_cdf``.

Responsibility: the micro-batch loop of delta-spark's CDF streaming source: a starting offset
(the latest snapshot as inserts, a version, or a resumed offset of the same table), then batches
of admitted file changes (:mod:`delta_connect_py.cdf.file_changes`) as ``(end offset, rows)``.

Invariants: arguments are checked when ``stream_cdf`` is called, before any job; every batch gets
fresh admission limits; offsets only move forward (``validate_offsets``); a resumed offset of
another table raises ``DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE``, and so does a version a
batch reaches whose metadata is another table's (a replaced table); a batch reaching a version
whose schema differs from the stream's read schema (the latest when it started) by a rename,
drop or partitioning change under column mapping raises
``DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG``, before its rows, as delta-spark's
stream does without a schema tracking location; every batch of versions up to the read version
has the read schema (columns added later are null in older rows), and an earlier version whose
files that schema cannot read (a type or nullability change, other partition columns) raises
``DELTA_SCHEMA_CHANGED_WITH_VERSION`` (``..._WITH_STARTING_OPTIONS`` for a stream given a
starting version), as delta-spark's stream does when backfilling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, TypeAlias

from pyspark.sql import DataFrame

from delta_connect_py import arguments
from delta_connect_py.cdf.commits import snapshot_at
from delta_connect_py.cdf.file_changes import FileChanges, collect_file_changes
from delta_connect_py.cdf.rows import changes_frame, entries_of
from delta_connect_py.errors import (
    DifferentDeltaTableReadByStreamingSourceError,
    StreamingIncompatibleSchemaChangeError,
    StreamSchemaChangedError,
    StreamSchemaChangedWithStartingOptionsError,
    TableReplacedDuringStreamError,
)
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.cdf import (
    BASE_INDEX,
    AdmissionLimits,
    DeltaSourceOffset,
    next_offset,
    validate_offsets,
)
from delta_connect_py.protocol.features import TYPE_WIDENING_FEATURES, protocol_features
from delta_connect_py.protocol.schema_changes import (
    has_no_column_mapping_schema_changes,
    stream_backfill_readable,
)
from delta_connect_py.table_schema import parsed_schema

if TYPE_CHECKING:
    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.snapshot import Snapshot
    from delta_connect_py.table_log import TableLog


#: One micro-batch of :func:`stream_cdf`: the offset a later call resumes after (pass it, or its
#: ``to_json()``, as ``offset=``) and the batch's changed rows.
CdfBatch: TypeAlias = tuple[DeltaSourceOffset, DataFrame]


@dataclass(frozen=True)
class StreamReadSchema:
    """What the stream reads with: the metadata of the latest version when it started
    (delta-spark's ``snapshotAtSourceInit``)."""

    version: int
    metadata: Metadata
    #: The table's protocol then supports type widening: older files may hold narrower types.
    widens_types: bool = False
    #: The stream was given a starting version (delta-spark's ``startingVersion`` option).
    starting_version_given: bool = False


def _starting_offset(
    table: TableLog, starting_version: int | None, offset: DeltaSourceOffset | str | None
) -> tuple[DeltaSourceOffset, StreamReadSchema]:
    """The offset the stream starts after, and its read schema."""
    listing = table.list_log()
    latest = snapshot_at(table, listing, table.log_segment(None, listing).version)
    read = StreamReadSchema(
        latest.version,
        latest.metadata,
        widens_types=bool(TYPE_WIDENING_FEATURES & protocol_features(latest.protocol)),
        starting_version_given=offset is None and starting_version is not None,
    )
    return _resolved_offset(table, listing, latest, starting_version, offset), read


def _resolved_offset(
    table: TableLog,
    listing: LogListing,
    latest: Snapshot,
    starting_version: int | None,
    offset: DeltaSourceOffset | str | None,
) -> DeltaSourceOffset:
    """The offset a resumed ``offset`` (of this table), a ``starting_version`` or the latest
    snapshot (``latest``, as inserts) gives the stream to start after."""
    if offset is not None:
        parsed = DeltaSourceOffset.from_json(offset) if isinstance(offset, str) else offset
        if parsed.reservoir_id != latest.metadata.id:
            raise DifferentDeltaTableReadByStreamingSourceError(
                path=table.table_root,
                new_table_id=latest.metadata.id,
                old_table_id=parsed.reservoir_id,
                offset=parsed.to_json(),
            )
        return parsed
    if starting_version is None:
        return DeltaSourceOffset(latest.metadata.id, latest.version, BASE_INDEX, True)
    if starting_version > latest.version:
        # delta-spark's stream checks that its starting version exists (DELTA_VERSION_NOT_FOUND,
        # naming the versions there are), rather than wait for it.
        table.log_segment(starting_version, listing)
    return DeltaSourceOffset(latest.metadata.id, starting_version, BASE_INDEX, False)


def _check_read_compatible(
    table: TableLog, read: StreamReadSchema, metadata_by_version: Mapping[int, Metadata], upto: int
) -> None:
    """delta-spark's ``checkReadIncompatibleSchemaChanges`` without a schema tracking log, for
    the metadata in effect at each version a batch reaches (up to ``upto``): another table's id
    (``DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE``), a rename, drop or partitioning
    change under column mapping against the read schema
    (``DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG``), or a version before the
    read version whose files the read schema cannot read (``checkSchemaChangesWhenNoSchemaTracking``
    when backfilling: ``DELTA_SCHEMA_CHANGED_WITH_...``), before any of its rows."""
    for version, metadata in sorted(metadata_by_version.items()):
        if version > upto:
            break
        if metadata.id != read.metadata.id:
            raise TableReplacedDuringStreamError(
                path=table.table_root,
                read_table_id=read.metadata.id,
                read_version=read.version,
                version=version,
                table_id=metadata.id,
            )
        older, newer = (
            (metadata, read.metadata) if version < read.version else (read.metadata, metadata)
        )
        if not has_no_column_mapping_schema_changes(newer, older):
            raise StreamingIncompatibleSchemaChangeError(
                path=table.table_root, version=version, read_version=read.version
            )
        if version < read.version and not stream_backfill_readable(
            read.metadata, metadata, widen_types=read.widens_types
        ):
            raise _schema_changed(table, read, version, metadata)


def _schema_changed(
    table: TableLog, read: StreamReadSchema, version: int, metadata: Metadata
) -> StreamSchemaChangedError:
    error = (
        StreamSchemaChangedWithStartingOptionsError
        if read.starting_version_given
        else StreamSchemaChangedError
    )
    log_dir = table.log_dir

    def schema_text(of: Metadata, at: int) -> str:
        return parsed_schema(of, log_dir, log_dir, at).simpleString()

    return error(
        path=table.table_root,
        version=version,
        read_version=read.version,
        read_schema=schema_text(read.metadata, read.version),
        data_schema=schema_text(metadata, version),
    )


def batch_frame(table: TableLog, changes: FileChanges, read: StreamReadSchema) -> DataFrame:
    """The changed rows of one micro-batch's admitted files (lazy), with the stream's read
    schema for a batch starting at or before its read version (a later batch follows a
    schema-change barrier and has the schema of its own versions)."""
    assert changes.metadata is not None, "a batch with files always has metadata"
    entries = entries_of(table.table_root, changes.files, changes.timestamps)
    first = min(f.version for f in changes.files)
    metadata = read.metadata if first <= read.version else changes.metadata
    return changes_frame(table.spark, metadata, entries, table.table_root)


def stream_cdf(
    table: TableLog,
    starting_version: int | None = None,
    *,
    offset: DeltaSourceOffset | str | None = None,
    max_files_per_trigger: int | None = 1000,
    max_bytes_per_trigger: int | str | None = None,
    poll_seconds: float = 1.0,
    stop_when_caught_up: bool = False,
) -> Iterator[CdfBatch]:
    """Micro-batches ``(end offset, rows)`` of the change feed, like a readStream CDF source.

    Without ``offset`` or ``starting_version`` the stream starts with the latest snapshot as
    inserts; ``offset`` (a yielded offset, or its JSON) resumes strictly after it. When caught
    up, it polls every ``poll_seconds`` (or returns if ``stop_when_caught_up``).

    A commit that changes the schema, partitioning or ``delta.*`` configuration ends the batch
    before it (the batch's offset then has index ``METADATA_CHANGE_INDEX``, serialized with
    sourceVersion 3). Batches of versions up to the latest when the stream started have that
    version's schema, as delta-spark's stream reads them (a column added later is null in older
    rows); a batch after a later schema change has the new schema, where delta-spark's stream
    stops to be restarted.

    The arguments are checked when this is called, before any Spark job
    (``DELTA_CONNECT_INVALID_ARGUMENT``); the jobs run as the batches are iterated.
    """
    function = "stream_cdf"
    starting_version = arguments.cdf_version(function, starting_version, "starting_version")
    if offset is not None and not isinstance(offset, (str, DeltaSourceOffset)):
        raise arguments.invalid_type(
            function, "offset", offset, "None, an offset yielded by stream_cdf or its to_json()"
        )
    max_files_per_trigger = arguments.optional_integer(
        function, "max_files_per_trigger", max_files_per_trigger, minimum=1, what="files per batch"
    )
    if isinstance(poll_seconds, bool) or not isinstance(poll_seconds, (int, float)):
        raise arguments.invalid_type(function, "poll_seconds", poll_seconds, "seconds, a number")
    if poll_seconds < 0:
        raise arguments.invalid_value(function, "poll_seconds", poll_seconds, "seconds >= 0")
    bytes_expected = "None, a positive number of bytes or a size such as '512m' or '10g'"
    if isinstance(max_bytes_per_trigger, bool) or not isinstance(
        max_bytes_per_trigger, (int, str, type(None))
    ):
        raise arguments.invalid_type(
            function, "max_bytes_per_trigger", max_bytes_per_trigger, bytes_expected
        )
    # AdmissionLimits are consumed as a batch admits files: every batch gets fresh ones, made
    # once here first to check the arguments.
    new_limits = partial(AdmissionLimits.of, max_files_per_trigger, max_bytes_per_trigger)
    try:
        new_limits()
    except ValueError:
        raise arguments.invalid_value(
            function, "max_bytes_per_trigger", max_bytes_per_trigger, bytes_expected
        ) from None
    return _batches(table, starting_version, offset, new_limits, poll_seconds, stop_when_caught_up)


def _batches(
    table: TableLog,
    starting_version: int | None,
    offset: DeltaSourceOffset | str | None,
    new_limits: Callable[[], AdmissionLimits],
    poll_seconds: float,
    stop_when_caught_up: bool,
) -> Iterator[CdfBatch]:
    """``stream_cdf``'s batches, its arguments checked."""
    previous, read = _starting_offset(table, starting_version, offset)
    known: dict[int, Metadata] = {}
    while True:
        changes = collect_file_changes(
            table,
            previous.reservoir_version,
            previous.index,
            previous.is_starting_version,
            new_limits(),
            None,
            known,
        )
        known = changes.metadata_by_version or known
        current = next_offset(previous, changes.files)
        if current == previous:
            if stop_when_caught_up:
                return
            time.sleep(poll_seconds)
            continue
        validate_offsets(previous, current)
        _check_read_compatible(table, read, changes.metadata_by_version, current.reservoir_version)
        yield current, batch_frame(table, changes, read)
        previous = current
