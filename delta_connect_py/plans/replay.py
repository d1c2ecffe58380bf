"""The replay plan: actions repartitioned by file path, replayed partition-wise on the server.

Responsibility: turn loaded action rows into the reconstructed state DataFrame (delta-spark's
``stateReconstruction``): ``repartition(n, key(path))`` then ``mapInArrow`` running
``worker.replay.replay_partition`` in every partition.

Invariants: the partition key is a function of the file name that is equal for any two paths
whose canonical keys are equal (the lower-cased last path segment: canonicalization only
changes scheme/authority and the case of hex escapes), so all actions of one file key meet in
one partition and every non-file action (null key) meets in one partition. The number of
partitions never changes the result.
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F

from delta_connect_py.plans.spark import spark_schema
from delta_connect_py.protocol.actions import STATE_SCHEMA
from delta_connect_py.worker.replay import ReplayConfig, replay_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DEFAULT_SNAPSHOT_PARTITIONS = 50
#: Input bytes one replay partition should handle before another is worth its overhead.
BYTES_PER_PARTITION = 16 << 20

STATE_SPARK_SCHEMA = spark_schema(STATE_SCHEMA)


def partition_key() -> Column:
    path = F.coalesce(F.col("add.path"), F.col("remove.path"))
    return F.lower(F.substring_index(path, "/", -1))


def partitions_for(input_bytes: int, maximum: int = DEFAULT_SNAPSHOT_PARTITIONS) -> int:
    """Fewer partitions for small logs: one per ``BYTES_PER_PARTITION``, at most ``maximum``."""
    return max(1, min(maximum, math.ceil(input_bytes / BYTES_PER_PARTITION)))


def replay(actions: DataFrame, config: ReplayConfig, num_partitions: int) -> DataFrame:
    """The reconstructed state: one action per row, as a checkpoint holds it."""
    return actions.repartition(num_partitions, partition_key()).mapInArrow(
        partial(replay_partition, config), STATE_SPARK_SCHEMA
    )
