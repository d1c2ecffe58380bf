"""Log segment choice: which checkpoint and which commits rebuild a table version.

Responsibility: given one listing of ``_delta_log`` (as :class:`LogFile` values) and optionally
the ``_last_checkpoint`` hint, pick the files that reconstruct a version, or raise the Delta
error delta-spark's ``SnapshotManagement`` raises for that listing (its time travel check,
``DeltaHistoryManager.checkVersionExists``, for an explicit version before the earliest one).

Invariants of a returned :class:`LogSegment`:
* ``checkpoint`` is complete (every part of a multi-part set present, no zero-byte file) and
  its version is at most ``version``; it is the newest complete checkpoint that is, whatever the
  hint says (a stale hint is ignored; a hint naming a missing or incomplete checkpoint falls
  back to the best complete one).
* ``commits`` cover exactly ``checkpoint.version + 1 .. version`` (``0 .. version`` without a
  checkpoint), ascending and contiguous; compaction files replace runs of commits only when a
  greedy left-to-right choice covers that range exactly. Commits above ``version`` and gaps
  before the checkpoint are ignored. A checkpoint without a commit file at its own version is
  fine (tables whose early commits were vacuumed).
* ``last_commit_timestamp`` is the modification time of the commit file of ``version``, or of
  the checkpoint when only a checkpoint covers ``version``.
The functions are pure: no file system, no clock.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from delta_connect_py.errors import (
    LogFileNotFoundError,
    MissingDeltaTableError,
    MissingPartFilesError,
    TruncatedTransactionLogError,
    VersionNotFoundError,
    VersionsNotContiguousError,
)
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.last_checkpoint import LastCheckpoint

#: delta-spark's CheckpointInstance.Format ordinal: SINGLE < WITH_PARTS < V2.
_FORMAT_ORDER = {
    LogFileKind.CHECKPOINT: 0,
    LogFileKind.MULTIPART_CHECKPOINT: 1,
    LogFileKind.UUID_CHECKPOINT: 2,
}
UNKNOWN_RETENTION = "unknown"


@dataclass(frozen=True)
class CheckpointChoice:
    """One complete checkpoint: all its files, sorted by part."""

    version: int
    kind: LogFileKind
    files: tuple[LogFile, ...]

    @property
    def num_parts(self) -> int:
        return len(self.files)

    @property
    def modification_time(self) -> int:
        """The newest modification time among the checkpoint's files."""
        return max(file.modification_time for file in self.files)

    def _order(self) -> tuple[int, int, int, str]:
        return self.version, _FORMAT_ORDER[self.kind], self.num_parts, self.files[0].name


@dataclass(frozen=True)
class LogSegment:
    """The files that reconstruct ``version`` of the table whose log is at ``log_path``."""

    log_path: str
    version: int
    checkpoint: CheckpointChoice | None
    commits: tuple[LogFile, ...]
    checksum: LogFile | None
    last_commit_timestamp: int
    all_commits: tuple[LogFile, ...]

    @property
    def checkpoint_version(self) -> int:
        """The checkpoint's version, -1 without one."""
        return -1 if self.checkpoint is None else self.checkpoint.version


def _of_kind(files: Iterable[LogFile], kind: LogFileKind) -> list[LogFile]:
    return [file for file in files if file.kind is kind]


def _commits(files: Iterable[LogFile]) -> list[LogFile]:
    """Commit files ascending by version, one per version (the first listed wins)."""
    by_version: dict[int, LogFile] = {}
    for file in _of_kind(files, LogFileKind.COMMIT):
        by_version.setdefault(file.version, file)
    return [by_version[v] for v in sorted(by_version)]


def _multipart_choices(files: Iterable[LogFile]) -> list[CheckpointChoice]:
    groups: dict[tuple[int, int], dict[int, LogFile]] = defaultdict(dict)
    for file in _of_kind(files, LogFileKind.MULTIPART_CHECKPOINT):
        assert file.part is not None and file.num_parts is not None
        groups[(file.version, file.num_parts)].setdefault(file.part, file)
    return [
        CheckpointChoice(
            version, LogFileKind.MULTIPART_CHECKPOINT, tuple(parts[p] for p in sorted(parts))
        )
        for (version, num_parts), parts in groups.items()
        if len(parts) == num_parts
    ]


def complete_checkpoints(files: Iterable[LogFile]) -> list[CheckpointChoice]:
    """Every complete checkpoint, ascending by (version, format, parts, name).

    Zero-byte checkpoint files are ignored. A classic or UUID-named file is complete alone; a
    multi-part checkpoint is complete iff all ``num_parts`` parts of one set are listed.
    """
    usable = [file for file in files if file.is_checkpoint and file.size > 0]
    singles = [
        CheckpointChoice(file.version, file.kind, (file,))
        for file in usable
        if file.kind is not LogFileKind.MULTIPART_CHECKPOINT
    ]
    return sorted(singles + _multipart_choices(usable), key=CheckpointChoice._order)


def _earliest_reconstructable(files: Sequence[LogFile]) -> int | None:
    commit_versions = {file.version for file in _of_kind(files, LogFileKind.COMMIT)}
    checkpoint_versions = {choice.version for choice in complete_checkpoints(files)}
    if not commit_versions and not checkpoint_versions:
        return None
    latest = max(commit_versions | checkpoint_versions)
    starts = checkpoint_versions | ({0} if 0 in commit_versions else set())
    for start in sorted(starts):
        if all(v in commit_versions for v in range(start + 1, latest + 1)):
            return start
    return None


def earliest_reconstructable_version(files: Sequence[LogFile]) -> int:
    """The smallest version v with a complete checkpoint at v (or v == 0 with commit 0) from
    which commits are contiguous up to the latest version. ``ValueError`` when none exists."""
    earliest = _earliest_reconstructable(files)
    if earliest is None:
        raise ValueError("no version of this log can be reconstructed up to its latest version")
    return earliest


def _latest_version(commits: Sequence[LogFile], checkpoints: Sequence[CheckpointChoice]) -> int:
    return max([c.version for c in commits] + [c.version for c in checkpoints])


def _describe_earliest(files: Sequence[LogFile]) -> str:
    earliest = _earliest_reconstructable(files)
    return "none" if earliest is None else str(earliest)


def _hint_is_complete(hint: LastCheckpoint, checkpoints: Sequence[CheckpointChoice]) -> bool:
    """Whether the listing holds a complete checkpoint matching the hint."""
    for choice in checkpoints:
        if choice.version != hint.version:
            continue
        if hint.parts is None or (
            choice.kind is LogFileKind.MULTIPART_CHECKPOINT and choice.num_parts == hint.parts
        ):
            return True
    return False


def _choose_checkpoint(
    checkpoints: Sequence[CheckpointChoice],
    target: int,
    hint: LastCheckpoint | None,
    commits: Sequence[LogFile],
    table_path: str,
) -> CheckpointChoice | None:
    candidates = [choice for choice in checkpoints if choice.version <= target]
    best = candidates[-1] if candidates else None
    hint_broken = (
        hint is not None
        and hint.parts is not None
        and hint.version <= target
        and not _hint_is_complete(hint, checkpoints)
    )
    has_commit_zero = bool(commits) and commits[0].version == 0
    if hint_broken and best is None and not has_commit_zero:
        assert hint is not None
        raise MissingPartFilesError(version=hint.version, path=table_path)
    return best


def _check_contiguous(deltas: Sequence[LogFile], target: int, table_path: str) -> None:
    versions = [file.version for file in deltas]
    for before, after in itertools.pairwise(versions):
        if after != before + 1:
            raise VersionsNotContiguousError(
                versions=", ".join(str(v) for v in versions),
                start_version=before,
                end_version=after,
                version_to_load=target,
                path=table_path,
            )


def _validate_deltas(
    deltas: Sequence[LogFile],
    checkpoint: CheckpointChoice | None,
    target: int,
    files: Sequence[LogFile],
    paths: tuple[str, str],
) -> None:
    table_path, log_path = paths
    checkpoint_version = -1 if checkpoint is None else checkpoint.version
    if checkpoint is not None and not deltas:
        if checkpoint_version != target:
            raise LogFileNotFoundError(
                version=target, checkpoint_version=checkpoint_version, path=log_path
            )
        return
    if not deltas or deltas[0].version != checkpoint_version + 1:
        raise TruncatedTransactionLogError(
            path=table_path,
            version=target,
            log_retention=UNKNOWN_RETENTION,
            checkpoint_retention=UNKNOWN_RETENTION,
            earliest_version=_describe_earliest(files),
        )
    _check_contiguous(deltas, target, table_path)
    if deltas[-1].version != target:
        raise LogFileNotFoundError(
            version=target, checkpoint_version=checkpoint_version, path=log_path
        )


def _greedy_compactions(
    deltas: Sequence[LogFile], compactions: Sequence[LogFile], first: int, target: int
) -> list[LogFile] | None:
    """Commits with runs replaced by compactions, or None unless they cover first..target."""
    pieces = [(d.version, d.version, 1, d) for d in deltas]
    pieces += [(c.start_version or 0, c.version, 0, c) for c in compactions]
    pieces.sort(key=lambda piece: (piece[0], piece[2], piece[1], piece[3].name))
    chosen: list[LogFile] = []
    highest = first - 1
    for start, end, _, file in pieces:
        if start == highest + 1 and end <= target:
            chosen.append(file)
            highest = end
    return chosen if highest == target else None


def _with_compactions(
    deltas: list[LogFile], files: Sequence[LogFile], checkpoint_version: int, target: int
) -> list[LogFile]:
    compactions = [
        file
        for file in _of_kind(files, LogFileKind.COMPACTION)
        if file.start_version is not None
        and file.start_version > checkpoint_version
        and file.version <= target
    ]
    if not compactions or not deltas:
        return deltas
    chosen = _greedy_compactions(deltas, compactions, checkpoint_version + 1, target)
    return deltas if chosen is None else chosen


def _checksum_file(files: Iterable[LogFile], version: int) -> LogFile | None:
    return next((f for f in _of_kind(files, LogFileKind.CHECKSUM) if f.version == version), None)


def _raise_without_readable_files(
    files: Sequence[LogFile], version: int | None, paths: tuple[str, str]
) -> None:
    """No commit and no complete checkpoint: say what is there instead."""
    table_path, log_path = paths
    checkpoint_files = [file for file in files if file.is_checkpoint]
    if not checkpoint_files:
        raise MissingDeltaTableError(path=table_path, log_path=log_path)
    multipart = _of_kind(checkpoint_files, LogFileKind.MULTIPART_CHECKPOINT)
    if multipart:
        raise MissingPartFilesError(version=max(f.version for f in multipart), path=table_path)
    newest = max(file.version for file in checkpoint_files)
    raise LogFileNotFoundError(
        version=newest if version is None else version, checkpoint_version=-1, path=log_path
    )


def build_log_segment(
    table_path: str,
    log_path: str,
    files: Sequence[LogFile],
    *,
    version: int | None = None,
    last_checkpoint: LastCheckpoint | None = None,
    use_compactions: bool = False,
    checkpoint_before: int | None = None,
) -> LogSegment:
    """Choose the checkpoint and commits that reconstruct ``version`` (default: latest).

    Compaction files are optional to read (PROTOCOL.md) and only ever stand in for commits that
    are all present, so ``use_compactions`` is off by default: upstream fixtures (delta-kernel-rs'
    compacted-log-files-table) hold unreconciled compactions whose replay is ambiguous.
    ``checkpoint_before`` leaves out checkpoints of that version and later (and the hint), as
    delta-spark's ``getLogSegmentWithMaxExclusiveCheckpointVersion`` does when a checkpoint
    cannot be read.
    """
    paths = (table_path, log_path)
    all_commits = _commits(files)
    checkpoints = complete_checkpoints(files)
    if checkpoint_before is not None:
        checkpoints = [choice for choice in checkpoints if choice.version < checkpoint_before]
        last_checkpoint = None
    if not all_commits and not checkpoints:
        _raise_without_readable_files(files, version, paths)
    latest = _latest_version(all_commits, checkpoints)
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFoundError(
            path=table_path, version=target, earliest=_describe_earliest(files), latest=latest
        )
    checkpoint = _choose_checkpoint(checkpoints, target, last_checkpoint, all_commits, table_path)
    checkpoint_version = -1 if checkpoint is None else checkpoint.version
    deltas = [c for c in all_commits if checkpoint_version < c.version <= target]
    try:
        _validate_deltas(deltas, checkpoint, target, files, paths)
    except TruncatedTransactionLogError:
        # Time travel (an explicit version) to before the earliest version a checkpoint or
        # commit 0 can rebuild is DELTA_VERSION_NOT_FOUND in delta-spark, raised by
        # DeltaHistoryManager.checkVersionExists before any log segment is built; the latest
        # version on a truncated log, or a log with no rebuildable version, stays truncated.
        earliest = _earliest_reconstructable(files)
        if version is None or earliest is None or target >= earliest:
            raise
        raise VersionNotFoundError(
            path=table_path, version=target, earliest=earliest, latest=latest
        ) from None
    last_timestamp = (
        deltas[-1].modification_time
        if deltas
        else _checkpoint_timestamp(checkpoint, all_commits, target)
    )
    return LogSegment(
        log_path=log_path,
        version=target,
        checkpoint=checkpoint,
        commits=tuple(
            _with_compactions(deltas, files, checkpoint_version, target)
            if use_compactions
            else deltas
        ),
        checksum=_checksum_file(files, target),
        last_commit_timestamp=last_timestamp,
        all_commits=tuple(all_commits),
    )


def _checkpoint_timestamp(
    checkpoint: CheckpointChoice | None, commits: Sequence[LogFile], target: int
) -> int:
    """The commit file of ``target`` if listed, else the checkpoint's modification time."""
    assert checkpoint is not None  # _validate_deltas guarantees it when there are no deltas
    own = next((c for c in commits if c.version == target), None)
    return checkpoint.modification_time if own is None else own.modification_time
