"""The replay plan: a segment's actions reconstructed into the table state on the server.

Responsibility: delta-spark's ``stateReconstruction`` as Spark Connect DataFrame operations.
Commit actions (and whatever they may supersede) are repartitioned by a file-path key and
replayed partition-wise with ``mapInArrow`` (``worker.replay.replay_partition``); that result is
kept on the server as a local checkpoint. A checkpoint's file actions that no later commit
touches are already reconciled, so they join the state as they are, read straight from the
checkpoint parquet (Delta Kernel's plan): the checkpoint, usually most of the state, is never
shuffled nor sent through Python, and queries over the state read only the columns they use.

Invariants: the partition key is a function of the file name that is equal for any two paths
whose canonical keys are equal (the lower-cased last path segment: canonicalization only changes
scheme/authority and the case of hex escapes), so all actions of one file key meet in one
partition, and a checkpoint row whose key no commit shares cannot be superseded. Every non-file
action meets in one partition. Neither the number of partitions nor which checkpoint rows take
the direct route changes the result. The files checkpoint rows come from are checked by the replay
worker to lie in this table's ``_delta_log`` (``DELTA_LOG_FILE_OUTSIDE_TABLE``) before any state
is returned. Tombstone retention is applied last, to replayed and direct rows alike.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F

from delta_connect_py.plans.spark import materialize, spark_schema, union_all
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.worker.replay import ReplayConfig, replay_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from delta_connect_py.plans.loading import SegmentActions

DEFAULT_SNAPSHOT_PARTITIONS = 50
#: Input bytes one replay partition should handle before another is worth its overhead.
BYTES_PER_PARTITION = 16 << 20

STATE_SPARK_SCHEMA = spark_schema(STATE_SCHEMA)
STATE_COLUMNS = [field.name for field in STATE_SPARK_SCHEMA.fields]
_ACTION_FIELDS = STATE_SPARK_SCHEMA.fields
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
    checkpoint_files = checkpoint.where(_is_file_action()).withColumn(_KEY, partition_key())
    to_replay = [checkpoint.where(~_is_file_action()), _source_files(checkpoint)]
    if actions.commits is not None and actions.commit_paths is not None:
        touched = actions.commit_paths.select(partition_key().alias(_KEY))
        superseded = checkpoint_files.join(F.broadcast(touched), on=_KEY, how="left_semi")
        to_replay += [superseded.drop(_KEY), actions.commits]
    replayed = materialize(replay(union_all(to_replay), keep_tombstones, partitions))
    replayed_keys = replayed.where(_is_file_action()).select(partition_key().alias(_KEY))
    untouched = checkpoint_files.join(F.broadcast(replayed_keys), on=_KEY, how="left_anti")
    return union_all([_as_state_rows(untouched), replayed]).where(retained(config))


def _source_files(checkpoint: DataFrame) -> DataFrame:
    """One action-less row per file the checkpoint rows come from.

    Replayed with the rest, they make the replay worker check every source file lies in this
    table's log: the rows read directly from the checkpoint come from exactly these files, and
    this costs one scan of a metadata column rather than a check on every row of every query.
    """
    null_actions = [F.lit(None).cast(field.dataType).alias(field.name) for field in _ACTION_FIELDS]
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
        F.col(name).withField("dataChange", F.lit(False))  # withField keeps a null struct null
        if name in ("add", "remove")
        else F.lit(None).cast(field.dataType)
        for name, field in ((field.name, field) for field in STATE_SPARK_SCHEMA.fields)
    ]
    return checkpoint_file_rows.select(
        *[column.alias(name) for column, name in zip(columns, STATE_COLUMNS, strict=True)]
    )
