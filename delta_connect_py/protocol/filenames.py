"""Names of the files in ``_delta_log``: recognising them and building them.

Responsibility: map a listed path to a :class:`LogFile` (kind, version, part numbers) following
delta-spark's ``FileNames`` patterns, and build the canonical names writers use.

Invariants: recognition looks only at the base name (text after the last ``/``) and matches
it whole; anything that is not a commit, checkpoint, compaction or version checksum
(``_last_checkpoint``, temporary files, Hadoop ``.crc`` side files, sidecars) yields ``None``,
as does a compaction whose start is after its end or a multi-part name whose part is outside
``1..num_parts``. A version is exactly 20 digits, as the protocol names files and delta-rs and
Delta Kernel read them: another run of digits (``000000000000000000014.json``) is not a log file
(delta-spark's ``\\d+`` takes such a name or not depending on where its lexicographic listing
starts, and then misorders it). Names we build are zero padded to 20 digits (versions) and 10
digits (checkpoint part numbers). A compaction file's ``version`` is its END version, like
delta-spark's ``getFileVersion``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

_VERSION = r"(\d{20})"
_COMMIT = re.compile(rf"{_VERSION}\.json")
_COMPACTION = re.compile(rf"{_VERSION}\.{_VERSION}\.compacted\.json")
_CHECKSUM = re.compile(rf"{_VERSION}\.crc")
_CLASSIC_CHECKPOINT = re.compile(rf"{_VERSION}\.checkpoint\.parquet")
_MULTIPART_CHECKPOINT = re.compile(rf"{_VERSION}\.checkpoint\.(\d+)\.(\d+)\.parquet")
_UUID_CHECKPOINT = re.compile(rf"{_VERSION}\.checkpoint\.([^.]+)\.(json|parquet)")


class LogFileKind(enum.Enum):
    """What a file in ``_delta_log`` is."""

    COMMIT = "commit"
    CHECKPOINT = "checkpoint"
    MULTIPART_CHECKPOINT = "multipart_checkpoint"
    UUID_CHECKPOINT = "uuid_checkpoint"
    COMPACTION = "compaction"
    CHECKSUM = "checksum"


_CHECKPOINT_KINDS = frozenset(
    {LogFileKind.CHECKPOINT, LogFileKind.MULTIPART_CHECKPOINT, LogFileKind.UUID_CHECKPOINT}
)


@dataclass(frozen=True)
class LogFile:
    """One recognised file of the log, with the facts its listing entry gave."""

    path: str
    name: str
    kind: LogFileKind
    version: int
    size: int
    modification_time: int
    part: int | None = None
    num_parts: int | None = None
    start_version: int | None = None

    @property
    def is_checkpoint(self) -> bool:
        """True for classic, multi-part and UUID-named checkpoint files (not sidecars)."""
        return self.kind in _CHECKPOINT_KINDS


def base_name(path: str) -> str:
    """The text after the last ``/`` of ``path`` (the whole path when it has none)."""
    return path.rsplit("/", 1)[-1]


def _classify(name: str) -> tuple[LogFileKind, int, int | None, int | None, int | None] | None:
    """(kind, version, part, num_parts, start_version) for a base name, or None."""
    if match := _COMMIT.fullmatch(name):
        return LogFileKind.COMMIT, int(match[1]), None, None, None
    if match := _COMPACTION.fullmatch(name):
        start, end = int(match[1]), int(match[2])
        if start > end:
            return None
        return LogFileKind.COMPACTION, end, None, None, start
    if match := _CHECKSUM.fullmatch(name):
        return LogFileKind.CHECKSUM, int(match[1]), None, None, None
    if match := _CLASSIC_CHECKPOINT.fullmatch(name):
        return LogFileKind.CHECKPOINT, int(match[1]), None, None, None
    if match := _MULTIPART_CHECKPOINT.fullmatch(name):
        part, num_parts = int(match[2]), int(match[3])
        if not 1 <= part <= num_parts:
            return None
        return LogFileKind.MULTIPART_CHECKPOINT, int(match[1]), part, num_parts, None
    if match := _UUID_CHECKPOINT.fullmatch(name):
        return LogFileKind.UUID_CHECKPOINT, int(match[1]), None, None, None
    return None


#: Delta's versions are Java longs: twenty digits beyond this name no version.
MAX_VERSION = 2**63 - 1


def parse_log_file(path: str, size: int, modification_time: int) -> LogFile | None:
    """Recognise a listed file; ``None`` when it is not a log file kind we read.

    A multi-part name whose part number is outside ``1..num_parts`` is not a valid part, and a
    name whose version (or start version) is beyond :data:`MAX_VERSION` names no version: both
    yield ``None``, as a name without twenty digits does.
    """
    name = base_name(path)
    classified = _classify(name)
    if classified is None or max(classified[1], classified[4] or 0) > MAX_VERSION:
        return None
    kind, version, part, num_parts, start_version = classified
    return LogFile(
        path=path,
        name=name,
        kind=kind,
        version=version,
        size=size,
        modification_time=modification_time,
        part=part,
        num_parts=num_parts,
        start_version=start_version,
    )


def _check_version(version: int) -> None:
    if version < 0:
        raise ValueError(f"log versions are non-negative, got {version}")


def commit_name(version: int) -> str:
    """``<v:020d>.json``."""
    _check_version(version)
    return f"{version:020d}.json"


def checkpoint_name(version: int) -> str:
    """``<v:020d>.checkpoint.parquet`` (classic single-file checkpoint)."""
    _check_version(version)
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    """``<v:020d>.checkpoint.<part:010d>.<num_parts:010d>.parquet``; ``part`` is 1-based."""
    _check_version(version)
    if not 1 <= part <= num_parts:
        raise ValueError(f"checkpoint part {part} is outside 1..{num_parts}")
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def uuid_checkpoint_name(version: int, uuid: str, ext: str) -> str:
    """``<v:020d>.checkpoint.<uuid>.<ext>`` with ``ext`` ``json`` or ``parquet``."""
    _check_version(version)
    if ext not in ("json", "parquet"):
        raise ValueError(f"UUID-named checkpoints are json or parquet, not {ext!r}")
    if not uuid or "." in uuid or "/" in uuid:
        raise ValueError(f"invalid checkpoint uuid {uuid!r}")
    return f"{version:020d}.checkpoint.{uuid}.{ext}"


def checksum_name(version: int) -> str:
    """``<v:020d>.crc`` (version checksum file)."""
    _check_version(version)
    return f"{version:020d}.crc"


def compaction_name(start: int, end: int) -> str:
    """``<start:020d>.<end:020d>.compacted.json``; requires ``start < end``."""
    _check_version(start)
    if end <= start:
        raise ValueError(f"a compaction covers start < end, got {start}..{end}")
    return f"{start:020d}.{end:020d}.compacted.json"
