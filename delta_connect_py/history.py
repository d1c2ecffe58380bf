"""A table's commit history as a DataFrame, like delta-spark's ``DESCRIBE HISTORY``.

Responsibility: :func:`history` (``DeltaTable.history``): one row per retained commit, newest
first, with delta-spark's history columns (:data:`HISTORY_COLUMNS`), read from the commits'
``commitInfo`` actions on the server and kept there, read once, like delta-spark's eager
``getHistory``. A few small commits are read by Spark's JSON source; others of a local log by
Python workers, many files per task and only the lines naming ``commitInfo`` (Spark's file
sources pay a setup per file).

Invariants: ``timestamp`` is delta-spark's commit timestamp: the commit's ``inCommitTimestamp``
for versions at or after the in-commit-timestamp enablement version (when the latest metadata
enables it), else the commit file's modification time monotonized over the listed range (each
time at least one millisecond after the previous commit's), as ``getHistory`` does; with
``limit`` only the newest ``limit`` commits are listed, read and monotonized. A commit without
``commitInfo`` still has a row (version and timestamp, other columns null). Non-string values
in ``operationParameters`` / ``operationMetrics`` are kept as their JSON text. Any line read
that is not a valid action (``plans.action_lines``; the commitInfo line and, where Spark reads
whole files, every other line) raises ``DELTA_CORRUPT_LOG_FILE`` naming the commit file, before
any row is returned, as the state's reads do.

A session keeps the histories it read (per table and ``limit``, the newest
``MAX_KEPT_HISTORIES``) with what their listing saw of the log (``quiet_log.LogMark``): a log
unchanged since, as told with no Spark job, gets the same result again. The snapshot cache's
switches turn this off too (``DELTA_CONNECT_SNAPSHOT_CACHE=0``, ``snapshot_cache=False``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import (
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from delta_connect_py import arguments, snapshot_cache
from delta_connect_py.plans.loading import commit_actions, malformed_commits_reported
from delta_connect_py.plans.replay import BYTES_PER_PARTITION
from delta_connect_py.plans.spark import materialize
from delta_connect_py.protocol.actions import VERSION_COLUMN
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.timestamps import ict_start, monotonize
from delta_connect_py.quiet_log import LogMark, unchanged_since
from delta_connect_py.snapshot import check_snapshot_readable
from delta_connect_py.snapshot_cache import CacheKey, LruPolicy
from delta_connect_py.worker.log_files import CommitLinesRead

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.table_log import TableLog

_STRING_MAP = MapType(StringType(), StringType())
_JOB = StructType(
    [
        StructField(name, StringType())
        for name in ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType")
    ]
)
_NOTEBOOK = StructType([StructField("notebookId", StringType())])

#: delta-spark's DESCRIBE HISTORY columns after ``version`` and ``timestamp``.
COMMIT_INFO_FIELDS = StructType(
    [
        StructField("userId", StringType()),
        StructField("userName", StringType()),
        StructField("operation", StringType()),
        StructField("operationParameters", _STRING_MAP),
        StructField("job", _JOB),
        StructField("notebook", _NOTEBOOK),
        StructField("clusterId", StringType()),
        StructField("readVersion", LongType()),
        StructField("isolationLevel", StringType()),
        StructField("isBlindAppend", BooleanType()),
        StructField("operationMetrics", _STRING_MAP),
        StructField("userMetadata", StringType()),
        StructField("engineInfo", StringType()),
    ]
)
HISTORY_COLUMNS = ("version", "timestamp", *COMMIT_INFO_FIELDS.fieldNames())
_READ_SCHEMA = StructType(
    [
        StructField(
            "commitInfo",
            StructType([*COMMIT_INFO_FIELDS.fields, StructField("inCommitTimestamp", LongType())]),
        )
    ]
)
#: Every line holding a commitInfo action contains this (a superset: the parse decides).
_COMMIT_INFO_KEY = '"commitInfo"'
_COMMIT_NAME = re.compile(r"^\d+\.json$")


def _commits_in_range(
    table: TableLog, listing: LogListing, limit: int | None
) -> tuple[list[LogFile], int]:
    latest = table.log_segment(None, listing)
    commits = sorted(
        (
            f
            for f in listing.files
            if f.kind is LogFileKind.COMMIT
            and f.version <= latest.version
            and _COMMIT_NAME.match(f.name)
        ),
        key=lambda f: f.version,
    )
    if limit is not None:
        commits = commits[-limit:] if limit > 0 else []
    _, pm = table.loaded_segment(latest, listing, state_follows=False)
    # delta-spark's DESCRIBE HISTORY loads the latest snapshot first, which refuses a table
    # it cannot read; the same refusal here, from the P&M the ICT settings need anyway.
    check_snapshot_readable(table, pm, latest.version)
    return commits, _first_ict_version(pm.metadata.configuration)


def _first_ict_version(configuration: Mapping[str, str]) -> int:
    """The first version whose timestamp is its ``inCommitTimestamp`` (huge when disabled)."""
    start = ict_start(configuration)
    return 2**62 if start is None else start.version


def _timestamp(first_ict: int) -> Column:
    file_time = F.col("_file_time")
    ict = F.col("commitInfo.inCommitTimestamp")
    millis = F.when((F.col("version") >= F.lit(first_ict)) & ict.isNotNull(), ict).otherwise(
        file_time
    )
    return F.timestamp_millis(millis).alias("timestamp")


def history(table: TableLog, limit: int | None = None) -> DataFrame:
    """commitInfo of the retained commits (the newest ``limit`` of them), newest first."""
    limit = arguments.optional_integer(
        "history", "limit", limit, minimum=0, what="how many of the newest commits (None: all)"
    )
    key = _kept_key(table, limit)
    with _kept_lock:
        kept = _kept.get(key) if key is not None else None
    if kept is not None and unchanged_since(table.spark, table.log_dir, kept.mark):
        return kept.rows
    listing = table.list_log(pm_lines_after=-1)  # the latest P&M are loaded (ICT settings)
    rows = _history_rows(table, listing, limit)
    if key is not None:
        with _kept_lock:
            _kept.put(key, KeptHistory(rows, LogMark.of(listing)))
    return rows


def _history_rows(table: TableLog, listing: LogListing, limit: int | None) -> DataFrame:
    spark = table.spark
    commits, first_ict = _commits_in_range(table, listing, limit)
    times = monotonize([f.modification_time for f in commits])
    versions = spark.createDataFrame(
        [(f.version, t) for f, t in zip(commits, times, strict=True)],
        schema=StructType(
            [StructField("version", LongType(), False), StructField("_file_time", LongType())]
        ),
    )
    # At most one partition's commits: the history is built in one partition, so its dedup,
    # join and sort need no exchange, each a job of its own (K, 100 commits: 4 jobs to 2).
    one_partition = sum(f.size for f in commits) <= BYTES_PER_PARTITION
    infos = _commit_infos(spark, commits, one_partition)
    joined = versions.join(infos, on="version", how="left")
    if one_partition:
        joined = joined.coalesce(1)
    columns = [F.col(f"commitInfo.{name}").alias(name) for name in COMMIT_INFO_FIELDS.fieldNames()]
    rows = joined.select("version", _timestamp(first_ict), *columns).orderBy(F.desc("version"))
    with malformed_commits_reported(spark, commits, table.table_root, _READ_SCHEMA):
        return materialize(rows)


@dataclass(frozen=True)
class KeptHistory:
    rows: DataFrame
    mark: LogMark


#: How many histories a client process keeps (all sessions and tables together), least
#: recently used out; bounded by count only. A history left behind is released on the server
#: when its DataFrame is collected.
MAX_KEPT_HISTORIES = 16
_kept_lock = threading.Lock()
_kept: LruPolicy[tuple[CacheKey, int | None], KeptHistory] = LruPolicy(
    MAX_KEPT_HISTORIES, max_bytes=MAX_KEPT_HISTORIES, size_of=lambda _: 1, release=lambda _: None
)


def _kept_key(table: TableLog, limit: int | None) -> tuple[CacheKey, int | None] | None:
    """The key of ``table``'s kept history with ``limit``; None when caching is off."""
    if not snapshot_cache.caches(table):
        return None
    return snapshot_cache.table_key(table), limit


def _commit_infos(spark: SparkSession, commits: list[LogFile], one_partition: bool) -> DataFrame:
    """``version`` and the ``commitInfo`` of each of ``commits`` that has one (in one partition
    with ``one_partition``)."""
    if not commits:
        return spark.createDataFrame([], schema=_READ_SCHEMA).withColumn(
            VERSION_COLUMN, F.lit(None).cast("long")
        )
    request = CommitLinesRead(table_path=commits[0].path, only_containing=(_COMMIT_INFO_KEY,))
    actions = commit_actions(spark, commits, _READ_SCHEMA, request)
    # The filter tests ``version`` (which carries each line's check, see ``action_lines``)
    # before ``commitInfo``: Spark pushes a filter below the parse, and one on ``commitInfo``
    # alone would leave every other line of a commit unchecked.
    checked = F.when(F.col(VERSION_COLUMN).isNull(), F.lit(False))
    infos = actions.where(checked.otherwise(F.col("commitInfo").isNotNull())).select(
        "commitInfo", VERSION_COLUMN
    )
    if one_partition:
        infos = infos.coalesce(1)
    return infos.dropDuplicates([VERSION_COLUMN])
