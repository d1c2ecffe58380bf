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
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.sql.types import StructType

from delta_connect_py import arguments
from delta_connect_py.clustering import clustering_columns, supports_clustering
from delta_connect_py.data import snapshot_to_df
from delta_connect_py.errors import (
    CorruptLogFileError,
    StateRecoverError,
    TimestampOutOfRangeError,
)
from delta_connect_py.job_log import logged_job
from delta_connect_py.plans.loading import (
    STATE_SPARK_SCHEMA,
    load_actions,
    malformed_commits_reported,
    parquet_damage_reported,
)
from delta_connect_py.plans.protocol_metadata import (
    ProtocolAndMetadata,
    ScannedPmLines,
    protocol_and_metadata,
)
from delta_connect_py.plans.replay import ReconstructedState, reconstruct, reconstruct_after
from delta_connect_py.plans.state import ComputedState, State, compute_state, observed_state
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.feature_use import check_features_listed
from delta_connect_py.protocol.features import check_readable
from delta_connect_py.protocol.filenames import commit_name
from delta_connect_py.protocol.timestamps import utc_datetime
from delta_connect_py.spark_failures import public_calls_raise_delta_errors
from delta_connect_py.table_schema import check_schema, parsed_schema
from delta_connect_py.worker.log_files import file_uri
from delta_connect_py.worker.replay import ReplayConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.protocol.actions import Metadata, Protocol
    from delta_connect_py.protocol.file_filters import Filter
    from delta_connect_py.protocol.segment import LogSegment
    from delta_connect_py.table_log import TableLog


_log = logging.getLogger(__name__)


@public_calls_raise_delta_errors
@dataclass(frozen=True, eq=False)
class Snapshot:
    """The table ``table`` at ``version``: an immutable value. Build it with
    ``DeltaTable.snapshot()``.

    Its version, timestamp, protocol, metadata, schema and properties are known without
    replaying the log (an in-commit timestamp at a checkpoint's version, without a version
    checksum, reads that version's commit file: one small job).
    The file-level state (``state``, ``all_files()``, ``tombstones()``, ``transactions``,
    ``to_df()``) is replayed from the log on the server the first time one of them is used and
    kept there (``unpersist()`` releases it).

    Example:
        >>> snap = DeltaTable.for_path(spark, "/data/events").snapshot()
        >>> snap.version, snap.partition_columns
        (12, ('region',))
    """

    table: TableLog
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
        """The Spark Connect session the snapshot reads through."""
        return self.table.spark

    @property
    def version(self) -> int:
        """The table version this snapshot is of."""
        return self.segment.version

    @property
    def protocol(self) -> Protocol:
        """The ``protocol`` action in force: reader and writer versions and table features."""
        return self.protocol_and_metadata.protocol

    @property
    def metadata(self) -> Metadata:
        """The ``metaData`` action in force: id, schema, partition columns, configuration."""
        return self.protocol_and_metadata.metadata

    @property
    def timestamp_ms(self) -> int:
        """The commit timestamp: in-commit timestamp where enabled, else the commit file's mtime."""
        ict = self.in_commit_timestamp_ms
        return self.segment.last_commit_timestamp if ict is None else ict

    @cached_property
    def in_commit_timestamp_ms(self) -> int | None:
        """The version's in-commit timestamp where the table has them enabled, else None.

        The version checksum or the P&M read brings it, except when the segment ends at a
        checkpoint (no commit after it was read) and no checksum has it: then the version's
        own commit file is read, as delta-spark does; never the file's time instead."""
        if not props.in_commit_timestamps_enabled(self.metadata.configuration):
            return None
        ict = self.protocol_and_metadata.in_commit_timestamp
        return self.table.version_in_commit_timestamp(self.segment) if ict is None else ict

    @property
    def timestamp(self) -> datetime:
        """``timestamp_ms`` as a UTC ``datetime``; ``DELTA_CONNECT_TIMESTAMP_OUT_OF_RANGE``
        for one outside the years a ``datetime`` holds."""
        timestamp_ms = self.timestamp_ms
        moment = utc_datetime(timestamp_ms)
        if moment is None:
            raise TimestampOutOfRangeError(
                version=self.version, path=self.table.table_root, timestamp_ms=timestamp_ms
            )
        return moment

    @property
    def schema(self) -> StructType:
        """The table schema as a Spark ``StructType`` (logical names; column mapping metadata
        kept in the fields' metadata)."""
        source = metadata_source(self.table, self.protocol_and_metadata)
        return parsed_schema(self.metadata, source, self.table.log_dir, self.version)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns' names, in order (empty for an unpartitioned table)."""
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
        with logged_job(
            _log, "state reconstruction", table=self.table.table_root, version=self.version
        ):
            return self._replay()

    def _replay(self) -> ReconstructedState:
        """The log segment's actions replayed on the server (from the earlier snapshot's state
        after ``update``), kept there as a local checkpoint."""
        previous = self.previous
        if previous is None:
            try:
                return self._reconstructed_from(self.segment)
            except CorruptLogFileError as error:
                around = self._segment_around(error)
                if around is None:
                    raise
                return self._reconstructed_from(around)
        segment = _commits_after(self.segment, previous.version)
        reported = malformed_commits_reported(
            self.spark, segment.commits, self.table.table_root, STATE_SPARK_SCHEMA
        )
        with reported:
            loaded = load_actions(self.spark, segment, self.table.log_dir)
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

    def _reconstructed_from(self, segment: LogSegment) -> ReconstructedState:
        """The state of ``segment`` (this snapshot's, or one of the same version) replayed."""
        reported = malformed_commits_reported(
            self.spark, segment.commits, self.table.table_root, STATE_SPARK_SCHEMA
        )
        checkpoint_files = () if segment.checkpoint is None else segment.checkpoint.files
        with reported, parquet_damage_reported(checkpoint_files):
            loaded = load_actions(self.spark, segment, self.table.log_dir)
            return reconstruct(loaded, self.replay_config(), self.snapshot_partitions)

    def _segment_around(self, error: CorruptLogFileError) -> LogSegment | None:
        """A segment of this version that reads around the checkpoint ``error`` could not read,
        when this snapshot's P&M were the listing's read of that checkpoint: Spark's P&M read,
        which the snapshot would otherwise have made, reads around a checkpoint it cannot read
        (``TableLog.loaded_segment``), which pyarrow may have read. None when it does not, or
        finds other P&M than the snapshot has."""
        if not self.protocol_and_metadata.from_listed_checkpoint:
            return None
        found = self.table.segment_around(self.segment, error)
        if found is None:
            return None
        segment, pm = found
        same = (pm.protocol, pm.metadata) == (self.protocol, self.metadata)
        return segment if same else None

    def _keys_checked(self) -> ReconstructedState:
        """``_reconstructed`` with its join keys known (a small job the first time, unless the
        state query already found them out)."""
        checked = self._reconstructed.with_keys_checked()
        self.__dict__["_reconstructed"] = checked
        return checked

    @cached_property
    def _state_df(self) -> DataFrame:
        reconstructed = self._keys_checked()
        if reconstructed.checkpoint is not None:
            # The rows read the checkpoint lazily: its damage must be met here, as a Delta
            # error, not by the caller's first action on the rows.
            reconstructed.checkpoint.check_readable()
        return reconstructed.rows(self.replay_config())

    def update(self) -> Snapshot:
        """The table's latest snapshot, built on this one's server-side state.

        When this snapshot's state has been computed and the log has only grown by commits
        since (no newer checkpoint), only the new commits are read and replayed; otherwise this
        is ``table.snapshot()``.

        Returns:
            The latest snapshot; ``self`` when there is no new version.

        Raises:
            DeltaError: as ``DeltaTable.snapshot()``.

        Example:
            >>> snap = snap.update()  # a poller: cheap when a few commits were added
        """
        listing = self.table.list_log(pm_lines_after=self.version if self.state_kept else -1)
        segment = self.table.log_segment(None, listing)
        if segment.version == self.version:
            return self
        extended = self.extended_to(segment, listing.pm_lines)
        if extended is None:  # built afresh, from the listing at hand
            return build_snapshot(self.table, segment, listing, self.snapshot_partitions)
        return extended

    @property
    def state_kept(self) -> bool:
        """Whether this snapshot's state has been computed and is kept on the server (what a
        later snapshot extends: ``extended_to``)."""
        return "_reconstructed" in self.__dict__

    def extended_to(
        self, segment: LogSegment, scanned: ScannedPmLines | None = None
    ) -> Snapshot | None:
        """The snapshot of ``segment`` (a later version of this table, listed now) built on this
        one's server-side state: only its commits after this version are read and replayed.
        None when that does not apply: this state is not computed, or ``segment`` has a newer
        checkpoint or no contiguous commits since this version."""
        table = self.table
        new_commits = _commits_after(segment, self.version)
        new_versions = [c.version for c in new_commits.commits]
        reusable = (
            self.state_kept
            and segment.version > self.version
            and segment.checkpoint_version <= self.version
            and new_versions == list(range(self.version + 1, segment.version + 1))
        )
        if not reusable:
            return None
        pm = protocol_and_metadata(
            self.spark,
            new_commits,
            table.log_dir,
            previous=self.protocol_and_metadata,
            scanned=scanned,
        )
        check_snapshot_readable(table, pm, segment.version)
        return Snapshot(
            table=table,
            segment=segment,
            protocol_and_metadata=pm,
            snapshot_partitions=self.snapshot_partitions,
            created_at_ms=now_ms(),
            previous=self,
        )

    def state_df(self) -> DataFrame:
        """The reconstructed state, one action per row as a checkpoint holds it (``add``,
        ``remove``, ``metaData``, ``protocol``, ``txn``, ``domainMetadata`` columns).

        The first call runs the replay of the commits (a Spark job) and keeps its result on the
        server as a local checkpoint; later calls and queries reuse it, and read the untouched
        rows of the checkpoint parquet directly (see ``plans.replay``), which the first call
        reads in full once (a job) so that a damaged checkpoint is ``DELTA_CORRUPT_LOG_FILE``.
        """
        return self._state_df

    def checkpoint_rows(self, stats_parsed: StructType | None) -> DataFrame:
        """``state_df()`` for a checkpoint writer; with ``stats_parsed``, plus the typed stats
        the previous checkpoint wrote, where it wrote that type (``ReconstructedState.rows``)."""
        # Not ``state_df()``: the writer's own job reads every row, inside our error handling.
        # The strings are tested first, so that a value that is not UTF-8 is refused, not
        # copied into the new checkpoint: by a job of their own, on every core, as the writer
        # of a single file reads its rows in one task (tested there, L's first checkpoint of a
        # session took 2.5 s more, 16.7-17.5 s against 14.2-14.7 s).
        reconstructed = self._keys_checked()
        if reconstructed.checkpoint is not None:
            reconstructed.checkpoint.check_readable()
        return reconstructed.rows(self.replay_config(), stats_parsed)

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
        """delta-spark's ``computedState``: counts and sizes of the live files, tombstones,
        transactions and domain metadata.

        Not a plain attribute: the first read runs the state job (the replay of the log on the
        server, then one query of aggregations over it; after ``update()`` only the new commits
        are replayed). Its start and end are logged at INFO on the ``delta_connect_py`` logger.

        Returns:
            A :class:`~delta_connect_py.plans.state.State`.

        Raises:
            DeltaError: ``DELTA_STATE_RECOVER_ERROR`` when the replayed protocol or metadata
                differ from the snapshot's; ``DELTA_CORRUPT_LOG_FILE`` for an unreadable log
                file; ``DELTA_DELETION_VECTOR_INVALID`` or ``DELTA_FILE_NOT_FOUND_DETAILED`` for
                files the log names that cannot be read.

        Example:
            >>> snap.state.num_of_files, snap.state.size_in_bytes
            (40, 1048576)
        """
        with logged_job(_log, "state", table=self.table.table_root, version=self.version):
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
        checksum_file = self._pm_checksum_file()
        if state.protocol != self.protocol:
            raise StateRecoverError(
                operation="protocol", version=self.version, checksum_file=checksum_file
            )
        if state.metadata != self.metadata:
            raise StateRecoverError(
                operation="metadata", version=self.version, checksum_file=checksum_file
            )

    def _pm_checksum_file(self) -> str | None:
        """The version checksum file the fast path read the protocol and metadata from (None
        when they came from the log)."""
        source = self.protocol_and_metadata.source
        return None if source == "log" else source

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
        indexed, missed = reconstructed.probed()
        self.__dict__["_reconstructed"] = indexed
        if not missed:
            return None
        assert indexed.base_sums is not None and indexed.observed is not None
        return indexed.observed.state(
            indexed.base_sums, counted=indexed.observed_in_base, version=self.version
        )

    def all_files(self) -> DataFrame:
        """The live data files: one row per ``add`` action, its fields as columns (``path``,
        ``partitionValues``, ``size``, ``modificationTime``, ``stats``, ``deletionVector``, ...).

        Lazy, but the first call runs the state reconstruction (as ``state``).

        Example:
            >>> snap.all_files().select("path", "size").show()
        """
        return self.state_df().where(F.col("add.path").isNotNull()).select("add.*")

    def tombstones(self) -> DataFrame:
        """The unexpired tombstones: one row per ``remove`` action within the table's
        ``delta.deletedFileRetentionDuration``. Lazy, as ``all_files()``.

        Example:
            >>> snap.tombstones().count()
            3
        """
        return self.state_df().where(F.col("remove.path").isNotNull()).select("remove.*")

    @property
    def transactions(self) -> dict[str, int]:
        """The retained ``txn`` actions: application id -> its last committed version.

        Not a plain attribute: the first read runs the state job (the replay of the log on the
        server and one query over it, as for :attr:`state`) unless the state is known already;
        that run is logged at INFO on the ``delta_connect_py`` logger.

        Returns:
            ``{appId: version}``; empty when the table has no transactions.

        Raises:
            DeltaError: as :attr:`state`.

        Example:
            >>> snap.transactions
            {'ingest-job': 41}
        """
        if not self.state_known:
            _log.info(
                "Snapshot.transactions of %s version %d runs the state job",
                self.table.table_root,
                self.version,
            )
        return {txn["appId"]: txn["version"] for txn in self.state.set_transactions}

    @property
    def clustering_columns(self) -> list[str]:
        """The columns a clustered table is clustered by, by logical name (nested ones as
        ``a.b``), as delta-spark's ``DESCRIBE DETAIL`` lists them: from the ``delta.clustering``
        domain metadata of a protocol with the ``clustering`` feature; empty otherwise.

        Runs the state job (as :attr:`transactions`) unless the table is not clustered or the
        state is known already.

        Returns:
            The clustering columns, in clustering order.

        Raises:
            DeltaError: as :attr:`state`.

        Example:
            >>> snap.clustering_columns
            ['event_date', 'payload.kind']
        """
        if not supports_clustering(self.protocol):
            return []
        return clustering_columns(self.state.domain_metadata, self.schema)

    def to_df(self, columns: list[str] | None = None, filter: Filter | None = None) -> DataFrame:
        """The table's rows at this snapshot, as a lazy DataFrame read from its data files.

        Deletion vectors are applied, partition values joined in, and physical column names
        (column mapping) turned into the schema's. With ``filter``, files are pruned by
        partition values and skipped by column statistics where the log proves no row can
        match; the filter is also applied to the rows, so the result is exact.

        Args:
            columns: the columns to return, in this order; None for all.
            filter: a :data:`~delta_connect_py.Filter`: one ``(column, op, value)`` term, a list
                of terms (all must hold), or a list of such lists (any of them).

        Returns:
            The rows (the state job runs first if it has not, to list the files).

        Raises:
            DeltaError: ``DELTA_CONNECT_INVALID_ARGUMENT`` (an unknown column or a malformed
                filter, before any job); ``DELTA_FILE_NOT_FOUND_DETAILED`` (a data file the log
                names is missing); ``DELTA_DELETION_VECTOR_INVALID``.

        Example:
            >>> snap.to_df(["order_id", "qty"], filter=[("region", "=", "EU"), ("qty", ">", 2)])
            DataFrame[order_id: bigint, qty: int]
        """
        return snapshot_to_df(self, columns=columns, filter=filter)

    def unpersist(self) -> None:
        """Release the server-side copy of the reconstructed state.

        The server frees it once no DataFrame refers to it; a later ``state`` or
        ``all_files()`` replays the log again.

        Example:
            >>> snap.unpersist()
        """
        self.__dict__.pop("_state_df", None)
        self.__dict__.pop("_reconstructed", None)

    def describe(self) -> dict[str, Any]:
        """The snapshot as plain values (JSON-ready), as ``delta-connect describe`` prints it.

        Runs the state job if ``state`` is not known yet.

        Returns:
            ``path``, ``version``, ``timestamp``, ``protocol``, ``metadata``, ``properties``,
            ``clusteringColumns`` and ``state`` (delta-spark's ``computedState`` field names).

        Example:
            >>> snap.describe()["state"]["numOfFiles"]
            40
        """
        state = self.state
        return {
            "path": self.table.table_root,
            "version": self.version,
            "timestamp": self.timestamp.isoformat(),
            "protocol": self.protocol.to_action(),
            "metadata": self.metadata.to_action(),
            "properties": self.properties,
            "clusteringColumns": self.clustering_columns,
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


def snapshot_of(
    table: TableLog,
    version: int | None = None,
    *,
    timestamp: datetime | str | None = None,
    snapshot_partitions: int | None = None,
) -> Snapshot:
    """``table`` at ``version``, at the version active at ``timestamp``, or the latest, built
    afresh (``DeltaTable.snapshot`` answers through ``snapshot_cache`` instead): the log listing
    and the protocol/metadata fast path, checked to be readable."""
    listing, version = snapshot_target(table, version, timestamp, snapshot_partitions)
    return build_snapshot(table, table.log_segment(version, listing), listing, snapshot_partitions)


def snapshot_target(
    table: TableLog,
    version: int | None,
    timestamp: datetime | str | None,
    snapshot_partitions: int | None,
    known_version: int = -1,
) -> tuple[LogListing, int | None]:
    """The arguments of a snapshot request checked (before any job), the log listed, and the
    version asked for (None: the latest) with a timestamp resolved against that listing.

    A latest snapshot's listing brings the P&M lines of the commits after ``known_version``
    (the version of a snapshot it may extend; -1: none), which its P&M then need no job for.
    """
    version, timestamp = check_snapshot_arguments(version, timestamp, snapshot_partitions)
    latest = version is None and timestamp is None
    listing = table.list_log(pm_lines_after=known_version if latest else None)
    if timestamp is not None:
        version = table.version_at(timestamp, listing)
    return listing, version


def check_snapshot_arguments(
    version: int | None, timestamp: datetime | str | None, snapshot_partitions: int | None
) -> tuple[int | None, datetime | str | None]:
    """A snapshot request's arguments checked (no job): the version and timestamp to use."""
    version, timestamp = arguments.version_or_timestamp("snapshot", version, timestamp)
    arguments.optional_integer(
        "snapshot",
        "snapshot_partitions",
        snapshot_partitions,
        minimum=1,
        maximum=MAX_SNAPSHOT_PARTITIONS,
        what="a number of partitions for the state",
    )
    return version, timestamp


#: More partitions than this is a mistake (a million tasks ran for minutes for a few files).
MAX_SNAPSHOT_PARTITIONS = 10_000


def check_snapshot_readable(table: TableLog, pm: ProtocolAndMetadata, version: int) -> None:
    """Refuse a snapshot at ``version`` this library cannot read: its protocol (delta-spark's
    ``protocolRead``), a table schema that is not one, or metadata turning on a feature the
    protocol does not list (delta-spark's ``assertTableFeaturesMatchMetadata``)."""
    check_readable(pm.protocol, table.table_root, version)
    check_schema(pm.metadata, metadata_source(table, pm), table.log_dir, version)
    check_features_listed(pm.protocol, pm.metadata, table.table_root, version)


def metadata_source(table: TableLog, pm: ProtocolAndMetadata) -> str:
    """Where ``pm`` was read: a version checksum file, else the table's log."""
    return table.log_dir if pm.source == "log" else pm.source


def build_snapshot(
    table: TableLog, segment: LogSegment, listing: LogListing, snapshot_partitions: int | None
) -> Snapshot:
    """A new snapshot of ``segment`` (chosen from ``listing``), checked to be readable."""
    segment, pm = table.loaded_segment(segment, listing)
    check_snapshot_readable(table, pm, segment.version)
    return Snapshot(
        table=table,
        segment=segment,
        protocol_and_metadata=pm,
        snapshot_partitions=snapshot_partitions,
        created_at_ms=now_ms(),
    )


def _commits_after(segment: LogSegment, version: int) -> LogSegment:
    """``segment`` reduced to its commits after ``version`` (no checkpoint)."""
    return dataclasses.replace(
        segment, checkpoint=None, commits=tuple(c for c in segment.commits if c.version > version)
    )


def now_ms() -> int:
    return int(time.time() * 1000)
