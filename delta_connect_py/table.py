"""A Delta table by path, the entry point of the public API.

Responsibility: :class:`DeltaTable` is the public facade: it builds a table from a user's path
(``for_path``) and offers what the library does with it (snapshots, history, checkpoints,
cleanup, the change data feed), each delegated to the feature module that does it. Reading the
log itself (listing, segments, timestamps) is :class:`~delta_connect_py.table_log.TableLog`'s.

Invariants: a DeltaTable holds no table state (every call lists the log afresh; snapshots the
session reuses are kept by ``snapshot_cache``, checked against that listing), so versions never
change in place; every snapshot is checked to be readable (``DELTA_UNSUPPORTED_FEATURES_FOR_READ``)
before it is returned. Nothing below this module imports it: the feature modules read a table
through ``TableLog``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from delta_connect_py import arguments, snapshot_cache
from delta_connect_py.cdf import CdfBatch, FileChanges, cdf_file_changes, load_cdf, stream_cdf
from delta_connect_py.checkpoints import (
    checkpoint_arguments,
    cleanup_metadata,
    create_checkpoint,
)
from delta_connect_py.history import history
from delta_connect_py.protocol.cdf import DeltaSourceOffset
from delta_connect_py.session import prepare_session
from delta_connect_py.snapshot import Snapshot
from delta_connect_py.spark_failures import public_calls_raise_delta_errors
from delta_connect_py.table_log import TableLog, qualify_table_path
from delta_connect_py.worker.stores import StorageOptions

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.checkpoints import CheckpointResult


@public_calls_raise_delta_errors
@dataclass(frozen=True)
class DeltaTable(TableLog):
    """A Delta table at ``table_root``; ask it for snapshots."""

    @classmethod
    def for_path(
        cls,
        spark: SparkSession,
        path: str | os.PathLike[str],
        storage_options: Mapping[str, str] | None = None,
        *,
        snapshot_cache: bool = True,
    ) -> DeltaTable:
        """The table at ``path``: any URI the server reads (file:, s3a:, abfss:, gs:) or a
        local path. Nothing is read yet.

        The server reads and lists the table through its own Hadoop file systems and
        credentials (``spark.hadoop.fs.*``). ``storage_options`` (delta-rs's names:
        ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``,
        ``AWS_ENDPOINT_URL``, ``AWS_ALLOW_HTTP``, ``AZURE_STORAGE_ACCOUNT_KEY``, ...; see
        ``worker.stores``) are for the few file operations Spark Connect cannot do, which the
        server's Python workers do with pyarrow: publishing a checkpoint
        (``create_checkpoint``), deleting expired files (``cleanup_metadata``) and reading the
        optional ``_last_checkpoint`` hint. Without them the workers use their own
        environment (instance roles, ``AWS_*`` variables). The values travel to the server
        inside the Spark plan: prefer short-lived credentials.

        Args:
            spark: a Spark Connect session (``delta_connect_py.connect()`` makes one).
            path: the table's root folder, a non-empty ``str`` or ``os.PathLike``.
            storage_options: credentials for the server's Python workers' own file operations.
            snapshot_cache: ``False`` builds every snapshot afresh, never answering from the
                session's snapshot cache (the README's "The snapshot cache").

        Returns:
            The table. The first call with a session reads the server's Spark version once
            (one request, no job); the workers' Python version is checked by the first job.

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT`` for a bad ``path`` (before the session
                is touched); ``DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION`` for a server this
                library cannot use (``DELTA_CONNECT_PYTHON_VERSION_MISMATCH`` comes from the
                first call that runs a job, ``snapshot()`` and the like).

        Example:
            >>> dt = DeltaTable.for_path(connect(), "s3a://bucket/events")
        """
        function = "DeltaTable.for_path"
        table_root = qualify_table_path(arguments.table_path(function, path))
        options = StorageOptions.of(arguments.mapping(function, "storage_options", storage_options))
        cached = arguments.flag(function, "snapshot_cache", snapshot_cache)
        prepare_session(arguments.session(function, spark))
        return cls(spark, table_root, options, snapshot_cache=cached)

    def __repr__(self) -> str:
        """The table's path, and the names (never the values) of its storage options."""
        options = ", ".join(name for name, _ in self.storage_options.items)
        return f"DeltaTable({self.table_root!r}" + (
            f", storage_options=[{options}])" if options else ")"
        )

    def snapshot(
        self,
        version: int | None = None,
        *,
        timestamp: datetime | str | None = None,
        snapshot_partitions: int | None = None,
    ) -> Snapshot:
        """The table at ``version``, at the version active at ``timestamp``, or the latest.

        Runs two small Spark jobs (the log listing and the protocol/metadata read); the
        file-level state is replayed on the server when first asked for (``Snapshot.state``,
        ``all_files()``, ``to_df()``).

        Args:
            version: a version number; None for the latest (or for ``timestamp``).
            timestamp: a ``datetime`` or a string Spark casts to a timestamp (as delta-spark
                reads ``timestampAsOf``; without a zone, in the session's time zone): the
                version active then (the latest commit at or before it). At most one of
                ``version`` and ``timestamp``.
            snapshot_partitions: how many partitions the replayed state has (default: chosen
                from the log's size).

        Returns:
            The :class:`~delta_connect_py.snapshot.Snapshot`, an immutable value.

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT`` (bad arguments, before any job);
                ``DELTA_MISSING_DELTA_TABLE`` (no ``_delta_log``); ``DELTA_VERSION_NOT_FOUND``
                or ``DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION`` (a version or time the log no
                longer reconstructs); ``DELTA_UNSUPPORTED_FEATURES_FOR_READ`` (a protocol this
                library cannot read); ``DELTA_CORRUPT_LOG_FILE`` (an unreadable log file).

        Example:
            >>> snap = dt.snapshot(timestamp="2024-01-01T00:00:00Z")
            >>> snap.version, snap.state.num_of_files
            (12, 40)
        """
        return snapshot_cache.cached_snapshot(
            self, version, timestamp=timestamp, snapshot_partitions=snapshot_partitions
        )

    def create_checkpoint(
        self, version: int | None = None, *, part_size: int | None = None
    ) -> CheckpointResult:
        """Write a checkpoint of ``version`` and update ``_last_checkpoint``.

        Runs Spark jobs that write into ``_delta_log`` from the server. The checkpoint is
        written to a staging folder and published only once its count of live files equals the
        snapshot's; a classic single file, ``part_size``-action parts, or a V2 checkpoint with
        sidecars where the table's protocol has the ``v2Checkpoint`` feature.

        Args:
            version: the version to checkpoint; None for the latest.
            part_size: at most this many actions per part (a multi-part checkpoint); None for
                one file.

        Returns:
            A :class:`~delta_connect_py.checkpoints.CheckpointResult`: the version, the files
            written, counts and sizes, and the ``_last_checkpoint`` text written.

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT`` (before any job);
                ``DELTA_CHECKPOINT_NON_EXIST_TABLE`` (a negative version);
                ``DELTA_VERSION_NOT_FOUND``; ``DELTA_UNSUPPORTED_FEATURES_FOR_WRITE``;
                ``DELTA_CONNECT_WORKER_FILE_ACCESS`` (the server's workers cannot write to the
                store; nothing written); ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` (nothing
                published).

        Example:
            >>> dt.create_checkpoint()
            CheckpointResult(version=12, parts=1, num_of_add_files=40, ...)
        """
        version, part_size = checkpoint_arguments(self, version, part_size)
        self.check_worker_file_access("create_checkpoint")
        return create_checkpoint(self, version, part_size=part_size)

    def cleanup_metadata(self, *, dry_run: bool = False) -> list[str]:
        """Delete expired log files, with delta-spark's retention rules.

        Commits and checkpoints older than ``delta.logRetentionDuration`` (30 days by default)
        that no retained version needs are deleted, with sidecars no checkpoint names and
        staging folders left by checkpoint writers that died. Where the latest checkpoint is
        UUID-named, the compatibility checkpoint delta-spark writes is written first.

        Args:
            dry_run: only list what would be deleted; write and delete nothing.

        Returns:
            The paths deleted (or, with ``dry_run``, to be deleted).

        Raises:
            DeltaError: ``DELTA_MISSING_DELTA_TABLE``; ``DELTA_CONNECT_WORKER_FILE_ACCESS`` (the
                server's workers cannot write to the store; nothing deleted).

        Example:
            >>> dt.cleanup_metadata(dry_run=True)
            ['file:/data/events/_delta_log/00000000000000000000.json', ...]
        """
        dry_run = arguments.flag("cleanup_metadata", "dry_run", dry_run)
        self.check_worker_file_access("cleanup_metadata")
        return cleanup_metadata(self, dry_run=dry_run)

    def history(self, limit: int | None = None) -> DataFrame:
        """The retained commits' ``commitInfo`` as a DataFrame, newest first.

        The columns are delta-spark's ``DESCRIBE HISTORY`` columns (``version``,
        ``timestamp``, ``operation``, ``operationParameters``, ...). ``timestamp`` is the
        in-commit timestamp where the table has them, else the commit file's time. The commits
        are read now, by one Spark job, and kept on the server.

        Args:
            limit: only the newest ``limit`` commits; None for all.

        Returns:
            A DataFrame with one row per commit.

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT``; ``DELTA_MISSING_DELTA_TABLE``;
                ``DELTA_CORRUPT_LOG_FILE`` (a ``commitInfo`` that is not valid JSON);
                a latest version this library cannot read, as for ``snapshot()``
                (``DELTA_UNSUPPORTED_FEATURES_FOR_READ``,
                ``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH``).

        Example:
            >>> dt.history(limit=5).select("version", "operation").show()
        """
        return history(self, limit=limit)

    def load_cdf(
        self,
        starting_version: int | None = None,
        ending_version: int | None = None,
        *,
        starting_timestamp: datetime | str | None = None,
        ending_timestamp: datetime | str | None = None,
        allow_out_of_range: bool = False,
    ) -> DataFrame:
        """The change data feed of versions ``start`` to ``end`` (inclusive), like delta-spark's
        ``readChangeFeed``.

        The table's columns plus ``_change_type`` (``insert``, ``delete``,
        ``update_preimage``, ``update_postimage``), ``_commit_version`` and
        ``_commit_timestamp``. Small Spark jobs run now (the listing, the start snapshot's
        protocol and metadata, one collect of the range's file actions); the rows are read when
        the DataFrame is.

        Args:
            starting_version: the first version; or ``starting_timestamp``: the first commit
                at or after it. One of the two is required.
            ending_version: the last version; or ``ending_timestamp``: the last commit at or
                before it. Neither: the latest version.
            allow_out_of_range: an empty DataFrame, instead of an error, when the start is
                after the latest version.

        Returns:
            The changed rows as a lazy DataFrame.

        Raises:
            DeltaError: ``DELTA_NO_START_FOR_CDC_READ``; ``DELTA_CDC_START_VERSION_AFTER_LATEST``
                or ``DELTA_TIMESTAMP_GREATER_THAN_COMMIT``; ``DELTA_INVALID_CDC_RANGE``;
                ``DELTA_MISSING_CHANGE_DATA`` (CDF not enabled at some version in range);
                ``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE`` (a schema change in range);
                ``DELTA_MISSING_FILES_UNEXPECTED_VERSION`` (a commit missing in range).

        Example:
            >>> dt.load_cdf(starting_version=3).groupBy("_change_type").count()
        """
        return load_cdf(
            self,
            starting_version,
            ending_version,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
            allow_out_of_range=arguments.flag("load_cdf", "allow_out_of_range", allow_out_of_range),
        )

    def cdf_file_changes(
        self,
        from_version: int,
        from_index: int = -1,
        is_starting_version: bool = False,
        *,
        max_files: int | None = None,
        max_bytes: int | None = None,
        end_offset: DeltaSourceOffset | str | None = None,
    ) -> FileChanges:
        """The data files a change data feed stream reads after an offset, like delta-spark's
        ``getFileChangesForCDC`` (the building block of :meth:`stream_cdf`).

        Args:
            from_version: the version of the offset to start after.
            from_index: the offset's index within that version (-1: before its first file).
            is_starting_version: start with the snapshot at ``from_version`` as inserts.
            max_files: admit at most this many files; ``max_bytes``: at most about this many
                bytes (None for both: no limit).
            end_offset: stop at this offset (a yielded offset or its JSON).

        Returns:
            :class:`~delta_connect_py.cdf.FileChanges`: the indexed files, stopping before the
            first commit that changes the schema (a barrier), with the metadata they are read
            with and their commit timestamps.

        Raises:
            DeltaError: as :meth:`load_cdf`, for the versions reached.

        Example:
            >>> changes = dt.cdf_file_changes(0, is_starting_version=True, max_files=100)
            >>> len(changes)
            100
        """
        function = "cdf_file_changes"
        return cdf_file_changes(
            self,
            arguments.integer(function, "from_version", from_version, minimum=0, what="a version"),
            # Any int: delta-spark's offsets use sentinel indexes (BASE_INDEX is -100).
            arguments.integer(function, "from_index", from_index, minimum=None, what="an index"),
            arguments.flag(function, "is_starting_version", is_starting_version),
            max_files=arguments.optional_integer(
                function, "max_files", max_files, minimum=1, what="files to admit"
            ),
            max_bytes=max_bytes,
            end_offset=end_offset,
        )

    def stream_cdf(
        self,
        starting_version: int | None = None,
        *,
        offset: DeltaSourceOffset | str | None = None,
        max_files_per_trigger: int | None = 1000,
        max_bytes_per_trigger: int | str | None = None,
        poll_seconds: float = 1.0,
        stop_when_caught_up: bool = False,
    ) -> Iterator[CdfBatch]:
        """Micro-batches of the change data feed, each with the offset to resume after, like a
        ``readStream`` CDF source.

        Without ``offset`` or ``starting_version`` the stream starts with the latest snapshot's
        rows as inserts, then follows new commits. A batch ends before a commit that changes the
        schema, partitioning or ``delta.*`` configuration; later batches have the new schema.
        Arguments are checked now; Spark jobs run as batches are taken.

        Args:
            starting_version: start with the changes of this version.
            offset: resume strictly after this offset (a yielded one, or its ``to_json()``).
            max_files_per_trigger: at most this many data files per batch (None: no limit).
            max_bytes_per_trigger: at most about this many bytes per batch (an int, or a size
                such as ``"512m"``).
            poll_seconds: how long to wait for new commits when caught up.
            stop_when_caught_up: end the iteration when caught up instead of polling.

        Returns:
            An iterator of :data:`~delta_connect_py.cdf.CdfBatch`: ``(offset, rows)``.

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT`` (at the call);
                ``DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE`` (an offset of another table);
                and as :meth:`load_cdf`, as batches are taken.

        Example:
            >>> for offset, rows in dt.stream_cdf(stop_when_caught_up=True):
            ...     rows.write.parquet(f"/out/{offset.reservoir_version}")
            ...     saved = offset.to_json()
        """
        return stream_cdf(
            self,
            starting_version,
            offset=offset,
            max_files_per_trigger=max_files_per_trigger,
            max_bytes_per_trigger=max_bytes_per_trigger,
            poll_seconds=poll_seconds,
            stop_when_caught_up=arguments.flag(
                "stream_cdf", "stop_when_caught_up", stop_when_caught_up
            ),
        )
