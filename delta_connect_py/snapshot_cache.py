"""Snapshots kept per Spark Connect session and table, checked against the log on every call.

Responsibility: ``DeltaTable.snapshot()`` asks this module for its snapshot. The latest snapshot
of a table whose log is unchanged since the listing that last confirmed the cached snapshot, as
told with no Spark job (``quiet_log``), is that snapshot. Otherwise the log is listed (one job:
every log file's name, size and modification time). The latest snapshot of a table
whose listed segment (checkpoint and commit files, with their sizes and modification times) is
the one a cached snapshot was built from is that cached snapshot, whose state, protocol and
metadata are then known without a job. A log that has only grown by commits since is answered
by extending the cached snapshot's server-side state with the new commits
(``Snapshot.extended_to``, as ``update()`` does). A time-travel snapshot (a version, or the
version active at a timestamp) is cached by version and reused while that version's segment is
listed unchanged. Anything else is built afresh, exactly as without the cache.

Invariants:

- Nothing is trusted without a look at the log: a hit requires the same files (names, sizes,
  modification times) as when the entry was built, so a commit, a new checkpoint, a cleanup or a
  table deleted and recreated at the same path (its commit files written anew) makes a miss. The
  check without a job (``quiet_log``) sees every file written or rewritten since the listing,
  not a deletion: a cleanup leaves the latest state as it was. An
  extension requires the cached segment's newest file to be listed unchanged (the same lineage)
  and the new commits to follow it without a newer checkpoint. ``_last_checkpoint`` is only a
  hint: the segment chosen from the files is compared, not the hint. A version that the log can
  no longer reconstruct fails as it does without the cache, as the segment is built first.
- Entries are keyed by the Connect session (its client session id and the server-side session id
  the listing just observed), the table root, the storage options, the version (None: latest)
  and ``snapshot_partitions``: sessions never share an entry, and a server restarted under the
  same client session (a new server-side session id) never sees an entry of the old one. Entries
  of a stopped session are dropped on the next call.
- The cache holds at most ``max_entries`` snapshots and an estimate of ``max_bytes`` of
  server-side state, least recently used first out; an evicted or replaced entry releases its
  server-side state (``Snapshot.unpersist``) unless a newer entry is built on it.
- Turned off (``DELTA_CONNECT_SNAPSHOT_CACHE=0``, or ``DeltaTable.for_path(...,
  snapshot_cache=False)``), every call builds afresh and nothing is kept.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from delta_connect_py.connections import session_key
from delta_connect_py.protocol.segment import LogSegment
from delta_connect_py.quiet_log import LogMark, unchanged_since
from delta_connect_py.snapshot import (
    Snapshot,
    build_snapshot,
    check_snapshot_arguments,
    snapshot_target,
)

if TYPE_CHECKING:
    from datetime import datetime

    from pyspark.sql import SparkSession

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.protocol.filenames import LogFile
    from delta_connect_py.table_log import TableLog
    from delta_connect_py.worker.stores import StorageOptions

log = logging.getLogger(__name__)

ENABLED_ENV = "DELTA_CONNECT_SNAPSHOT_CACHE"
MAX_ENTRIES_ENV = "DELTA_CONNECT_SNAPSHOT_CACHE_ENTRIES"
MAX_BYTES_ENV = "DELTA_CONNECT_SNAPSHOT_CACHE_BYTES"
DEFAULT_MAX_ENTRIES = 32
DEFAULT_MAX_BYTES = 1 << 30
#: What an entry costs the server beyond its replayed rows (plans, small relations).
ENTRY_OVERHEAD_BYTES = 4096
#: Per live file, the file-name hash indexes an update's state keeps on the server.
BYTES_PER_FILE = 16
_OFF = {"0", "false", "off", "no"}

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruPolicy(Generic[K, V]):
    """Least recently used entries out first, bounded by count and by estimated bytes.

    ``size_of`` is asked again whenever bounds are enforced (an entry's state may have grown on
    the server since it was put); ``release`` is called once for every value that leaves other
    than by ``pop``. A value larger than ``max_bytes`` alone is not kept (nor released).
    """

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        size_of: Callable[[V], int],
        release: Callable[[V], None],
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._release = release
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[K]:
        """Keys, least recently used first."""
        return list(self._entries)

    def get(self, key: K) -> V | None:
        """The value of ``key``, now the most recently used; None when absent."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The value of ``key`` without touching its recency."""
        return self._entries.get(key)

    def put(self, key: K, value: V, keep: Callable[[V, V], bool] | None = None) -> None:
        """Store ``value`` as the most recently used; a value it replaces is released unless
        ``keep(old, new)``; then enforce the bounds."""
        old = self._entries.pop(key, None)
        if old is not None and old is not value and not (keep and keep(old, value)):
            self._release(old)
        if self._size_of(value) > self.max_bytes:
            return  # never kept, so not released: its holder still uses it
        self._entries[key] = value
        self.enforce()

    def pop(self, key: K) -> V | None:
        """Remove ``key`` without releasing its value."""
        return self._entries.pop(key, None)

    def discard(self, key: K) -> None:
        """Remove ``key`` and release its value."""
        value = self._entries.pop(key, None)
        if value is not None:
            self._release(value)

    def enforce(self) -> None:
        """Evict least recently used entries until both bounds hold."""
        while len(self._entries) > max(self.max_entries, 0):
            self.discard(next(iter(self._entries)))
        sizes = {key: self._size_of(value) for key, value in self._entries.items()}
        total = sum(sizes.values())
        for key in list(self._entries):
            if total <= self.max_bytes:
                break
            total -= sizes[key]
            self.discard(key)

    def total_bytes(self) -> int:
        return sum(self._size_of(value) for value in self._entries.values())

    def clear(self) -> None:
        for key in list(self._entries):
            self.discard(key)


@dataclass(frozen=True)
class CacheKey:
    session_id: str
    server_session_id: str | None
    table_root: str
    storage_options: StorageOptions
    #: None: the latest version.
    version: int | None
    snapshot_partitions: int | None


@dataclass(frozen=True)
class Entry:
    snapshot: Snapshot
    #: The segment chosen from the listing (before any retry on an earlier checkpoint): what a
    #: later listing must choose again for a hit.
    listed: LogSegment
    #: What the listing that last confirmed the entry saw of the log's recency.
    mark: LogMark


def estimated_server_bytes(entry: Entry) -> int:
    """What ``entry`` holds on the server, estimated: its replayed commit rows (about the commit
    bytes read, the checkpoint's rows are read from the parquet again) plus, once its state is
    known, the file-name indexes an update keeps per live file."""
    snapshot = entry.snapshot
    # The replay's bytes are known once the state is on the server (``Snapshot._reconstructed``);
    # before, the protocol-and-metadata read may hold the segment's commit lines.
    reconstructed = snapshot.__dict__.get("_reconstructed")
    replayed = (
        reconstructed.replayed_bytes
        if reconstructed is not None
        else sum(commit.size for commit in snapshot.segment.commits)
    )
    files = snapshot.state.num_of_files if snapshot.state_known else 0
    return ENTRY_OVERHEAD_BYTES + replayed + BYTES_PER_FILE * files


def _release(entry: Entry) -> None:
    entry.snapshot.unpersist()


def _keeps_state(old: Entry, new: Entry) -> bool:
    """Whether ``new`` holds or extends ``old``'s server-side state (then it must stay)."""
    return new.snapshot is old.snapshot or new.snapshot.previous is old.snapshot


def _env_int(name: str, default: int) -> int:
    """A bound from the environment; an unusable value is warned about (importing the package
    must not fail over a cache setting) and the default used."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return max(int(value), 0)
    except ValueError:
        log.warning("%s=%r is not a whole number; using %d", name, value, default)
        return default


def enabled_by_environment() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in _OFF


def caches(table: TableLog) -> bool:
    """Whether what is read of ``table`` may be kept and answered again: this cache, and the
    other per-table caches that follow its switches (``snapshot_cache=False``, the
    environment)."""
    return table.snapshot_cache and enabled_by_environment()


_lock = threading.RLock()
_cache: LruPolicy[CacheKey, Entry] = LruPolicy(
    _env_int(MAX_ENTRIES_ENV, DEFAULT_MAX_ENTRIES),
    _env_int(MAX_BYTES_ENV, DEFAULT_MAX_BYTES),
    estimated_server_bytes,
    _release,
)
#: The sessions whose entries the cache holds, to drop them once stopped.
_sessions: dict[str, SparkSession] = {}


def configure(max_entries: int | None = None, max_bytes: int | None = None) -> None:
    """Change the bounds (evicting at once what no longer fits)."""
    with _lock:
        if max_entries is not None:
            _cache.max_entries = max_entries
        if max_bytes is not None:
            _cache.max_bytes = max_bytes
        _cache.enforce()


def clear() -> None:
    """Drop every entry, releasing its server-side state."""
    with _lock:
        _cache.clear()
        _sessions.clear()


def cached_keys() -> list[CacheKey]:
    """The keys held, least recently used first (for tests and diagnostics)."""
    with _lock:
        return _cache.keys()


def cached_bytes() -> int:
    """The estimated server-side bytes held."""
    with _lock:
        return _cache.total_bytes()


def cached_snapshot(
    table: TableLog,
    version: int | None = None,
    *,
    timestamp: datetime | str | None = None,
    snapshot_partitions: int | None = None,
) -> Snapshot:
    """``DeltaTable.snapshot``: the arguments checked; the latest snapshot of a quiet log from
    the cache when no log file is newer (:func:`_unchanged_latest`); else the log listed
    (``snapshot_target``) and the snapshot answered through the cache (:func:`snapshot_for`)."""
    version, timestamp = check_snapshot_arguments(version, timestamp, snapshot_partitions)
    if version is None and timestamp is None:
        unchanged = _unchanged_latest(table, snapshot_partitions)
        if unchanged is not None:
            return unchanged
    known = _cached_latest_version(table, snapshot_partitions)
    listing, version = snapshot_target(table, version, timestamp, snapshot_partitions, known)
    return snapshot_for(table, listing, version, snapshot_partitions)


def _cached_latest_version(table: TableLog, snapshot_partitions: int | None) -> int:
    """The version of the cached latest snapshot a new one may extend (its state kept); -1
    when none."""
    if not caches(table):
        return -1
    with _lock:
        entry = _cache.peek(_key(table, None, snapshot_partitions))
    return -1 if entry is None or not entry.snapshot.state_kept else entry.snapshot.version


def _unchanged_latest(table: TableLog, snapshot_partitions: int | None) -> Snapshot | None:
    """The cached latest snapshot when its log is quiet, no log file was modified after the
    newest ones it listed and those are still there (``quiet_log.unchanged_since``: two
    requests, no job); None when that cannot be told this way."""
    if not caches(table):
        return None
    key = _key(table, None, snapshot_partitions)
    with _lock:
        _drop_stopped_sessions()
        entry = _cache.peek(key)
    if entry is None or not unchanged_since(table.spark, table.log_dir, entry.mark):
        return None
    with _lock:
        if _cache.get(key) is not entry:  # replaced or evicted meanwhile
            return None
    return entry.snapshot


def snapshot_for(
    table: TableLog,
    listing: LogListing,
    version: int | None,
    snapshot_partitions: int | None,
) -> Snapshot:
    """``table``'s snapshot at ``version`` (None: the latest) for the log as ``listing`` shows
    it: cached, extended from a cached one, or built afresh (``snapshot.build_snapshot``)."""
    segment = table.log_segment(version, listing)
    if not caches(table):
        return build_snapshot(table, segment, listing, snapshot_partitions)
    key = _key(table, version, snapshot_partitions)
    with _lock:
        _drop_stopped_sessions()
        _sessions[key.session_id] = table.spark
        cached = _cache.get(key)
        latest = _cache.peek(_latest_key(key)) if version is not None else None
    if cached is not None and _same_files(cached.listed, segment):
        snapshot = cached.snapshot  # confirmed by this listing: kept with its facts
    elif latest is not None and _same_files(latest.listed, segment):
        return latest.snapshot
    else:
        extendable = cached if version is None else None
        snapshot = _extended_or_built(table, extendable, segment, listing, snapshot_partitions)
    with _lock:
        _cache.put(key, Entry(snapshot, segment, LogMark.of(listing)), keep=_keeps_state)
    return snapshot


def _extended_or_built(
    table: TableLog,
    cached: Entry | None,
    segment: LogSegment,
    listing: LogListing,
    snapshot_partitions: int | None,
) -> Snapshot:
    """``cached``'s snapshot extended to ``segment`` when the log only grew by commits since
    (the same lineage), else ``segment``'s snapshot built afresh."""
    if cached is not None and _same_lineage(cached.listed, listing):
        extended = cached.snapshot.extended_to(segment, listing.pm_lines)
        if extended is not None:
            return extended
    return build_snapshot(table, segment, listing, snapshot_partitions)


def table_key(table: TableLog) -> CacheKey:
    """The key of ``table``'s latest snapshot: also what other per-table caches of the session
    key by (the session, the server-side session, the table and its storage options)."""
    return _key(table, None, None)


def _key(table: TableLog, version: int | None, snapshot_partitions: int | None) -> CacheKey:
    client = getattr(table.spark, "client", None)
    return CacheKey(
        session_id=session_key(table.spark),
        # Observed by the listing just run: a server restarted behind this client session
        # answers with another one.
        server_session_id=getattr(client, "_server_session_id", None),
        table_root=table.table_root,
        storage_options=table.storage_options,
        version=version,
        snapshot_partitions=snapshot_partitions,
    )


def _latest_key(key: CacheKey) -> CacheKey:
    return CacheKey(
        key.session_id,
        key.server_session_id,
        key.table_root,
        key.storage_options,
        None,
        key.snapshot_partitions,
    )


def _drop_stopped_sessions() -> None:
    stopped = {sid for sid, spark in _sessions.items() if getattr(spark, "is_stopped", False)}
    if not stopped:
        return
    for key in list(_cache.keys()):
        if key.session_id in stopped:
            _cache.discard(key)
    for sid in stopped:
        del _sessions[sid]


def _same_files(cached: LogSegment, listed: LogSegment) -> bool:
    """Whether ``listed`` reconstructs the version ``cached`` did from the very same files."""
    return (
        cached.version == listed.version
        and cached.checkpoint == listed.checkpoint
        and cached.commits == listed.commits
    )


def _newest_files(segment: LogSegment) -> tuple[LogFile, ...]:
    if segment.commits:
        return (segment.commits[-1],)
    assert segment.checkpoint is not None
    return segment.checkpoint.files


def _same_lineage(cached: LogSegment, listing: LogListing) -> bool:
    """Whether the log still holds the cached segment's newest file(s) unchanged (same name,
    size and modification time): a table recreated at the same path has written them anew."""
    listed = set(listing.files)
    return all(file in listed for file in _newest_files(cached))
