"""What a change data feed range must satisfy before any row is read.

Responsibility: delta-spark's checks of a CDF range: every protocol action readable
(``DELTA_UNSUPPORTED_FEATURES_FOR_READ``), every protocol and metadata in force after a commit
that changes either listing the features in use (``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH``),
CDF enabled at the start and at every later
``metaData`` (``DELTA_MISSING_CHANGE_DATA``), the batch read schema (``endVersion`` mode with
column mapping at the start, end or latest version, else ``legacy``: the latest version's) and
every schema change in range read-compatible with it
(``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE`` / ``..._DATA_SCHEMA``).

Invariants: a check raises before any data file is read; it never returns partial results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from delta_connect_py.cdf.commits import snapshot_at
from delta_connect_py.errors import (
    ChangeDataFeedIncompatibleDataSchemaError,
    ChangeDataFeedIncompatibleSchemaChangeError,
    MissingChangeDataError,
)
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.cdf import CommitChanges
from delta_connect_py.protocol.feature_use import check_features_listed
from delta_connect_py.protocol.features import check_readable
from delta_connect_py.protocol.schema_changes import batch_cdf_read_compatible

if TYPE_CHECKING:
    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.table_log import TableLog


def check_protocols(path: str, changes: Iterable[CommitChanges]) -> None:
    """delta-spark's ``protocolRead`` on each protocol action of ``changes``: a range that
    crosses an upgrade to a protocol this library cannot read fails, never returns rows."""
    for change in changes:
        if change.protocol is not None:
            check_readable(Protocol.from_action(change.protocol), path, change.version)


def check_features_in_range(
    table: TableLog, listing: LogListing, changes: Sequence[CommitChanges], *, start_checked: bool
) -> None:
    """After each commit of ``changes`` that changes the protocol or the metadata, the
    protocol in force lists every feature the metadata in force turns on (``feature_use``):
    a range never returns rows read under metadata that delta-spark's snapshots refuse.

    Where the range gives only one of the two (a metadata change before any protocol action of
    the range), the snapshot at that version checks the pair and gives the other: one P&M job,
    skipped for the first commit when ``start_checked`` (its snapshot was checked already).
    """
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    for index, change in enumerate(changes):
        if change.protocol is None and change.metadata is None:
            continue
        if change.protocol is not None:
            protocol = Protocol.from_action(change.protocol)
        if change.metadata is not None:
            metadata = Metadata.from_action(change.metadata)
        if protocol is not None and metadata is not None:
            check_features_listed(protocol, metadata, table.table_root, change.version)
        elif not (index == 0 and start_checked):
            in_force = snapshot_at(table, listing, change.version)
            protocol, metadata = in_force.protocol, in_force.metadata


def check_enabled(metadata: Metadata, version: int, start: int, end: int) -> None:
    if not props.change_data_feed_enabled(metadata.configuration):
        raise MissingChangeDataError(start=start, end=end, version=version)


def last_metadata(start_metadata: Metadata, changes: Sequence[CommitChanges]) -> Metadata:
    metadata = start_metadata
    for change in changes:
        if change.metadata is not None:
            metadata = Metadata.from_action(change.metadata)
    return metadata


def _uses_column_mapping(*metadata: Metadata) -> bool:
    return any(props.column_mapping_mode(m.configuration) != "none" for m in metadata)


@dataclass(frozen=True)
class ReadSchema:
    """The metadata whose schema a batch CDF read returns, and its version."""

    metadata: Metadata
    version: int


def read_schema(
    table: TableLog,
    listing: LogListing,
    start_metadata: Metadata,
    end_metadata: Metadata,
    end: int,
    latest: int,
) -> ReadSchema:
    """delta-spark's batch CDF schema: the end version's with column mapping at the start, end or
    latest version (``endVersion`` mode), else the latest version's (``legacy`` mode)."""
    latest_metadata = (
        end_metadata if end == latest else snapshot_at(table, listing, latest).metadata
    )
    if _uses_column_mapping(start_metadata, end_metadata, latest_metadata):
        return ReadSchema(end_metadata, end)
    return ReadSchema(latest_metadata, latest)


def _schema_error(
    error: type[ChangeDataFeedIncompatibleSchemaChangeError]
    | type[ChangeDataFeedIncompatibleDataSchemaError],
    path: str,
    window: tuple[int, int],
    read: ReadSchema,
    version: int,
) -> Exception:
    return error(
        path=path,
        start=window[0],
        end=window[1],
        read_schema=read.metadata.schema_string,
        read_version=read.version,
        incompatible_version=version,
    )


def check_batch_range(
    path: str,
    start_metadata: Metadata,
    changes: Sequence[CommitChanges],
    window: tuple[int, int],
    read: ReadSchema,
) -> None:
    """``changesToDF``'s checks, in its order: CDF enabled at the start and at every later
    ``metaData``; each later ``metaData`` read-compatible with the read schema; finally the
    start version's schema itself (delta-spark's ``checkBatchCdfReadSchemaIncompatibility``)."""
    start, end = window
    check_enabled(start_metadata, start, start, end)
    for change in changes:
        if change.metadata is None:
            continue
        metadata = Metadata.from_action(change.metadata)
        check_enabled(metadata, change.version, start, end)
        # A metaData at the start version is the schema the range starts from, not a change.
        if change.version > start and not batch_cdf_read_compatible(
            read.metadata, read.version, metadata, change.version
        ):
            raise _schema_error(
                ChangeDataFeedIncompatibleSchemaChangeError, path, window, read, change.version
            )
    if not batch_cdf_read_compatible(read.metadata, read.version, start_metadata, start):
        raise _schema_error(ChangeDataFeedIncompatibleDataSchemaError, path, window, read, start)
