"""Expired-log cleanup decisions (delta-spark's MetadataCleanup), as pure functions.

Responsibility: given one listing of ``_delta_log`` (as :class:`LogFile` values), the
``_last_checkpoint`` hint, the table configuration and "now", decide which log files
``cleanup_metadata`` deletes; and, given the sidecars present and those still referenced, which
sidecars are garbage. Nothing here touches a file system or reads the clock.

The rule (notes 2.6, delta-spark's ``BufferingLogDeletionIterator``): commits, checkpoints and
``.crc`` files are walked in name order with their modification times monotonized (a file of a
higher version whose time is not after the previous file's counts as previous + 1 ms). A
*boundary* is a complete checkpoint C such that

* the file listed just before C (its version is below C) has a version at most
  ``last_checkpoint.version - 1`` (delta-spark's condition),
* every file listed before C has a monotonized time at or before the cutoff (delta-spark checks
  only the last one, which equals this unless a file's time is later than a later file of the
  same version), and
* C's own files have monotonized times at or before the cutoff (stricter than delta-spark, as
  PROTOCOL.md's "newest checkpoint not newer than the cutoff commit" asks: a timestamp after
  the cutoff therefore never resolves to a deleted version).

The newest boundary wins; every commit, checkpoint and ``.crc`` file of a version below it is
deleted, plus compaction files ending below it. The cutoff is UTC midnight of
``now - delta.logRetentionDuration``.

Invariants: nothing is deleted without a ``_last_checkpoint`` hint, when
``delta.enableExpiredLogCleanup`` is false, or when
``delta.requireCheckpointProtectionBeforeVersion`` is set above the boundary (conservative:
delta-spark may still clean up when every protocol in the range is supported; we skip). Files
at or after the boundary are never deleted, so every version from the boundary to the latest
stays reconstructable and the boundary checkpoint itself stays. Data files are never in the
input, so never deleted. Sidecars are garbage only when no retained checkpoint references them
and their modification time is before the cutoff.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.last_checkpoint import LastCheckpoint
from delta_connect_py.protocol.segment import CheckpointChoice, complete_checkpoints

MS_PER_DAY = 86_400_000
REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION = "delta.requireCheckpointProtectionBeforeVersion"

#: The file kinds delta-spark's ``listExpiredDeltaLogs`` walks.
_WALKED_KINDS = frozenset(
    {
        LogFileKind.COMMIT,
        LogFileKind.CHECKPOINT,
        LogFileKind.MULTIPART_CHECKPOINT,
        LogFileKind.UUID_CHECKPOINT,
        LogFileKind.CHECKSUM,
    }
)


@dataclass(frozen=True)
class CleanupPlan:
    """What one cleanup deletes; ``boundary`` is the version of the checkpoint it keeps."""

    boundary: int | None
    delete: tuple[LogFile, ...]
    retained_checkpoints: tuple[LogFile, ...]
    reason: str

    @property
    def deletes_checkpoint(self) -> bool:
        """True when a checkpoint is deleted (then sidecars are swept, as delta-spark does)."""
        return any(file.is_checkpoint for file in self.delete)


def truncate_to_utc_midnight(epoch_ms: int) -> int:
    """The UTC midnight at or before ``epoch_ms``."""
    return epoch_ms - epoch_ms % MS_PER_DAY


def cutoff_timestamp(now_ms: int, configuration: Mapping[str, str]) -> int:
    """UTC midnight of ``now - delta.logRetentionDuration`` (delta-spark's fileCutOffTime)."""
    return truncate_to_utc_midnight(now_ms - props.log_retention_ms(configuration))


def checkpoint_protection_version(configuration: Mapping[str, str]) -> int:
    """``delta.requireCheckpointProtectionBeforeVersion``; 0 when unset."""
    value = configuration.get(REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION)
    if value is None:
        return 0
    try:
        return int(value.strip())
    except ValueError as exc:
        raise ValueError(
            f"{REQUIRE_CHECKPOINT_PROTECTION_BEFORE_VERSION} must be an integer, got {value!r}"
        ) from exc


def walked_files(files: Iterable[LogFile]) -> list[LogFile]:
    """Commits, checkpoints and ``.crc`` files in name order (delta-spark's listing order)."""
    return sorted((f for f in files if f.kind in _WALKED_KINDS), key=lambda f: f.name)


def monotonized_times(walked: Sequence[LogFile]) -> dict[str, int]:
    """File name -> modification time, bumped to previous + 1 when a higher version is older."""
    times: dict[str, int] = {}
    previous: LogFile | None = None
    previous_time = 0
    for file in walked:
        current = file.modification_time
        if previous is not None and file.version > previous.version and current <= previous_time:
            current = previous_time + 1
        times[file.name] = current
        previous, previous_time = file, current
    return times


def _is_boundary(
    checkpoint: CheckpointChoice,
    walked: Sequence[LogFile],
    newest_before: Sequence[int],
    times: Mapping[str, int],
    limits: tuple[int, int],
) -> bool:
    """``newest_before[i]``: the newest monotonized time among ``walked[:i + 1]``."""
    cutoff_ms, max_version = limits
    position = bisect_left([file.version for file in walked], checkpoint.version)
    if position == 0:
        return False
    own_time = max(times[file.name] for file in checkpoint.files)
    return (
        newest_before[position - 1] <= cutoff_ms
        and walked[position - 1].version <= max_version
        and own_time <= cutoff_ms
    )


def find_boundary(
    files: Sequence[LogFile], cutoff_ms: int, last_checkpoint_version: int
) -> int | None:
    """The version of the newest checkpoint everything before which may be deleted, or None."""
    walked = walked_files(files)
    times = monotonized_times(walked)
    newest_before = list(itertools.accumulate((times[f.name] for f in walked), max))
    limits = (cutoff_ms, last_checkpoint_version - 1)
    boundaries = [
        choice.version
        for choice in complete_checkpoints(walked)
        if _is_boundary(choice, walked, newest_before, times, limits)
    ]
    return max(boundaries) if boundaries else None


def _expired(files: Sequence[LogFile], boundary: int) -> list[LogFile]:
    walked = [file for file in walked_files(files) if file.version < boundary]
    compactions = [
        file for file in files if file.kind is LogFileKind.COMPACTION and file.version < boundary
    ]
    return walked + sorted(compactions, key=lambda f: f.name)


def _nothing(reason: str, files: Sequence[LogFile]) -> CleanupPlan:
    checkpoints = tuple(file for file in files if file.is_checkpoint)
    return CleanupPlan(boundary=None, delete=(), retained_checkpoints=checkpoints, reason=reason)


def plan_cleanup(
    files: Sequence[LogFile],
    *,
    last_checkpoint: LastCheckpoint | None,
    configuration: Mapping[str, str],
    now_ms: int,
) -> CleanupPlan:
    """The log files an expired-log cleanup deletes now (see the module docstring)."""
    if not props.expired_log_cleanup_enabled(configuration):
        return _nothing("delta.enableExpiredLogCleanup is false", files)
    if last_checkpoint is None:
        return _nothing("no _last_checkpoint", files)
    cutoff = cutoff_timestamp(now_ms, configuration)
    boundary = find_boundary(files, cutoff, last_checkpoint.version)
    if boundary is None:
        return _nothing("no checkpoint before the retention cutoff", files)
    protection = checkpoint_protection_version(configuration)
    if protection > 0 and boundary < protection:
        return _nothing(
            f"checkpoint protection before version {protection} (boundary {boundary})", files
        )
    delete = _expired(files, boundary)
    deleted = {file.name for file in delete}
    retained = tuple(f for f in files if f.is_checkpoint and f.name not in deleted)
    return CleanupPlan(
        boundary=boundary, delete=tuple(delete), retained_checkpoints=retained, reason="expired"
    )


def needs_compat_checkpoint(
    checkpoint: CheckpointChoice | None, files: Iterable[LogFile], supports_v2_checkpoints: bool
) -> bool:
    """Whether a cleanup that deletes files must first copy ``checkpoint`` (the latest
    snapshot's) to a classic name, as delta-spark's ``createSinglePartCheckpointForBackwardCompat``
    does: on a table supporting ``v2Checkpoint`` whose checkpoint is UUID-named, when no complete
    classic or multi-part checkpoint of that version is in ``files``.

    A reader that knows no V2 checkpoints ignores UUID-named files; the classic-named copy lets
    it find the protocol (and fail on the ``v2Checkpoint`` feature) once the commits it would
    otherwise replay are deleted.
    """
    if not supports_v2_checkpoints or checkpoint is None:
        return False
    if checkpoint.kind is not LogFileKind.UUID_CHECKPOINT:
        return False
    return not any(
        choice.version == checkpoint.version and choice.kind is not LogFileKind.UUID_CHECKPOINT
        for choice in complete_checkpoints(files)
    )


@dataclass(frozen=True)
class SidecarFile:
    """A file in ``_delta_log/_sidecars``: its name (relative to that folder) and mtime."""

    name: str
    modification_time: int


def unreferenced_sidecars(
    sidecars: Iterable[SidecarFile], referenced: Iterable[str], cutoff_ms: int
) -> list[SidecarFile]:
    """Sidecars no retained checkpoint references, last modified before ``cutoff_ms``.

    ``referenced`` holds ``sidecar.path`` values (names relative to ``_sidecars``, possibly
    URI-encoded); only their last path segment is compared, decoded.
    """
    kept = {unquote(path).rsplit("/", 1)[-1] for path in referenced}
    return sorted(
        (s for s in sidecars if s.name not in kept and s.modification_time < cutoff_ms),
        key=lambda s: s.name,
    )
