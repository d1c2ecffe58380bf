"""A Delta table at one version: protocol, metadata and the reconstructed state.

Responsibility: the user-facing :class:`Snapshot`. Cheap attributes (version, timestamp,
protocol, metadata, schema, properties) come from the log segment and the P&M fast path; the
reconstructed state is a lazily built, server-cached DataFrame, and ``state`` is one query of
global aggregations over it (``plans.state``), or after an update the same aggregations observed
by the update's replay job added to the earlier rows' sums (``plans.replay``), or the same
aggregations observed by a checkpoint's write job over every row it wrote
(``adopt_observed_state``).

Invariants: a Snapshot is an immutable value (its properties never change once computed; only
``previous`` is let go of once the state no longer needs it); the reconstructed state's protocol
and metadata must equal the fast path's, else ``DELTA_STATE_RECOVER_ERROR``; nothing
proportional to the table is collected to the client.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.sql.types import StructType

from delta_connect_py.errors import StateRecoverError
from delta_connect_py.plans.loading import (
    STATE_SPARK_SCHEMA,
    load_actions,
    malformed_commits_reported,
)
from delta_connect_py.plans.protocol_metadata import ProtocolAndMetadata, protocol_and_metadata
from delta_connect_py.plans.replay import ReconstructedState, reconstruct, reconstruct_after
from delta_connect_py.plans.state import ComputedState, State, compute_state, observed_state
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.features import check_readable
from delta_connect_py.protocol.filenames import commit_name
from delta_connect_py.worker.log_files import file_uri
from delta_connect_py.worker.replay import ReplayConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.protocol.actions import Metadata, Protocol
    from delta_connect_py.protocol.segment import LogSegment
    from delta_connect_py.table import DeltaTable


@dataclass(frozen=True, eq=False)
class Snapshot:
    """The table ``table`` at ``version``. Build it with ``DeltaTable.snapshot()``."""

    table: DeltaTable
    segment: LogSegment
    protocol_and_metadata: ProtocolAndMetadata
    snapshot_partitions: int | None = None
    #: Milliseconds since the epoch when the snapshot was taken: tombstone retention's "now".
    created_at_ms: int = 0
    #: The earlier snapshot whose server-side state this one extends (see ``update``); None
    #: once this snapshot's own state is on the server, which no longer needs it.
    previous: Snapshot | None = None

    def __repr__(self) -> str:
        """Path, version and what the log segment (and a state already computed) tell: no job,
        no list of log files."""
        segment = self.segment
        checkpoint = "none" if segment.checkpoint is None else str(segment.checkpoint.version)
        known = ""
        if self.state_known:
            known = f", files={self.state.num_of_files}, size_in_bytes={self.state.size_in_bytes}"
        return (
            f"Snapshot({self.table.table_root!r}, version={self.version}, "
            f"checkpoint={checkpoint}, commits_after_checkpoint={len(segment.commits)}{known})"
        )

    @property
    def spark(self) -> SparkSession:
        return self.table.spark

    @property
    def version(self) -> int:
        return self.segment.version

    @property
    def protocol(self) -> Protocol:
        return self.protocol_and_metadata.protocol

    @property
    def metadata(self) -> Metadata:
        return self.protocol_and_metadata.metadata

    @property
    def timestamp_ms(self) -> int:
        """The commit timestamp: in-commit timestamp where enabled, else the commit file's mtime."""
        ict = self.protocol_and_metadata.in_commit_timestamp
        if ict is not None and props.in_commit_timestamps_enabled(self.metadata.configuration):
            return ict
        return self.segment.last_commit_timestamp

    @property
    def timestamp(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, tz=timezone.utc)

    @property
    def schema(self) -> StructType:
        return StructType.fromJson(self.metadata.schema_json)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return self.metadata.partition_columns

    @property
    def properties(self) -> dict[str, str]:
        """The table configuration plus ``delta.minReaderVersion`` / ``delta.minWriterVersion``."""
        return props.table_properties(self.metadata.configuration, self.protocol)

    def replay_config(self) -> ReplayConfig:
        configuration = self.metadata.configuration
        txn_retention = props.set_transaction_retention_ms(configuration)
        return ReplayConfig(
            table_root=self.table.table_root,
            log_dir=self.table.log_dir,
            min_file_retention_timestamp=self.created_at_ms
            - props.deleted_file_retention_ms(configuration),
            min_set_transaction_retention_timestamp=None
            if txn_retention is None
            else self.created_at_ms - txn_retention,
        )

    @cached_property
    def _reconstructed(self) -> ReconstructedState:
        previous = self.previous
        segment = (
            self.segment if previous is None else _commits_after(self.segment, previous.version)
        )
        reported = malformed_commits_reported(
            self.spark, segment.commits, self.table.table_root, STATE_SPARK_SCHEMA
        )
        with reported:
            loaded = load_actions(self.spark, segment, self.table.log_dir)
            if previous is None:
                return reconstruct(loaded, self.replay_config(), self.snapshot_partitions)
            state = reconstruct_after(
                previous._reconstructed,
                previous_commit=file_uri(f"{self.table.log_dir}/{commit_name(previous.version)}"),
                previous_version=previous.version,
                actions=loaded,
                config=self.replay_config(),
                num_partitions=self.snapshot_partitions,
            )
        # This state stands on its own now. Holding on to the earlier snapshot would keep every
        # earlier state of a chain of updates alive on the server (a poller's memory would grow
        # by one state per update); a later rebuild (after ``unpersist``) replays the segment.
        object.__setattr__(self, "previous", None)
        return state

    def _keys_checked(self) -> ReconstructedState:
        """``_reconstructed`` with its join keys known (a small job the first time, unless the
        state query already found them out)."""
        checked = self._reconstructed.with_keys_checked()
        self.__dict__["_reconstructed"] = checked
        return checked

    @cached_property
    def _state_df(self) -> DataFrame:
        return self._keys_checked().rows(self.replay_config())

    def update(self) -> Snapshot:
        """The table's latest snapshot, built on this one's server-side state.

        When this snapshot's state has been computed and the log has only grown by commits
        since (no newer checkpoint), only the new commits are read and replayed; otherwise this
        is ``table.snapshot()``. Returns ``self`` when there is no new version.
        """
        table = self.table
        segment = table.log_segment()
        if segment.version == self.version:
            return self
        new_commits = _commits_after(segment, self.version)
        new_versions = [c.version for c in new_commits.commits]
        reusable = (
            "_reconstructed" in self.__dict__
            and segment.checkpoint_version <= self.version
            and new_versions == list(range(self.version + 1, segment.version + 1))
        )
        if not reusable:
            return table.snapshot(snapshot_partitions=self.snapshot_partitions)
        pm = protocol_and_metadata(
            self.spark, new_commits, table.log_dir, previous=self.protocol_and_metadata
        )
        check_readable(pm.protocol, table.table_root, segment.version)
        return Snapshot(
            table=table,
            segment=segment,
            protocol_and_metadata=pm,
            snapshot_partitions=self.snapshot_partitions,
            created_at_ms=now_ms(),
            previous=self,
        )

    def state_df(self) -> DataFrame:
        """The reconstructed state, one action per row as a checkpoint holds it.

        The first call runs the replay of the commits (a Spark job) and keeps its result on the
        server as a local checkpoint; later calls and queries reuse it, and read the untouched
        rows of the checkpoint parquet directly (see ``plans.replay``).
        """
        return self._state_df

    def checkpoint_rows(self, stats_parsed: StructType | None) -> DataFrame:
        """``state_df()`` for a checkpoint writer; with ``stats_parsed``, plus the typed stats
        the previous checkpoint wrote, where it wrote that type (``ReconstructedState.rows``)."""
        if stats_parsed is None:
            return self.state_df()
        return self._keys_checked().rows(self.replay_config(), stats_parsed)

    def stats_parsed_to_parse_bytes(self, stats_parsed: StructType) -> int | None:
        """Commit bytes whose adds a checkpoint writer must parse into ``stats_parsed``: those
        replayed, when the checkpoint under this state carries that type; else None (every
        add's stats are to be parsed)."""
        reconstructed = self._reconstructed
        if not reconstructed.carries_stats_parsed(stats_parsed):
            return None
        return reconstructed.replayed_bytes

    @cached_property
    def state(self) -> State:
        """delta-spark's computedState (runs one Spark query the first time, or after an
        update only a probe of its keys, see ``plans.replay``)."""
        state = self._state_on_base_sums()
        if state is None:
            state = self._queried_state()
        self._check_recovered(state)
        return state

    @property
    def state_known(self) -> bool:
        """Whether ``state`` is computed already (reading it runs no job)."""
        return "state" in self.__dict__

    def adopt_observed_state(self, metrics: dict[str, Any]) -> State:
        """``state`` from ``plans.state.state_aggregations`` observed by a job over exactly
        this snapshot's retained state rows (a checkpoint writer's), checked like a queried
        state; the state query then never runs."""
        state = observed_state(metrics, self.version)
        self._check_recovered(state)
        self.__dict__["state"] = state
        return state

    def _check_recovered(self, state: State) -> None:
        """The state's protocol and metadata must be the fast path's."""
        if state.protocol != self.protocol:
            raise StateRecoverError(operation="protocol", version=self.version)
        if state.metadata != self.metadata:
            raise StateRecoverError(operation="metadata", version=self.version)

    def _queried_state(self) -> State:
        """The state query over every row of the state; its sums of the rows outside the
        updates' replay are kept for later states (``plans.replay``)."""
        computed = self._plain_keys_state()
        if computed is None:
            computed = self._computed_state(self._keys_checked())
            assert computed is not None  # only an assumption (check_plain_keys) can fail
        reconstructed = self._reconstructed
        self.__dict__["_reconstructed"] = dataclasses.replace(
            reconstructed, base_sums=computed.base_sums, counted_updates=reconstructed.updates
        )
        return computed.state

    def _computed_state(
        self, reconstructed: ReconstructedState, check_plain_keys: bool = False
    ) -> ComputedState | None:
        """The state query over every file action."""
        config = self.replay_config()
        return compute_state(
            reconstructed.file_actions(config, check_plain_keys),
            reconstructed.non_file_rows(config),
            self.version,
            config.min_file_retention_timestamp,
        )

    def _plain_keys_state(self) -> ComputedState | None:
        """The state computed on the assumption that the join keys are plain, checked in the
        same query (L: one job fewer, 0.15-0.35 s); None when they are known, or not plain."""
        reconstructed = self._reconstructed
        if reconstructed.plain_keys is not None:
            return None
        assumed = dataclasses.replace(reconstructed, plain_keys=True)
        computed = self._computed_state(assumed, check_plain_keys=True)
        self.__dict__["_reconstructed"] = dataclasses.replace(
            reconstructed, plain_keys=computed is not None
        )
        return computed

    def _state_on_base_sums(self) -> State | None:
        """After updates, the state as the earlier rows' ``base_sums`` plus the aggregations
        the update's replay observed, when its keys miss those rows (one probe, see
        ``plans.replay``): no state query. None when that does not apply, or a key hits: then
        the full query that follows leaves the updates' keys out of the base sums, so that later
        updates are probed for their new keys only."""
        config = self.replay_config()
        reconstructed = self._reconstructed
        if not reconstructed.carries_base_sums(config):
            return None
        if reconstructed.updates is None:
            # A first replay that counted itself (no checkpoint under it): nothing to probe.
            base, observed = reconstructed.base_sums, reconstructed.observed
            assert base is not None and observed is not None
            return observed.state(base, reconstructed.observed_in_base, self.version)
        indexed = reconstructed.with_key_indexes()
        self.__dict__["_reconstructed"] = indexed
        if not indexed.updates_miss_base():
            return None
        assert indexed.base_sums is not None and indexed.observed is not None
        return indexed.observed.state(
            indexed.base_sums, counted=indexed.observed_in_base, version=self.version
        )

    def all_files(self) -> DataFrame:
        """Live ``add`` actions, one row each, the protocol's add fields as columns (lazy)."""
        return self.state_df().where(F.col("add.path").isNotNull()).select("add.*")

    def tombstones(self) -> DataFrame:
        """Unexpired ``remove`` actions, one row each (lazy)."""
        return self.state_df().where(F.col("remove.path").isNotNull()).select("remove.*")

    @property
    def transactions(self) -> dict[str, int]:
        """appId -> version of the retained ``txn`` actions (runs the state job once)."""
        return {txn["appId"]: txn["version"] for txn in self.state.set_transactions}

    def to_df(self, columns: list[str] | None = None, filter: Any = None) -> DataFrame:
        """The table's rows at this snapshot (lazy). See ``delta_connect_py.data``."""
        from delta_connect_py.data import snapshot_to_df

        return snapshot_to_df(self, columns=columns, filter=filter)

    def unpersist(self) -> None:
        """Release the server-side copy of the reconstructed state.

        The local checkpoint is released on the server once no DataFrame refers to it; a later
        ``state_df()`` replays again.
        """
        self.__dict__.pop("_state_df", None)
        self.__dict__.pop("_reconstructed", None)

    def describe(self) -> dict[str, Any]:
        """Version, protocol, metadata and computed state as plain values (runs the state job)."""
        state = self.state
        return {
            "path": self.table.table_root,
            "version": self.version,
            "timestamp": self.timestamp.isoformat(),
            "protocol": self.protocol.to_action(),
            "metadata": self.metadata.to_action(),
            "properties": self.properties,
            "state": {
                "sizeInBytes": state.size_in_bytes,
                "numOfFiles": state.num_of_files,
                "numOfRemoves": state.num_of_removes,
                "numOfMetadata": state.num_of_metadata,
                "numOfProtocol": state.num_of_protocol,
                "numOfSetTransactions": state.num_of_set_transactions,
                "numOfDomainMetadata": state.num_of_domain_metadata,
                "setTransactions": list(state.set_transactions),
            },
        }


def _commits_after(segment: LogSegment, version: int) -> LogSegment:
    """``segment`` reduced to its commits after ``version`` (no checkpoint)."""
    return dataclasses.replace(
        segment, checkpoint=None, commits=tuple(c for c in segment.commits if c.version > version)
    )


def now_ms() -> int:
    return int(time.time() * 1000)
