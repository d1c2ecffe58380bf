"""The file changes of a change data feed stream after an offset, within admission limits.

Responsibility: delta-spark's streaming source's ``getFileChangesForCDC``: the indexed file
actions (the starting snapshot's files as inserts, then each commit's, with BASE/END sentinels)
strictly after ``(from_version, from_index)``, up to an end offset, within the admission limits
(:class:`~delta_connect_py.protocol.cdf.AdmissionLimits`) and up to the first schema-change
barrier (``METADATA_CHANGE_INDEX``).

Invariants: the files of one :class:`FileChanges` are all read with one metadata, the one in
effect at ``from_version``; a commit whose metadata changes the schema, partitioning or
``delta.*`` configuration ends them; every protocol action a batch reaches is checked readable.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from delta_connect_py.cdf.checks import check_enabled, check_features_in_range, check_protocols
from delta_connect_py.cdf.commits import (
    commit_timestamps_ms,
    commits_by_version,
    metadata_at,
    read_commit_changes,
    require_commits,
    snapshot_at,
)
from delta_connect_py.job_log import logged_job
from delta_connect_py.plans.spark import collect
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.cdf import (
    AdmissionLimits,
    CommitChanges,
    DeltaSourceOffset,
    IndexedFile,
    VersionFiles,
    file_changes,
    index_commit,
    index_snapshot,
)
from delta_connect_py.protocol.schema_changes import changes_stream_metadata
from delta_connect_py.snapshot import Snapshot

if TYPE_CHECKING:
    from delta_connect_py.table_log import TableLog


_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileChanges:
    """The files ``DeltaTable.cdf_file_changes()`` admits, and what turns them into rows.

    A sequence of :class:`~delta_connect_py.protocol.cdf.IndexedFile` (``version``, ``index``,
    ``kind``, ``path``, the action), in offset order, with BASE/END sentinels.

    Example:
        >>> changes = dt.cdf_file_changes(0, is_starting_version=True, max_files=10)
        >>> [(f.version, f.index, f.kind) for f in changes][:2]
        [(0, -100, None), (0, 0, 'add')]
    """

    #: The admitted files, in offset order.
    files: list[IndexedFile]
    #: The metadata every file here is read with: the one in effect at ``from_version`` (a
    #: metadata change after it ends the files with a schema-change barrier).
    metadata: Metadata | None
    #: Each version's commit timestamp, in ms since the epoch.
    timestamps: dict[int, int]
    #: The table id (``metaData.id``) offsets carry.
    reservoir_id: str
    #: The metadata in effect at each version reached.
    metadata_by_version: dict[int, Metadata]

    def __iter__(self) -> Iterator[IndexedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, item: int) -> IndexedFile:
        return self.files[item]


def _snapshot_files(snapshot: Snapshot) -> list[dict[str, Any]]:
    columns = ["path", "partitionValues", "size", "modificationTime", "deletionVector"]
    rows = collect(snapshot.all_files().select(*columns))
    return [row.asDict(recursive=True) for row in rows]


def _metadata_by_version(
    version: int, start: Metadata, changes: Sequence[CommitChanges]
) -> dict[int, Metadata]:
    """The metadata in effect at ``version`` and at each of ``changes``' versions."""
    current = start
    result: dict[int, Metadata] = {version: start}
    for change in changes:
        if change.metadata is not None:
            current = Metadata.from_action(change.metadata)
        result[change.version] = current
    return result


def collect_file_changes(
    table: TableLog,
    from_version: int,
    from_index: int,
    is_starting_version: bool,
    limits: AdmissionLimits | None,
    end_offset: DeltaSourceOffset | None,
    known: Mapping[int, Metadata] | None = None,
) -> FileChanges:
    """The file changes after ``(from_version, from_index)`` (see ``cdf_file_changes``); the
    metadata of ``known`` versions is not read again."""
    with logged_job(
        _log, "change data feed file changes", table=table.table_root, after=from_version
    ):
        return _collect_file_changes(
            table, from_version, from_index, is_starting_version, limits, end_offset, known
        )


def _collect_file_changes(
    table: TableLog,
    from_version: int,
    from_index: int,
    is_starting_version: bool,
    limits: AdmissionLimits | None,
    end_offset: DeltaSourceOffset | None,
    known: Mapping[int, Metadata] | None,
) -> FileChanges:
    listing = table.list_log()
    latest = table.log_segment(None, listing).version
    last = latest if end_offset is None else min(latest, end_offset.reservoir_version)
    if from_version > last:
        return FileChanges([], None, {}, "", {})
    first_commit = from_version + 1 if is_starting_version else from_version
    commits = commits_by_version(listing)
    files = require_commits(table.table_root, commits, first_commit, last)
    changes = read_commit_changes(table, files)
    snapshot = snapshot_at(table, listing, from_version) if is_starting_version else None
    start_metadata = (
        snapshot.metadata
        if snapshot is not None
        else metadata_at(table, listing, changes[0], known or {})
    )
    # Streams check only the batch's start version (delta-spark passes no metaData actions to
    # changesToDF when streaming); a later change to CDF is a barrier, so the batch after it
    # starts at that version and is checked then.
    check_enabled(start_metadata, from_version, from_version, last)
    timestamps = commit_timestamps_ms(commits, changes, from_version, last)
    versions: list[VersionFiles] = []
    if snapshot is not None:
        snapshot_files = index_snapshot(from_version, _snapshot_files(snapshot))
        versions.append(VersionFiles(from_version, snapshot_files, initial_snapshot=True))
        # The snapshot's rows carry its in-commit timestamp where it has one (delta-spark
        # passes it with them), else its commit's monotonized file time.
        ict = snapshot.in_commit_timestamp_ms
        if ict is not None:
            timestamps[from_version] = ict
        else:
            timestamps.setdefault(from_version, snapshot.timestamp_ms)
    versions.extend(
        VersionFiles(c.version, index_commit(c, schema_change=_is_schema_change(c, start_metadata)))
        for c in changes
    )
    selected = file_changes(versions, from_version, from_index, limits, end_offset)
    # Like delta-spark's stream, which checks each protocol action as it reaches its commit.
    reached = max((f.version for f in selected), default=from_version)
    reached_changes = [c for c in changes if c.version <= reached]
    check_protocols(table.table_root, reached_changes)
    check_features_in_range(table, listing, reached_changes, start_checked=False)
    by_version = _metadata_by_version(from_version, start_metadata, changes)
    return FileChanges(selected, start_metadata, timestamps, start_metadata.id, by_version)


def _is_schema_change(change: CommitChanges, stream_metadata: Metadata) -> bool:
    """Whether ``change`` gets a barrier: a ``metaData`` that changes what the stream reads
    (the metadata at the stream's version already includes that version's own action)."""
    if change.metadata is None:
        return False
    return changes_stream_metadata(Metadata.from_action(change.metadata), stream_metadata)


def cdf_file_changes(
    table: TableLog,
    from_version: int,
    from_index: int = -1,
    is_starting_version: bool = False,
    *,
    max_files: int | None = None,
    max_bytes: int | str | None = None,
    end_offset: DeltaSourceOffset | str | None = None,
) -> FileChanges:
    """delta-spark's ``getFileChangesForCDC``: indexed file actions (with BASE/END sentinels)
    strictly after ``(from_version, from_index)``, up to ``end_offset``, within the limits, and
    up to the first schema-change barrier (``METADATA_CHANGE_INDEX``, included): a later commit
    whose metadata differs from the metadata at ``from_version``.

    No limits when both ``max_files`` and ``max_bytes`` are None. Runs small Spark jobs (listing,
    P&M, one collect of file actions; plus the snapshot's files when ``is_starting_version``).
    """
    limits = (
        None
        if max_files is None and max_bytes is None
        else AdmissionLimits.of(max_files, max_bytes)
    )
    end = DeltaSourceOffset.from_json(end_offset) if isinstance(end_offset, str) else end_offset
    return collect_file_changes(table, from_version, from_index, is_starting_version, limits, end)
