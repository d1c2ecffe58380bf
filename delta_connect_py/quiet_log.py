"""Telling, with no Spark job, that a table's log is still as a listing saw it.

Responsibility: :class:`LogMark`, what a listing saw of how recent a log is (the newest
modification time among its log files, which files have it, and the server's clock when the
listing ran), and :func:`unchanged_since`, two ``AnalyzePlan`` requests sent at once and no
Spark job that tell whether any log file was modified after a quiet mark's newest files and
whether those are still there (the driver lists ``_delta_log`` while analysing a ``binaryFile``
read, see ``plans.listing.log_file_names_modified_after``). The caches of snapshots and of
history answer from a mark that is unchanged.

Invariants:

- Only a quiet mark is checked this way: one whose listing ran at least ``QUIET_LOG_MARGIN_MS``
  after its newest file was modified, so that a file written after the listing is sure to carry
  a later time (the margin covers stores whose times have whole seconds, S3's, and the driver's
  clock against the store's). A mark that is not quiet is never "unchanged": the caller lists.
- A commit, a checkpoint, a rewritten file or a table deleted and recreated at the same path
  writes newer files, and is seen. The second request asks for the mark's newest files
  themselves (from a millisecond before their time): a log replaced by a copy that keeps older
  times (a backup restored with ``cp -a`` or ``rsync -a``) has lost them, and is seen too. A
  deleted older file is not (a cleanup leaves the latest state as it was); a deleted
  ``_delta_log`` counts as changed. A file copied in beside the newest ones with an older time
  is not seen until the log is listed again.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from delta_connect_py.plans.listing import log_file_names_modified_after
from delta_connect_py.protocol.filenames import parse_log_file

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from delta_connect_py.plans.listing import LogListing

#: Sends one of ``unchanged_since``'s two requests while the caller's thread sends the other.
_LOOKS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="delta-connect-quiet-log")

#: How long after the newest log file's modification a listing must have run for a later look
#: for newer files alone to tell that nothing changed.
QUIET_LOG_MARGIN_MS = 5000


@dataclass(frozen=True)
class LogMark:
    """The newest modification time among a listing's log files (0: none), the server's clock
    when that listing ran (None: unknown), and the names of the log files of that newest time."""

    newest_modification_ms: int
    listed_at_ms: int | None
    newest_names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, listing: LogListing) -> LogMark:
        newest = listing.newest_modification_ms
        names = frozenset(f.name for f in listing.files if f.modification_time == newest)
        return cls(newest, listing.listed_at_ms, names)

    @property
    def quiet(self) -> bool:
        """Whether a file written after the listing is sure to be newer than every file listed."""
        return (
            self.listed_at_ms is not None
            and self.listed_at_ms - self.newest_modification_ms >= QUIET_LOG_MARGIN_MS
        )


def unchanged_since(spark: SparkSession, log_dir: str, mark: LogMark) -> bool:
    """Whether ``log_dir`` has no log file modified after ``mark``'s newest, and still has the
    mark's newest files with their time (two requests, no job); False without asking when
    ``mark`` is not quiet."""
    if not mark.quiet:
        return False
    newest = mark.newest_modification_ms
    # Both requests at once: each is a round trip and a listing on the driver, and the answer
    # of an unchanged log is what a notebook waits for most often.
    newer_look = _LOOKS.submit(_log_file_names_modified_after, spark, log_dir, newest)
    still = _log_file_names_modified_after(spark, log_dir, newest - 1)
    newer = newer_look.result()
    # No log file newer: those from a millisecond before on have the newest time exactly.
    return newer == set() and still == set(mark.newest_names)


def _log_file_names_modified_after(
    spark: SparkSession, log_dir: str, after_ms: int
) -> set[str] | None:
    names = log_file_names_modified_after(spark, log_dir, after_ms)
    if names is None:
        return None
    return {name for name in names if parse_log_file(name, 0, 0) is not None}
