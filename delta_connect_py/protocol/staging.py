"""Rules for the staging folders checkpoint writers publish from (pure, no I/O).

Responsibility: a staging folder's name (``_delta_connect_staging.<created ms>.<token>``, the
creation time by the writer's clock), whether a folder belongs to a writer that died long ago
(:func:`staging_is_stale`), and whether a staged file can be published by one rename on its file
system (:func:`single_copy_refusal`: an S3 rename is one CopyObject, at most 5 GiB).

Invariants: a folder named with its creation time is stale exactly when it was created before
the cutoff, whatever its files' modification times (S3 prefixes have none); a folder named the
older way (``_delta_connect_staging.<token>``) is stale when the newest modification time found
in it is before the cutoff, and never when none is known (``None`` or 0). Every name starts
with ``_``, so Delta readers (delta-spark, delta-rs, this library) never list it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

STAGING_PREFIX = "_delta_connect_staging."
#: A staging folder created (or, for older names, last written) this long ago belongs to a
#: dead writer: no live checkpoint write takes a day.
STALE_STAGING_MS = 86_400_000
#: The largest object S3's CopyObject copies in one request (5 GiB); pyarrow's S3 ``move`` is
#: one CopyObject and a delete.
S3_SINGLE_COPY_BYTES = 5 << 30
_S3_SCHEMES = ("s3://", "s3a://", "s3n://")


def staging_folder_name(created_ms: int, token: str) -> str:
    """The name of a staging folder created at ``created_ms`` (ms since the epoch)."""
    if created_ms < 0 or not token or "." in token:
        raise ValueError(f"bad staging folder name parts: {created_ms!r}, {token!r}")
    return f"{STAGING_PREFIX}{created_ms}.{token}"


def staging_created_ms(name: str) -> int | None:
    """The creation time a staging folder's name holds; None for a name without one."""
    if not name.startswith(STAGING_PREFIX):
        return None
    created, dot, token = name[len(STAGING_PREFIX) :].partition(".")
    if not dot or not token or not created.isdigit():
        return None
    return int(created)


def staging_is_stale(name: str, before_ms: int, newest_mtime_ms: Callable[[], int | None]) -> bool:
    """Whether the staging folder ``name`` was left by a writer that died before ``before_ms``.

    ``newest_mtime_ms`` (called only for a name without a creation time) gives the newest
    modification time known in the folder, None or 0 when the file system reports none.
    """
    created = staging_created_ms(name)
    if created is not None:
        return created < before_ms
    newest = newest_mtime_ms()
    return bool(newest) and newest is not None and newest < before_ms


def newest_known_mtime(mtimes_ms: Iterable[int | None]) -> int | None:
    """The newest of the known modification times (None and 0 are unknown); None if none."""
    known = [mtime for mtime in mtimes_ms if mtime]
    return max(known) if known else None


def single_copy_limit(uri: str) -> int | None:
    """The largest file one rename can move on ``uri``'s file system; None: no limit."""
    return S3_SINGLE_COPY_BYTES if uri.lower().startswith(_S3_SCHEMES) else None


def single_copy_refusal(uri: str, sizes: Iterable[int]) -> str | None:
    """Why files of these ``sizes`` cannot be published by rename on ``uri``'s file system
    (None: they can): on S3 a rename is one CopyObject, at most 5 GiB per file."""
    limit = single_copy_limit(uri)
    if limit is None:
        return None
    largest = max(sizes, default=0)
    if largest <= limit:
        return None
    return (
        f"a checkpoint file of {largest} bytes cannot be published on S3, where a rename is one "
        f"copy of at most {limit} bytes (5 GiB); pass part_size to split the checkpoint into "
        f"smaller parts, or sidecars for a V2 table (nothing was published)."
    )
