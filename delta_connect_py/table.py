"""A Delta table by path, the entry point of the public API.

Responsibility: :class:`DeltaTable` is the public facade: it builds a table from a user's path
(``for_path``) and offers what the library does with it (snapshots, history, checkpoints,
cleanup, the change data feed), each delegated to the feature module that does it. Reading the
log itself (listing, segments, timestamps) is :class:`~delta_connect_py.table_log.TableLog`'s.

Invariants: a DeltaTable holds no table state (every call lists the log afresh), so versions never
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

from delta_connect_py import arguments
from delta_connect_py.cdf import cdf_file_changes, load_cdf, stream_cdf
from delta_connect_py.checkpoints import (
    checkpoint_arguments,
    cleanup_metadata,
    create_checkpoint,
)
from delta_connect_py.history import history
from delta_connect_py.session import prepare_session
from delta_connect_py.snapshot import Snapshot, snapshot_of
from delta_connect_py.table_log import TableLog, qualify_table_path
from delta_connect_py.worker.stores import StorageOptions

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.checkpoints import CheckpointResult


@dataclass(frozen=True)
class DeltaTable(TableLog):
    """A Delta table at ``table_root``; ask it for snapshots."""

    @classmethod
    def for_path(
        cls,
        spark: SparkSession,
        path: str | os.PathLike[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        """The table at ``path``: any URI the server reads (file:, s3a:, abfss:, gs:) or a
        local path.

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

        ``path`` must be a non-empty ``str`` or ``os.PathLike`` (``DELTA_CONNECT_INVALID_ARGUMENT``
        otherwise, before the session is touched).
        """
        table_root = qualify_table_path(arguments.table_path("DeltaTable.for_path", path))
        options = StorageOptions.of(storage_options)
        prepare_session(spark)
        return cls(spark, table_root, options)

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

        Runs two small Spark jobs (the log listing and the protocol/metadata fast path); the
        file-level state is replayed lazily on first use. ``version`` is an int, ``timestamp``
        a datetime (naive is UTC) or an ISO string; at most one of them
        (``DELTA_CONNECT_INVALID_ARGUMENT`` otherwise, before any job).
        """
        return snapshot_of(
            self, version, timestamp=timestamp, snapshot_partitions=snapshot_partitions
        )

    def create_checkpoint(
        self, version: int | None = None, *, part_size: int | None = None
    ) -> CheckpointResult:
        """Write a checkpoint of ``version`` (default: latest) and ``_last_checkpoint``.

        Runs Spark jobs that write on the server; see ``delta_connect_py.checkpoints``.
        """
        version, part_size = checkpoint_arguments(self, version, part_size)
        self.check_worker_file_access("create_checkpoint")
        return create_checkpoint(self, version, part_size=part_size)

    def cleanup_metadata(self, *, dry_run: bool = False) -> list[str]:
        """Delete expired log files with delta-spark's semantics; returns the paths deleted.

        See ``delta_connect_py.checkpoints``.
        """
        self.check_worker_file_access("cleanup_metadata")
        return cleanup_metadata(self, dry_run=dry_run)

    def history(self, limit: int | None = None) -> DataFrame:
        """commitInfo of every retained commit as a DataFrame, newest first.

        See ``delta_connect_py.history``.
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
        """The change data feed between two versions: table columns plus ``_change_type``,
        ``_commit_version`` and ``_commit_timestamp``. See ``delta_connect_py.cdf``.
        """
        return load_cdf(
            self,
            starting_version,
            ending_version,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
            allow_out_of_range=allow_out_of_range,
        )

    def cdf_file_changes(
        self,
        from_version: int,
        from_index: int = -1,
        is_starting_version: bool = False,
        *,
        max_files: int | None = None,
        max_bytes: int | None = None,
        end_offset: Any = None,
    ) -> Any:
        """delta-spark's ``getFileChangesForCDC``. See ``delta_connect_py.cdf``."""
        return cdf_file_changes(
            self,
            from_version,
            from_index,
            is_starting_version,
            max_files=max_files,
            max_bytes=max_bytes,
            end_offset=end_offset,
        )

    def stream_cdf(
        self,
        starting_version: int | None = None,
        *,
        offset: Any = None,
        max_files_per_trigger: int | None = 1000,
        max_bytes_per_trigger: int | str | None = None,
        poll_seconds: float = 1.0,
        stop_when_caught_up: bool = False,
    ) -> Iterator[tuple[Any, DataFrame]]:
        """Micro-batches of the change data feed with resumable offsets.

        See ``delta_connect_py.cdf``.
        """
        return stream_cdf(
            self,
            starting_version,
            offset=offset,
            max_files_per_trigger=max_files_per_trigger,
            max_bytes_per_trigger=max_bytes_per_trigger,
            poll_seconds=poll_seconds,
            stop_when_caught_up=stop_when_caught_up,
        )
