"""computedState: global aggregations over the reconstructed state (no ``groupBy``), one row.

Responsibility: delta-spark's ``aggregationsToComputeState`` as one query whose one row is
collected, and the check that protocol and metadata were recovered. The same query sums the
rows read untouched from a checkpoint apart (``CheckpointSums``), so that a later state whose
new keys miss that checkpoint can add those sums to a query over its replayed rows alone.

The query sums the file actions first (size, files, tombstones: a generated ``HashAggregate``
over every file action), then aggregates that one row together with the state's few non-file
rows, in one task. ``collect_set`` makes Spark run an aggregation without generated code
(``ObjectHashAggregate``), which over a large state costs more than the second step (L: 0.3 s
of 2.2 in a new session); and a union gathered into one task needs no join of the two results
(a cross join of one-row aggregations made Spark broadcast each in a job of its own: L, median
0.85 s against 0.79 s for the same state, 10 rounds). A caller whose file actions rest on an
assumption it has not checked yet marks the rows that break it (``ASSUMPTION_BROKEN``), which
the same query counts.

Invariants: the non-file rows given are every non-file action of the state (the replay keeps
them all; a checkpoint's untouched rows are file actions only). ``last(..., ignorenulls=True)``
is order dependent, and safe here only because replay leaves exactly one protocol and one
metaData row; a state without either raises ``DELTA_STATE_RECOVER_ERROR`` with delta-spark's
text. ``CheckpointSums`` count tombstones under one retention horizon, and say for which later
horizons the count still holds (``holds_at``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F

from delta_connect_py.errors import StateRecoverError
from delta_connect_py.plans.spark import collect
from delta_connect_py.protocol.actions import Metadata, Protocol

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass(frozen=True)
class State:
    """delta-spark's ``computedState``, as plain values."""

    size_in_bytes: int
    num_of_files: int
    num_of_removes: int
    num_of_metadata: int
    num_of_protocol: int
    num_of_set_transactions: int
    num_of_domain_metadata: int
    set_transactions: tuple[dict[str, Any], ...]
    domain_metadata: tuple[dict[str, Any], ...]
    metadata: Metadata
    protocol: Protocol


@dataclass(frozen=True)
class CheckpointSums:
    """The file sums of a state's rows read untouched from its checkpoint.

    ``tombstone_horizon`` is the retention horizon tombstones were counted under (None: all
    counted), ``oldest_tombstone`` the oldest deletion time among those counted (None: none).
    """

    size_in_bytes: int
    num_of_files: int
    num_of_removes: int
    tombstone_horizon: int | None
    oldest_tombstone: int | None

    def holds_at(self, tombstone_horizon: int | None) -> bool:
        """Whether the same rows count alike under ``tombstone_horizon``: no tombstone counted
        before expires, and none expired before counts again (the horizon never went back)."""
        if tombstone_horizon is None or self.tombstone_horizon is None:
            return tombstone_horizon is None and self.tombstone_horizon is None
        if tombstone_horizon < self.tombstone_horizon:
            return False
        return self.oldest_tombstone is None or self.oldest_tombstone > tombstone_horizon


@dataclass(frozen=True)
class ComputedState:
    """``compute_state``'s result: the state, and the sums of its checkpoint rows apart."""

    state: State
    checkpoint_sums: CheckpointSums


#: Columns of the file actions ``compute_state`` sums (see ``file_action_columns``).
SIZE = "_size"
ADD_PATH = "_add_path"
REMOVE_PATH = "_remove_path"
ASSUMPTION_BROKEN = "_assumption_broken"
FROM_CHECKPOINT = "_from_checkpoint"
DELETED_AT = "_deleted_at"
_CHECKPOINT_SUMS = ("checkpointSize", "checkpointFiles", "checkpointRemoves", "oldestTombstone")
_FILE_SUMS = ("sizeInBytes", "numOfFiles", "numOfRemoves", "assumptionBroken", *_CHECKPOINT_SUMS)
_NON_FILE_COLUMNS = ("txn", "metaData", "protocol", "domainMetadata")


def file_action_columns(
    tombstone_retained: Column, assumption_broken: Column, from_checkpoint: bool = False
) -> list[Column]:
    """A state row's file action as the columns ``compute_state`` sums.

    ``tombstone_retained`` says whether a tombstone counts (retention); ``assumption_broken``
    whether the row breaks the assumption the rows were built on (false when there is none);
    ``from_checkpoint`` whether the rows are read untouched from a checkpoint (``CheckpointSums``).
    Fields, not structs: the scans under the state then read only those fields.
    """
    deleted_at = F.lit(None).cast("long")
    if from_checkpoint:
        deleted_at = F.when(
            tombstone_retained & F.col("remove.path").isNotNull(),
            F.coalesce(F.col("remove.deletionTimestamp"), F.lit(0)),
        )
    return [
        F.col("add.size").alias(SIZE),
        F.col("add.path").alias(ADD_PATH),
        F.when(tombstone_retained, F.col("remove.path")).alias(REMOVE_PATH),
        assumption_broken.alias(ASSUMPTION_BROKEN),
        F.lit(from_checkpoint).alias(FROM_CHECKPOINT),
        deleted_at.alias(DELETED_AT),
    ]


def _file_aggregations() -> list[Any]:
    from_checkpoint = F.col(FROM_CHECKPOINT)
    return [
        F.coalesce(F.sum(SIZE), F.lit(0)).cast("long").alias("sizeInBytes"),
        F.count(ADD_PATH).alias("numOfFiles"),
        F.count(REMOVE_PATH).alias("numOfRemoves"),
        F.coalesce(F.max(ASSUMPTION_BROKEN), F.lit(False)).alias("assumptionBroken"),
        F.coalesce(F.sum(F.when(from_checkpoint, F.col(SIZE))), F.lit(0))
        .cast("long")
        .alias("checkpointSize"),
        F.count(F.when(from_checkpoint, F.col(ADD_PATH))).alias("checkpointFiles"),
        F.count(F.when(from_checkpoint, F.col(REMOVE_PATH))).alias("checkpointRemoves"),
        F.min(DELETED_AT).alias("oldestTombstone"),
    ]


def _non_file_aggregations() -> list[Any]:
    return [
        F.count("metaData.id").alias("numOfMetadata"),
        F.count("protocol.minReaderVersion").alias("numOfProtocol"),
        F.count("txn.appId").alias("numOfSetTransactions"),
        F.count("domainMetadata.domain").alias("numOfDomainMetadata"),
        F.collect_set("txn").alias("setTransactions"),
        F.collect_set("domainMetadata").alias("domainMetadata"),
        F.last("metaData", ignorenulls=True).alias("metadata"),
        F.last("protocol", ignorenulls=True).alias("protocol"),
    ]


def compute_state(
    file_actions: DataFrame,
    non_file_rows: DataFrame,
    version: int,
    tombstone_horizon: int | None,
    carried: CheckpointSums | None = None,
) -> ComputedState | None:
    """Run the aggregations (one Spark query) and validate protocol and metadata.

    ``file_actions`` is every file action of the state as ``file_action_columns``, tombstones
    counted under ``tombstone_horizon``; ``non_file_rows`` the state's rows holding neither add
    nor remove. With ``carried``, the file actions leave out the checkpoint rows those sums
    stand for (they must hold at ``tombstone_horizon``), and the sums are added. None is
    returned when a file action breaks the assumption the rows were built on.
    """
    file_sums = file_actions.agg(*_file_aggregations())
    others = non_file_rows.select(*_NON_FILE_COLUMNS)
    # The sums row has no non-file action and the non-file rows no sums: max() of a sum is
    # the one value the sums row has.
    combined = file_sums.unionByName(others, allowMissingColumns=True).coalesce(1)
    row = collect(
        combined.agg(*(F.max(name).alias(name) for name in _FILE_SUMS), *_non_file_aggregations())
    )[0]
    if row["assumptionBroken"]:
        return None
    if row["protocol"] is None:
        raise StateRecoverError(operation="protocol", version=version)
    if row["metadata"] is None:
        raise StateRecoverError(operation="metadata", version=version)
    checkpoint_sums = carried or CheckpointSums(
        size_in_bytes=row["checkpointSize"],
        num_of_files=row["checkpointFiles"],
        num_of_removes=row["checkpointRemoves"],
        tombstone_horizon=tombstone_horizon,
        oldest_tombstone=row["oldestTombstone"],
    )
    # Carried sums stand for rows this query did not read; its own are in the totals.
    added = carried or CheckpointSums(0, 0, 0, None, None)
    state = State(
        size_in_bytes=row["sizeInBytes"] + added.size_in_bytes,
        num_of_files=row["numOfFiles"] + added.num_of_files,
        num_of_removes=row["numOfRemoves"] + added.num_of_removes,
        num_of_metadata=row["numOfMetadata"],
        num_of_protocol=row["numOfProtocol"],
        num_of_set_transactions=row["numOfSetTransactions"],
        num_of_domain_metadata=row["numOfDomainMetadata"],
        set_transactions=tuple(
            sorted((txn.asDict() for txn in row["setTransactions"]), key=lambda t: t["appId"])
        ),
        domain_metadata=tuple(
            sorted((dm.asDict() for dm in row["domainMetadata"]), key=lambda d: d["domain"])
        ),
        metadata=Metadata.from_action(row["metadata"].asDict(recursive=True)),
        protocol=Protocol.from_action(row["protocol"].asDict(recursive=True)),
    )
    return ComputedState(state, checkpoint_sums)
