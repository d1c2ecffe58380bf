"""The replay plan: a segment's actions reconstructed into the table state on the server.

Responsibility: delta-spark's ``stateReconstruction`` as Spark Connect DataFrame operations.
The commits' actions (with the checkpoint's non-file actions) are repartitioned by a file-path
key and replayed partition-wise with ``mapInArrow`` (``worker.replay.replay_partition``); that
result is kept on the server as a local checkpoint. A checkpoint's file action whose file key no
commit has is already reconciled, so it joins the state as it is, read straight from the
checkpoint parquet (Delta Kernel's plan): the checkpoint, usually most of the state, is never
shuffled nor sent through Python, and queries over the state read only the columns they use.

Invariants: the partition key is a function of the file name that is equal for any two paths
whose canonical keys are equal (the lower-cased last path segment: canonicalization only changes
scheme/authority and the case of hex escapes), so all actions of one file key meet in one
partition; every non-file action meets in one partition. A checkpoint file action is dropped
exactly when a replayed action (every commit key's newest action, tombstones included) has its
file key (``plans.file_keys``, equal to the worker's key): a commit's action always supersedes
the checkpoint's. Like Delta Kernel, this relies on the protocol's rule that a checkpoint holds
reconciled state (at most one action per file key): duplicates inside one checkpoint are not
removed. The number of partitions never changes the result. The files checkpoint rows
come from are checked by the replay worker to lie in this table's ``_delta_log``
(``DELTA_LOG_FILE_OUTSIDE_TABLE``) before any state is returned. Tombstone retention is applied
last, to replayed and direct rows alike.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F

from delta_connect_py.plans.file_keys import file_key
from delta_connect_py.plans.spark import materialize, spark_schema, union_all
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.worker.replay import ReplayConfig, replay_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from delta_connect_py.plans.loading import SegmentActions

DEFAULT_SNAPSHOT_PARTITIONS = 50
#: Input bytes one replay partition should handle before another is worth its overhead.
BYTES_PER_PARTITION = 16 << 20

#: Up to this many commit bytes after a checkpoint, the replayed keys (about a third of the
#: bytes) are broadcast to every task rather than both sides shuffled.
BROADCAST_COMMIT_BYTES = 256 << 20

STATE_SPARK_SCHEMA = spark_schema(STATE_SCHEMA)
STATE_COLUMNS = [field.name for field in STATE_SPARK_SCHEMA.fields]
_KEY = "_replay_key"


def partition_key() -> Column:
    path = F.coalesce(F.col("add.path"), F.col("remove.path"))
    return F.lower(F.substring_index(path, "/", -1))


def partitions_for(input_bytes: int, maximum: int = DEFAULT_SNAPSHOT_PARTITIONS) -> int:
    """Fewer partitions for small logs: one per ``BYTES_PER_PARTITION``, at most ``maximum``."""
    return max(1, min(maximum, math.ceil(input_bytes / BYTES_PER_PARTITION)))


def replay(actions: DataFrame, config: ReplayConfig, num_partitions: int) -> DataFrame:
    """The replayed state of ``actions``: one action per row, as a checkpoint holds it."""
    return actions.repartition(num_partitions, partition_key()).mapInArrow(
        partial(replay_partition, config), STATE_SPARK_SCHEMA
    )


def reconstruct(
    actions: SegmentActions, config: ReplayConfig, num_partitions: int | None = None
) -> DataFrame:
    """The state of a segment (runs the replay job now; the rest stays lazy)."""
    partitions = num_partitions or partitions_for(actions.commit_bytes)
    # Retention is applied to the union below, so the replay keeps every tombstone.
    keep_tombstones = dataclasses.replace(config, min_file_retention_timestamp=None)
    if actions.checkpoint is None:
        assert actions.commits is not None
        replayed = materialize(replay(actions.commits, keep_tombstones, partitions))
        return replayed.where(retained(config))
    checkpoint = actions.checkpoint
    return _state_over(
        base_files=_as_state_rows(checkpoint.where(_is_file_action())),
        to_replay=[checkpoint.where(~_is_file_action()), _source_files(checkpoint)],
        commits=actions.commits,
        commit_bytes=actions.commit_bytes,
        config=config,
        partitions=partitions,
    )


def reconstruct_after(
    previous_state: DataFrame,
    previous_commit: str,
    previous_version: int,
    actions: SegmentActions,
    config: ReplayConfig,
    num_partitions: int | None = None,
) -> DataFrame:
    """The state after ``actions.commits`` applied to an earlier snapshot's state.

    The earlier state plays the checkpoint's part: already reconciled, its file actions stay
    unless a new commit has their key; its other actions are replayed with the new commits,
    attributed to its newest commit file ``previous_commit`` (so the source check passes).
    """
    others = previous_state.where(~_is_file_action()).select(
        *STATE_COLUMNS,
        F.lit(previous_version).cast("long").alias(VERSION_COLUMN),
        F.lit(previous_commit).alias(FILE_COLUMN),
    )
    return _state_over(
        base_files=previous_state.where(_is_file_action()),
        to_replay=[others],
        commits=actions.commits,
        commit_bytes=actions.commit_bytes,
        config=config,
        partitions=num_partitions or partitions_for(actions.commit_bytes),
    )


def _state_over(
    base_files: DataFrame,
    to_replay: list[DataFrame],
    commits: DataFrame | None,
    commit_bytes: int,
    config: ReplayConfig,
    partitions: int,
) -> DataFrame:
    """``base_files`` (reconciled file actions, as state rows) without those whose key a
    replayed action has, plus the replay of ``to_replay`` and ``commits``."""
    # Retention is applied to the union below, so the replay keeps every tombstone.
    keep_tombstones = dataclasses.replace(config, min_file_retention_timestamp=None)
    if commits is not None:
        to_replay = [*to_replay, commits]
    replayed = materialize(replay(union_all(to_replay), keep_tombstones, partitions))
    replayed_keys = replayed.where(_is_file_action()).select(
        file_key(config.table_root).alias(_KEY)
    )
    if commit_bytes <= BROADCAST_COMMIT_BYTES:
        replayed_keys = F.broadcast(replayed_keys)
    untouched = (
        base_files.withColumn(_KEY, file_key(config.table_root))
        .join(replayed_keys, on=_KEY, how="left_anti")
        .drop(_KEY)
    )
    return union_all([untouched, replayed]).where(retained(config))


def _source_files(checkpoint: DataFrame) -> DataFrame:
    """One action-less row per file the checkpoint rows come from.

    Replayed with the rest, they make the replay worker check every source file lies in this
    table's log: the rows read directly from the checkpoint come from exactly these files, and
    this costs one scan of a metadata column rather than a check on every row of every query.
    """
    null_actions = [
        F.lit(None).cast(field.dataType).alias(field.name) for field in STATE_SPARK_SCHEMA.fields
    ]
    return (
        checkpoint.select(FILE_COLUMN)
        .distinct()
        .select(*null_actions, F.lit(-1).cast("long").alias(VERSION_COLUMN), FILE_COLUMN)
    )


def _is_file_action() -> Column:
    return F.col("add.path").isNotNull() | F.col("remove.path").isNotNull()


def retained(config: ReplayConfig) -> Column:
    """Rows to keep: all but tombstones deleted before the retention horizon."""
    if config.min_file_retention_timestamp is None:
        return F.lit(True)
    deleted_at = F.coalesce(F.col("remove.deletionTimestamp"), F.lit(0))
    # remove.path, not remove: a struct's null-ness would make every scan read all its fields.
    return F.col("remove.path").isNull() | (deleted_at > F.lit(config.min_file_retention_timestamp))


def _as_state_rows(checkpoint_file_rows: DataFrame) -> DataFrame:
    """Checkpoint file actions as state rows, with ``dataChange`` false.

    A checkpoint row holds one action, so the other action columns are null by definition;
    saying so lets queries skip reading them.
    """
    columns = [
        # withField keeps a null struct null
        F.col(field.name).withField("dataChange", F.lit(False)).alias(field.name)
        if field.name in ("add", "remove")
        else F.lit(None).cast(field.dataType).alias(field.name)
        for field in STATE_SPARK_SCHEMA.fields
    ]
    return checkpoint_file_rows.select(*columns)
