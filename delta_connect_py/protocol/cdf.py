"""Change data feed rules: which file actions each version contributes, offsets and admission.

Responsibility: the pure parts of delta-spark's CDF reader and streaming source (notes 1.10,
2.7-2.10) over plain action dicts (one log line each, ``{"add": {...}}``):
* :func:`filter_cdc_actions` (``filterCDCActions``): a version's cdc files if it has any, else
  its ``dataChange`` add/remove actions; a no-op MERGE marks its file actions skipped;
* :func:`index_commit` / :func:`index_snapshot`: indexed files with BASE/END sentinels (a
  snapshot's files ordered by ``(modificationTime, path)``, ``dataChange`` forced true) and, for
  a commit whose metadata changes what a stream reads, the ``METADATA_CHANGE_INDEX`` barrier;
* :class:`AdmissionLimits` (soft ``maxFiles``/``maxBytes``), :func:`filter_version` and
  :func:`file_changes` (``getFileChangesForCDC``: resume strictly after ``(version, index)``, stop
  at an end offset, a commit's cdc files and DV add/remove pairs all-or-nothing, the first
  commit of a batch always admitted whole; a batch ends at, and includes, the first
  schema-change barrier, so it never spans a schema change);
* :class:`DeltaSourceOffset` and its JSON form, and :func:`next_offset`
  (``buildOffsetFromIndexedFile``).

Invariants: indices are assigned before skip filtering, so they never change when limits or
resume points change; a file action is admitted at most once across batches that resume from
the returned offsets; ``END_INDEX`` is never serialized and ``-1`` is never an in-memory index
(it is the V1 spelling of ``BASE_INDEX``). Only the standard library is imported.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from delta_connect_py.errors import (
    InvalidFormatFromSourceVersionError,
    InvalidSourceOffsetError,
    InvalidSourceVersionError,
)

BASE_INDEX = -100
METADATA_CHANGE_INDEX = -20
POST_METADATA_CHANGE_INDEX = -19
END_INDEX = (1 << 63) - 1 - 100
LEGACY_BASE_INDEX = -1
SOURCE_VERSION_V1 = 1
SOURCE_VERSION_V3 = 3
DEFAULT_MAX_FILES_PER_TRIGGER = 1000
_MAX_FILES_BYTES_ONLY = (1 << 31) - 1 - 8
_LONG_MAX = (1 << 63) - 1
FILE_KINDS = ("add", "remove", "cdc")
_NOOP_MERGE_METRICS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")


@dataclass(frozen=True)
class DeltaSourceOffset:
    """A position in a table's change feed (delta-spark's ``DeltaSourceOffset``), ordered by
    ``(reservoir_version, index)``: what ``DeltaTable.stream_cdf()`` yields with each batch and
    takes back, or its ``to_json()`` text, to resume after it.

    Example:
        >>> saved = offset.to_json()  # store it with the batch's output
        >>> dt.stream_cdf(offset=saved)  # later: resume strictly after it
    """

    #: The table id (``metaData.id``): an offset of another table is refused.
    reservoir_id: str
    #: The version the offset is in.
    reservoir_version: int
    #: The position within that version (``BASE_INDEX``: before its first file).
    index: int
    #: Whether the stream started with the snapshot at ``reservoir_version`` as inserts.
    is_starting_version: bool

    def __post_init__(self) -> None:
        if self.index == LEGACY_BASE_INDEX:
            raise ValueError("index -1 is only a serialized form; use BASE_INDEX in memory")

    @property
    def position(self) -> tuple[int, int]:
        return self.reservoir_version, self.index

    def __lt__(self, other: DeltaSourceOffset) -> bool:
        return self.position < other.position

    def __le__(self, other: DeltaSourceOffset) -> bool:
        return self.position <= other.position

    def to_dict(self) -> dict[str, Any]:
        """delta-spark's JSON fields; BASE_INDEX is written as -1 with sourceVersion 1."""
        if self.index == END_INDEX:
            raise ValueError("END_INDEX offsets are never serialized")
        if self.index in (METADATA_CHANGE_INDEX, POST_METADATA_CHANGE_INDEX):
            source_version, index = SOURCE_VERSION_V3, self.index
        else:
            source_version = SOURCE_VERSION_V1
            index = LEGACY_BASE_INDEX if self.index == BASE_INDEX else self.index
        return {
            "sourceVersion": source_version,
            "reservoirId": self.reservoir_id,
            "reservoirVersion": self.reservoir_version,
            "index": index,
            "isStartingVersion": self.is_starting_version,
        }

    def to_json(self) -> str:
        """delta-spark's offset JSON, e.g. ``{"sourceVersion":1,"reservoirId":"...",
        "reservoirVersion":3,"index":-1,"isStartingVersion":false}``."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any]) -> DeltaSourceOffset:
        """Parse delta-spark's offset JSON (sourceVersion 1 or 3); ``-1`` becomes BASE_INDEX."""
        try:
            data = json.loads(text) if isinstance(text, str) else dict(text)
            source_version = int(data["sourceVersion"])
            index = int(data["index"])
            offset = (data["reservoirId"], int(data["reservoirVersion"]))
            starting = bool(data.get("isStartingVersion", data.get("isInitialSnapshot", False)))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidSourceOffsetError(offset=text, reason=f"malformed: {exc}") from exc
        if source_version > SOURCE_VERSION_V3:
            raise InvalidFormatFromSourceVersionError(
                offset=text, version=source_version, expected=SOURCE_VERSION_V3
            )
        if source_version not in (SOURCE_VERSION_V1, SOURCE_VERSION_V3):
            raise InvalidSourceVersionError(offset=text, version=source_version)
        if index == LEGACY_BASE_INDEX:
            index = BASE_INDEX
        return cls(str(offset[0]), offset[1], index, starting)


def validate_offsets(previous: DeltaSourceOffset, current: DeltaSourceOffset) -> None:
    """delta-spark's ``validateOffsets``: offsets never go back, nor back to the snapshot."""
    if not previous.is_starting_version and current.is_starting_version:
        raise ValueError(f"offset {current} returns to the initial snapshot after {previous}")
    if current.reservoir_version < previous.reservoir_version:
        raise ValueError(f"offset version went back from {previous} to {current}")
    if current.reservoir_version == previous.reservoir_version and current.index < previous.index:
        raise ValueError(f"offset index went back from {previous} to {current}")


@dataclass(frozen=True)
class IndexedFile:
    """One entry of the change feed: a file action (``kind``, ``action``) or a sentinel."""

    version: int
    index: int
    kind: str | None = None
    action: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    should_skip: bool = False

    @property
    def is_sentinel(self) -> bool:
        return self.action is None

    @property
    def is_schema_change(self) -> bool:
        """A schema-change barrier: no batch reads past it with the schema before it."""
        return self.action is None and self.index in (
            METADATA_CHANGE_INDEX,
            POST_METADATA_CHANGE_INDEX,
        )

    @property
    def size(self) -> int:
        """The action's size (a remove without one counts 0, as in delta-spark)."""
        return 0 if self.action is None else int(self.action.get("size") or 0)

    @property
    def path(self) -> str | None:
        return None if self.action is None else str(self.action["path"])

    @property
    def has_deletion_vector(self) -> bool:
        return self.kind in ("add", "remove") and bool(
            self.action and self.action.get("deletionVector")
        )


@dataclass(frozen=True)
class CommitChanges:
    """What one commit contributes to the change feed (``filterCDCActions``)."""

    version: int
    files: tuple[tuple[str, Mapping[str, Any]], ...]
    should_skip: bool = False
    has_cdc: bool = False
    commit_info: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None

    @property
    def in_commit_timestamp(self) -> int | None:
        value = (self.commit_info or {}).get("inCommitTimestamp")
        return None if value is None else int(value)


def _only_action(line: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for name, value in line.items():
        if value is not None:
            return name, value
    return None


def is_noop_merge(commit_info: Mapping[str, Any] | None) -> bool:
    """``shouldSkipFileActionsInCommit``: a MERGE whose target metrics are all ``"0"``."""
    if not commit_info or commit_info.get("operation") != "MERGE":
        return False
    metrics = commit_info.get("operationMetrics") or {}
    return all(metrics.get(name) == "0" for name in _NOOP_MERGE_METRICS)


def filter_cdc_actions(version: int, lines: Iterable[Mapping[str, Any]]) -> CommitChanges:
    """The version's cdc files if it has any, else its ``dataChange=true`` add/remove actions."""
    actions = [action for action in map(_only_action, lines) if action is not None]
    singles = {name: value for name, value in actions if name in ("commitInfo", "metaData")}
    protocol = next((value for name, value in actions if name == "protocol"), None)
    cdc = tuple((name, value) for name, value in actions if name == "cdc")
    if cdc:
        return CommitChanges(
            version,
            cdc,
            has_cdc=True,
            commit_info=singles.get("commitInfo"),
            metadata=singles.get("metaData"),
            protocol=protocol,
        )
    files = tuple(
        (name, value)
        for name, value in actions
        if name in ("add", "remove") and value.get("dataChange") is True
    )
    return CommitChanges(
        version,
        files,
        should_skip=is_noop_merge(singles.get("commitInfo")),
        commit_info=singles.get("commitInfo"),
        metadata=singles.get("metaData"),
        protocol=protocol,
    )


def index_commit(changes: CommitChanges, *, schema_change: bool = False) -> list[IndexedFile]:
    """``[BASE] ++ [METADATA_CHANGE if schema_change] ++ files.zipWithIndex ++ [END]``.

    Indices are assigned before skipping. ``schema_change``: the commit's metadata changes what
    the stream reads (see :func:`delta_connect_py.protocol.schema_changes.changes_stream_metadata`).
    """
    v = changes.version
    files = [
        IndexedFile(v, i, kind, action, should_skip=changes.should_skip)
        for i, (kind, action) in enumerate(changes.files)
    ]
    barrier = [IndexedFile(v, METADATA_CHANGE_INDEX)] if schema_change else []
    return [IndexedFile(v, BASE_INDEX), *barrier, *files, IndexedFile(v, END_INDEX)]


def _snapshot_order(add: Mapping[str, Any]) -> tuple[int, str]:
    return int(add.get("modificationTime") or 0), str(add["path"])


def index_snapshot(version: int, adds: Iterable[Mapping[str, Any]]) -> list[IndexedFile]:
    """A snapshot's files as inserts: ordered by (modificationTime, path), dataChange true."""
    ordered = sorted(adds, key=_snapshot_order)
    files = [
        IndexedFile(version, i, "add", {**add, "dataChange": True, "stats": None})
        for i, add in enumerate(ordered)
    ]
    return [IndexedFile(version, BASE_INDEX), *files, IndexedFile(version, END_INDEX)]


_SIZE = re.compile(r"\s*(\d+)\s*([a-z]*)\s*")
_SIZE_UNITS = {"": 0, "b": 0, "k": 1, "kb": 1, "m": 2, "mb": 2, "g": 3, "gb": 3}
_SIZE_UNITS.update({"t": 4, "tb": 4, "p": 5, "pb": 5})


def parse_size(value: int | str) -> int:
    """Spark's ``byteStringAsBytes``: ``"10g"`` -> bytes (binary units); ints pass through."""
    if isinstance(value, int):
        return value
    match = _SIZE.fullmatch(value.lower())
    if not match or match[2] not in _SIZE_UNITS:
        raise ValueError(f"cannot parse {value!r} as a size (e.g. 512m, 10g)")
    return int(match[1]) << (10 * _SIZE_UNITS[match[2]])


@dataclass
class AdmissionLimits:
    """delta-spark's soft per-trigger limits (mutable: consumed as files are admitted)."""

    files_to_take: int
    bytes_to_take: int
    commit_processed_in_batch: bool = False

    @classmethod
    def of(
        cls, max_files: int | None = None, max_bytes: int | str | None = None
    ) -> AdmissionLimits:
        if max_files is not None and max_files <= 0:
            raise ValueError(f"maxFilesPerTrigger must be positive, got {max_files}")
        if max_files is None:
            max_files = (
                DEFAULT_MAX_FILES_PER_TRIGGER if max_bytes is None else _MAX_FILES_BYTES_ONLY
            )
        size = _LONG_MAX if max_bytes is None else parse_size(max_bytes)
        if size <= 0:
            raise ValueError(f"maxBytesPerTrigger must be positive, got {max_bytes}")
        return cls(max_files, size)

    @property
    def has_capacity(self) -> bool:
        return self.files_to_take > 0 and self.bytes_to_take > 0

    def admit(self, file: IndexedFile) -> bool:
        """Sentinels always pass uncounted; a file passes while capacity remains (soft)."""
        if file.is_sentinel:
            return True
        admitted = self.has_capacity
        self.commit_processed_in_batch = True
        self.files_to_take -= 1
        self.bytes_to_take -= file.size
        return admitted

    def admit_all(self, files: Sequence[IndexedFile]) -> bool:
        """All-or-nothing: fits the remaining capacity, or is the batch's first commit."""
        actions = [file for file in files if not file.is_sentinel]
        if not actions:
            return True
        size = sum(file.size for file in actions)
        admitted = not self.commit_processed_in_batch or (
            self.files_to_take - len(actions) >= 0 and self.bytes_to_take - size >= 0
        )
        self.commit_processed_in_batch = True
        self.files_to_take -= len(actions)
        self.bytes_to_take -= size
        return admitted


@dataclass(frozen=True)
class VersionFiles:
    """One version's indexed files; ``initial_snapshot`` for the snapshot's files."""

    version: int
    files: Sequence[IndexedFile]
    initial_snapshot: bool = False


def _within_end(file: IndexedFile, end: DeltaSourceOffset | None) -> bool:
    if end is None:
        return True
    return (file.version, file.index) <= end.position


def is_valid_file(
    file: IndexedFile, from_version: int, from_index: int, end: DeltaSourceOffset | None
) -> bool:
    """Not skipped, strictly after ``(from_version, from_index)`` and at or before ``end``."""
    if file.should_skip and not file.is_sentinel:
        return False
    after = file.version > from_version or (
        file.version == from_version and file.index > from_index
    )
    return after and _within_end(file, end)


def _take_while(files: Iterable[IndexedFile], limits: AdmissionLimits) -> Iterator[IndexedFile]:
    for file in files:
        if not limits.admit(file):
            return
        yield file


def filter_version(
    version_files: VersionFiles,
    from_version: int,
    from_index: int,
    limits: AdmissionLimits | None,
    end: DeltaSourceOffset | None,
) -> list[IndexedFile]:
    """``IndexedChangeFileSeq.filterFiles`` for one version (a schema-change barrier, when the
    version has a valid one, is all a limited read takes of it)."""
    valid = [f for f in version_files.files if is_valid_file(f, from_version, from_index, end)]
    if limits is None:
        return valid
    if version_files.initial_snapshot:
        return list(_take_while(valid, limits))
    barrier = next((f for f in valid if f.is_schema_change), None)
    if barrier is not None:
        return [barrier]
    all_or_nothing = any(f.kind == "cdc" or f.has_deletion_vector for f in valid)
    if all_or_nothing:
        return valid if limits.admit_all(valid) else []
    return list(_take_while(valid, limits))


def file_changes(
    versions: Iterable[VersionFiles],
    from_version: int,
    from_index: int,
    limits: AdmissionLimits | None = None,
    end: DeltaSourceOffset | None = None,
) -> list[IndexedFile]:
    """``getFileChangesForCDC`` flattened: stop when capacity is spent, past ``end``, or at a
    schema-change barrier (included: ``stopIndexedFileIteratorAtSchemaChangeBarrier``)."""
    result: list[IndexedFile] = []
    for version_files in versions:
        if limits is not None and not limits.has_capacity:
            break
        if end is not None and version_files.version > end.reservoir_version:
            break
        for file in filter_version(version_files, from_version, from_index, limits, end):
            result.append(file)
            if file.is_schema_change:
                return result
    return result


def next_offset(previous: DeltaSourceOffset, files: Sequence[IndexedFile]) -> DeltaSourceOffset:
    """The offset after the last of ``files`` (``previous`` when there are none)."""
    if not files:
        return previous
    last = files[-1]
    if last.index == END_INDEX:
        return replace(
            previous,
            reservoir_version=last.version + 1,
            index=BASE_INDEX,
            is_starting_version=False,
        )
    starting = previous.is_starting_version and last.version == previous.reservoir_version
    return replace(
        previous, reservoir_version=last.version, index=last.index, is_starting_version=starting
    )
