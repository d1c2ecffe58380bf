"""The replay plan: a segment's actions reconstructed into the table state on the server.

Responsibility: delta-spark's ``stateReconstruction`` as Spark Connect DataFrame operations. The
commits' actions (with the checkpoint's non-file actions) are repartitioned by a file-path key and
replayed partition-wise with ``mapInArrow`` (``worker.replay.replay_partition``); that result is
kept on the server as a local checkpoint. A checkpoint's file action whose file key no replayed
action has is already reconciled, so it joins the state as it is, read straight from the checkpoint
parquet (Delta Kernel's plan): the checkpoint, usually most of the state, is never shuffled nor sent
through Python, and queries over the state read only the columns they use. A small checkpoint
without sidecars (``MAX_REPLAYED_CHECKPOINT_BYTES``) is replayed whole with its commits instead,
as a log without a checkpoint is: one job then replays and counts the state. ``update`` replays the
commits since the segment's replay (starting from the earlier state's non-file actions) into a
second, small replay kept beside the first, whose file actions it supersedes by file key at query
time: the large first replay is neither replayed nor copied again until the second outgrows
``MAX_UPDATE_BYTES``. For a checkpoint writer the rows can also carry the typed stats
(``add.stats_parsed``) the checkpoint was written with.

After updates, the state needs no query of its own. An update's replay job also observes the
state's aggregations over the replayed rows (``plans.state.layer_aggregations``: Spark's
observed metrics, returned with the job). The sums of the rows outside ``updates`` that an
earlier state query counted (``base_sums``: the checkpoint's rows and the first replay's) still
stand when no key of ``updates`` is in the checkpoint or the first replay: that is one small job
probing hashes of their file names (``key_index`` and ``replayed_index``, kept on the
server), for the hashes of the updates' file names that their replay observed (the first
replay's too, when it was small: then its names are checked on the client, no job). An append
adds new files, so a polling loop over an appended table takes that path. A commit that
removes or rewrites an earlier file makes the full query run (so do tombstones expiring); its
sums leave out the rows that ``updates`` supersedes, so later updates probe only the keys
``updates`` has gained since (``counted_updates``).

Invariants: the partition key is a function of the file name that is equal for any two paths whose
canonical keys are equal (the lower-cased last path segment: canonicalization only changes
scheme/authority and the case of hex escapes), so all actions of one file key meet in one partition;
every non-file action meets in one partition. A checkpoint file action is dropped exactly when a
replayed action (every commit key's newest action, tombstones included) has its file key
(``plans.file_keys``: canonical path and DV id, equal to the worker's key; or, when every replayed
key is a plain path without a DV, the path as written, see ``_JoinKeys``): a commit's action always
supersedes the checkpoint's. Likewise a file action of the first replay is dropped exactly when the
updates' replay has its file key. The join on keys runs on the checkpoint rows as read, before they
are conformed to the protocol's struct types, so Spark can still prune the structs' fields. Like
Delta Kernel, this relies on the protocol's rule that a checkpoint holds reconciled state (at most
one action per file key): duplicates inside one checkpoint are not removed. The number of partitions
never changes the result. Every file the checkpoint is read from is checked to lie in this table's
``_delta_log`` (``DELTA_LOG_FILE_OUTSIDE_TABLE``) before any state is returned; commit rows are
checked by the replay worker. Tombstone and transaction retention are applied last, to replayed and
checkpoint rows alike, so an update whose commit lengthens a retention finds what the earlier replay
would otherwise have dropped. ``base_sums`` are the sums, under one retention horizon, of the
state's rows outside ``updates`` (the checkpoint rows no replayed key has, and the rows of
``replayed`` no key of ``updates`` has) when they were counted, ``updates`` then being
``counted_updates``. A replay keeps every key it saw, so ``updates`` only ever gains keys, and the
sums stay exact while every key of ``updates`` that ``counted_updates`` has not (compared as file
keys) misses the file name hashes of the checkpoint and of ``replayed``; a fold adds the folded
replay's observed sums to them after probing its keys so, and drops them when a key hits.
``update_hashes`` and ``replayed_hashes``, where known, are exactly the file name hashes of the
file actions of ``updates`` and ``replayed``.
``observed`` is the observation of the newest replay, under the retention of the snapshot that
replayed it, which is this one. Equal file keys have equal file name hashes (see the partition
key), so such a key always hits; a hit for any other reason only costs the full query.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from delta_connect_py.errors import LogFileOutsideTableError
from delta_connect_py.plans.checkpoint_strings import any_not_utf8
from delta_connect_py.plans.file_keys import (
    action_path,
    file_key_columns,
    has_deletion_vector,
    is_file_action,
    is_plain_path,
    plain_file_key_column,
)
from delta_connect_py.plans.loading import conformed_state_columns
from delta_connect_py.plans.spark import (
    INTERPRETED_HINTS,
    all_nullable,
    collect,
    map_in_arrow,
    materialize,
    materialize_observed,
    spark_schema,
    struct_fields,
    union_all,
    with_stated_schema,
)
from delta_connect_py.plans.state import (
    NOT_UTF8_ROWS,
    BaseSums,
    ObservedLayer,
    file_action_columns,
    layer_aggregations,
)
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.worker.replay import ReplayConfig, first_foreign_source, replay_partition

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame

    from delta_connect_py.plans.loading import CheckpointFrames, SegmentActions

DEFAULT_SNAPSHOT_PARTITIONS = 50
#: Input bytes one replay partition should handle before another is worth its overhead.
BYTES_PER_PARTITION = 16 << 20

#: Up to this many commit bytes after a checkpoint, the replayed keys (about a third of the
#: bytes) are broadcast to every task rather than both sides shuffled.
BROADCAST_COMMIT_BYTES = 256 << 20

STATE_SPARK_SCHEMA = spark_schema(STATE_SCHEMA)
STATE_COLUMNS = [field.name for field in STATE_SPARK_SCHEMA.fields]
_PATH = "_file_path_key"
_DV_ID = "_file_dv_key"
_KEY_COLUMNS = [_PATH, _DV_ID]
_NAME_HASH = "_file_name_hash"
#: See ``ReconstructedState.rows``.
PARSED_STATS_COLUMN = "_checkpoint_stats_parsed"


def partition_key() -> Column:
    return F.lower(F.substring_index(action_path(), "/", -1))


def _file_name_hash() -> Column:
    """A 64-bit hash of the partition key: equal for equal file keys (see the module)."""
    return F.xxhash64(partition_key()).alias(_NAME_HASH)


def _file_name_hashes(rows: DataFrame) -> DataFrame:
    """``_file_name_hash`` of every file action of ``rows``."""
    return rows.where(is_file_action()).select(_file_name_hash())


def partitions_for(input_bytes: int, maximum: int = DEFAULT_SNAPSHOT_PARTITIONS) -> int:
    """Fewer partitions for small logs: one per ``BYTES_PER_PARTITION``, at most ``maximum``."""
    return max(1, min(maximum, math.ceil(input_bytes / BYTES_PER_PARTITION)))


#: What a replay reads: the state actions of each row (conformed to the protocol's types, as
#: every reader of the log does), its version and the file it was read from.
REPLAY_INPUT_SCHEMA = StructType(
    [
        StructField(field.name, all_nullable(field.dataType), True)
        for field in [
            *STATE_SPARK_SCHEMA.fields,
            StructField(VERSION_COLUMN, LongType()),
            StructField(FILE_COLUMN, StringType()),
        ]
    ]
)


def replay(
    actions: DataFrame, config: ReplayConfig, num_partitions: int, small_input: bool = False
) -> DataFrame:
    """The replayed state of ``actions``: one action per row, as a checkpoint holds it.

    Into one partition, rows read from a ``small_input`` (one partition's worth of bytes) are
    coalesced rather than shuffled: every key meets in it all the same, and without an
    exchange the replay is one Spark job instead of two (a small table's replay, cold or after
    a new commit). A large input is still read by many tasks and shuffled.
    """
    # Stated: mapInArrow needs its input's column names, which pyspark would otherwise ask
    # the server for (an analysis of the whole read, 30-170 ms on S).
    actions = with_stated_schema(actions, REPLAY_INPUT_SCHEMA)
    partitioned = (
        actions.coalesce(1)
        if num_partitions == 1 and small_input
        else actions.repartition(num_partitions, partition_key())
    )
    return map_in_arrow(partitioned, partial(replay_partition, config), STATE_SPARK_SCHEMA)


@dataclasses.dataclass(frozen=True)
class ReconstructedState:
    """A snapshot's state as kept on the server: what was replayed, and the checkpoint under it.

    ``replayed`` holds every action a replay left (tombstones and txns of any age included),
    materialized; ``checkpoint`` is the checkpoint the replay started from, whose file actions
    join the state at query time (None without one, or when a small checkpoint's rows were all
    replayed: then ``replayed`` is the whole state).
    After updates (``reconstruct_after``), ``updates`` holds the replay of every commit since,
    kept likewise: then it holds every non-file action, and a file action of ``replayed`` counts
    only when ``updates`` has no action with its file key. ``rows`` combines them lazily.
    """

    checkpoint: CheckpointFrames | None
    replayed: DataFrame
    table_root: str
    #: Bytes of the commits replayed into ``replayed`` and ``updates``.
    replayed_bytes: int
    #: Every replayed file action has a plain path and no deletion vector (see ``_JoinKeys``);
    #: None until checked (``with_keys_checked``, or folded into the first state query).
    plain_keys: bool | None = None
    updates: DataFrame | None = None
    #: Bytes of the commits replayed into ``updates``.
    update_bytes: int = 0
    #: Sums of the rows outside ``updates`` when the state was last counted in full, plus the
    #: updates folded since; None until then (see the module).
    base_sums: BaseSums | None = None
    #: Hashes of the checkpoint's file names, kept on the server (``with_key_indexes``).
    key_index: DataFrame | None = None
    #: Hashes of the file names of ``replayed``, kept likewise.
    replayed_index: DataFrame | None = None
    #: The state's aggregations observed on the newest replay, when an update made it.
    observed: ObservedLayer | None = None
    #: Whether ``observed``'s replay was folded into ``replayed`` (its sums, if any, are in
    #: ``base_sums``).
    observed_in_base: bool = False
    #: The ``updates`` the full query that counted ``base_sums`` ran with, whose keys the sums
    #: already leave out; None when it ran without (or they were folded since).
    counted_updates: DataFrame | None = None
    #: The file name hashes of every file action of ``updates``, observed by its replay: the
    #: probe then needs no job to find them (``probed``); None when unknown or more than
    #: ``MAX_OBSERVED_HASHES``.
    update_hashes: tuple[int, ...] | None = None
    #: Likewise the file name hashes of every file action of ``replayed``, observed by the
    #: replay that made it when that was one partition: then ``probed`` checks them on the
    #: client and needs no ``replayed_index``.
    replayed_hashes: frozenset[int] | None = None

    def with_keys_checked(self) -> ReconstructedState:
        """This state with ``plain_keys`` known (one small job over the replay when unknown)."""
        if self.plain_keys is not None:
            return self
        files = union_all(self._layers()).where(is_file_action())
        found = collect(files.agg(F.max(_key_not_plain()).alias("found")))[0]["found"]
        return dataclasses.replace(self, plain_keys=not found)  # no file actions: plain

    def rows(self, config: ReplayConfig, stats_parsed: StructType | None = None) -> DataFrame:
        """The state: one action per row as a checkpoint holds it, tombstones retained per
        ``config``.

        With ``stats_parsed`` (a checkpoint writer's type of ``add.stats_parsed``), a last column
        ``PARSED_STATS_COLUMN`` holds the ``add.stats_parsed`` of rows read from a checkpoint
        that wrote exactly that type, else null: the typed stats of a live file read from the
        previous checkpoint need not be parsed again.
        """
        replayed = self._replayed_rows()
        if stats_parsed is not None:  # replayed adds come from commits: nothing typed to reuse
            replayed = replayed.withColumn(PARSED_STATS_COLUMN, F.lit(None).cast(stats_parsed))
        untouched = self._checkpoint_untouched(stats_parsed)
        return union_all([*untouched, replayed]).where(retained(config))

    def carries_stats_parsed(self, stats_parsed: StructType) -> bool:
        """Whether the rows read from the checkpoint carry typed stats of type ``stats_parsed``
        (see ``rows``): then only the replayed adds' stats are left to parse."""
        if self.checkpoint is None:
            return False
        return all(_writes_stats_parsed(frame, stats_parsed) for frame in self.checkpoint.frames)

    def file_actions(self, config: ReplayConfig, check_plain_keys: bool = False) -> DataFrame:
        """Every file action of the state as ``plans.state.file_action_columns`` (tombstones
        past retention are there, not counted).

        ``check_plain_keys``, for a state that assumes plain keys before they are known, marks
        each replayed file action that breaks the assumption (``with_keys_checked``'s job,
        folded into the state query: L, one job fewer).
        """
        tombstone_retained = retained(config)
        unchecked = F.lit(False)
        # Unfiltered by retention: every replayed key counts for the check, expired tombstones'
        # too. A replayed row that ``updates`` drops has the same path as the one dropping it,
        # which is checked (and a row with a deletion vector has no plain key to be dropped by).
        checked = _key_not_plain() if check_plain_keys else unchecked
        first, updates = self._replayed_parts()
        replayed = [
            rows.where(is_file_action()).select(
                *file_action_columns(tombstone_retained, checked, in_base=rows is first)
            )
            for rows in (first, updates)
            if rows is not None
        ]
        untouched = [
            frame.select(*file_action_columns(tombstone_retained, unchecked, in_base=True))
            for frame in self._checkpoint_untouched()
        ]
        return union_all([*untouched, *replayed])

    def carries_base_sums(self, config: ReplayConfig) -> bool:
        """Whether the state may be counted as ``base_sums`` plus ``observed``, given that the
        keys of ``updates`` miss the rows the sums stand for (``updates_miss_base`` checks)."""
        return (
            self.observed is not None
            and self.base_sums is not None
            and self.base_sums.holds_at(config.min_file_retention_timestamp)
        )

    def probed(self) -> tuple[ReconstructedState, bool]:
        """This state with its key indexes built (``with_key_indexes``), and whether the keys
        of ``updates`` miss the rows of ``base_sums`` (``updates_miss_base``).

        With the updates' file name hashes known (``update_hashes``), an index built now
        observes its own hits in the job that builds it, and the indexes built before are
        probed with a filter on those hashes: one job with no exchange, where the join with the
        broadcast updates ran three (a small table after a new commit: 4 jobs down to 1). With
        ``replayed_hashes`` known too, ``replayed`` is probed on the client (no job at all
        without a checkpoint).
        """
        hashes = self._uncounted_update_hashes()
        if hashes is None:
            state = self.with_key_indexes()
            return state, state.updates_miss_base()
        state = self
        to_probe: list[DataFrame] = []
        hit = False
        if state.checkpoint is not None:
            frames = state.checkpoint.frames
            key_index, hit, probe = _index_and_hits(
                state.key_index, lambda: union_all([_file_name_hashes(f) for f in frames]), hashes
            )
            state = dataclasses.replace(state, key_index=key_index)
            to_probe += [probe] if probe is not None else []
        if state.replayed_hashes is not None:
            hit = hit or not state.replayed_hashes.isdisjoint(hashes)
        else:
            replayed = state.replayed
            replayed_index, found, probe = _index_and_hits(
                state.replayed_index, lambda: _file_name_hashes(replayed), hashes, reads_files=False
            )
            state = dataclasses.replace(state, replayed_index=replayed_index)
            hit = hit or found
            to_probe += [probe] if probe is not None else []
        if not hit and hashes and to_probe:
            hit = _any_hash_among(union_all(to_probe), hashes)
        return state, not hit

    def _uncounted_update_hashes(self) -> tuple[int, ...] | None:
        """The file name hashes of ``_uncounted_updates()`` when known without a job: empty
        without ``updates``; None when ``counted_updates`` must be left out (by exact key)."""
        if self.updates is None:
            return ()
        if self.counted_updates is not None:
            return None
        return self.update_hashes

    def with_key_indexes(self) -> ReconstructedState:
        """This state with ``key_index`` and ``replayed_index`` kept on the server (a job over
        the checkpoint's paths, and one over the first replay's, the first time; later states
        of a chain of updates keep them)."""
        state = self
        if state.key_index is None and state.checkpoint is not None:
            hashes = [_file_name_hashes(frame) for frame in state.checkpoint.frames]
            state = dataclasses.replace(state, key_index=materialize(union_all(hashes)))
        if state.replayed_index is None:
            # Read from the replay kept on the server: no log file is read.
            replayed_index = materialize(_file_name_hashes(state.replayed), reads_files=False)
            state = dataclasses.replace(state, replayed_index=replayed_index)
        return state

    def updates_miss_base(self) -> bool:
        """Whether no file name of ``updates`` is among the checkpoint's and ``replayed``'s
        (``with_key_indexes`` must have built their indexes), leaving out the file keys of
        ``counted_updates``, whose rows ``base_sums`` already leave out: one small job. True
        without ``updates``."""
        if self.updates is None:
            return True
        assert self.replayed_index is not None
        assert self.checkpoint is None or self.key_index is not None
        indexes = [index for index in (self.key_index, self.replayed_index) if index is not None]
        keys = F.broadcast(_file_name_hashes(self._uncounted_updates()))
        hits = union_all(indexes).join(keys, on=_NAME_HASH, how="left_semi")
        # A count is one job; limit(1) scans partitions in rounds when nothing hits (L: medians
        # 0.18 against 0.26 s).
        count: int = collect(hits.agg(F.count(F.lit(1)).alias("hits")))[0]["hits"]
        return count == 0

    def _uncounted_updates(self) -> DataFrame:
        """The file actions of ``updates`` whose file keys ``counted_updates`` has not (exact
        keys: a file name alone may stand for another file)."""
        assert self.updates is not None
        if self.counted_updates is None:
            return self.updates.where(is_file_action())
        join_keys = self._exact_join_keys()
        counted = join_keys.of_replayed(self.counted_updates, self.update_bytes)
        return _without_keys(self.updates, counted, join_keys)

    def _exact_join_keys(self) -> _JoinKeys:
        """The state's join keys once known (plain ones spare canonicalizing paths), else
        canonical keys, exact whatever the keys are."""
        return _JoinKeys(self.table_root, bool(self.plain_keys))

    def _checkpoint_untouched(self, stats_parsed: StructType | None = None) -> list[DataFrame]:
        """The checkpoint's file actions no replayed action has the key of (see the module)."""
        if self.checkpoint is None:
            return []
        join_keys = self._join_keys()
        keys = join_keys.of_replayed(union_all(self._layers()), self.replayed_bytes)
        return [
            _unreplayed_files(frame, keys, join_keys, stats_parsed)
            for frame in self.checkpoint.frames
        ]

    def non_file_rows(self, config: ReplayConfig) -> DataFrame:
        """The state's rows holding neither an add nor a remove, retained per ``config``: all
        are in the newest replay (the checkpoint's were replayed with the commits, and an
        update's with the earlier state's)."""
        return self._layers()[-1].where(~is_file_action()).where(retained(config))

    def _layers(self) -> list[DataFrame]:
        """The replays kept on the server, oldest first."""
        return [self.replayed] if self.updates is None else [self.replayed, self.updates]

    def _join_keys(self) -> _JoinKeys:
        if self.plain_keys is None:
            raise ValueError("the join keys are unknown: call with_keys_checked() first")
        return _JoinKeys(self.table_root, self.plain_keys)

    def _replayed_rows(self, join_keys: _JoinKeys | None = None) -> DataFrame:
        """Every replayed action of the state: all of ``updates``, with the file actions of
        ``replayed`` whose key it has not (matched on ``join_keys``, default the state's)."""
        first, updates = self._replayed_parts(join_keys)
        return first if updates is None else first.unionByName(updates)

    def _replayed_parts(
        self, join_keys: _JoinKeys | None = None
    ) -> tuple[DataFrame, DataFrame | None]:
        """``_replayed_rows`` as the rows kept of ``replayed``, and ``updates``."""
        if self.updates is None:
            return self.replayed, None
        join_keys = join_keys or self._join_keys()
        keys = join_keys.of_replayed(self.updates, self.update_bytes)
        return _without_keys(self.replayed, keys, join_keys), self.updates


#: Up to this many distinct file names, an update's replay observes their hashes (see
#: ``ReconstructedState.probed``); a literal list of them filters the key indexes.
MAX_OBSERVED_HASHES = 1000


def _index_and_hits(
    index: DataFrame | None,
    hashes_frame: Callable[[], DataFrame],
    hashes: tuple[int, ...],
    reads_files: bool = True,
) -> tuple[DataFrame, bool, DataFrame | None]:
    """A key index (``index``, else ``hashes_frame()`` kept now, observing its hits among
    ``hashes``), whether a hit was observed, and the index when it still has to be probed (one
    built before, or one whose build returned no metrics)."""
    if index is not None:
        return index, False, index
    built, found = _index_observing_hits(hashes_frame(), hashes, reads_files=reads_files)
    return built, bool(found), built if found is None else None


def _index_observing_hits(
    hashes_frame: DataFrame, hashes: tuple[int, ...], reads_files: bool = True
) -> tuple[DataFrame, bool | None]:
    """``hashes_frame`` kept on the server as a key index, and whether it holds one of
    ``hashes``, observed by the same job (None when the server returned no metrics); see
    ``materialize`` for ``reads_files``."""
    if not hashes:
        return materialize(hashes_frame, reads_files=reads_files), False
    found = F.max(F.col(_NAME_HASH).isin(list(hashes)))
    index, metrics = materialize_observed(
        hashes_frame, [F.coalesce(found, F.lit(False)).alias("hit")], reads_files=reads_files
    )
    if metrics is None:
        return index, None
    return index, bool(metrics["hit"])


def _any_hash_among(index: DataFrame, hashes: tuple[int, ...]) -> bool:
    """Whether ``index`` (key indexes kept on the server) holds one of ``hashes``: one job, a
    filtered scan with no exchange; what it returns is bounded by the hashes' matches."""
    matches = index.where(F.col(_NAME_HASH).isin(list(hashes))).select(_NAME_HASH)
    return bool(collect(matches, reads_files=False))


def _without_keys(rows: DataFrame, keys: DataFrame, join_keys: _JoinKeys) -> DataFrame:
    """The file actions of ``rows`` whose file key is not among ``keys`` (``join_keys``'
    columns)."""
    return (
        rows.where(is_file_action())
        .select(*STATE_COLUMNS, *join_keys.columns())
        .join(keys, on=join_keys.names, how="left_anti")
        .drop(*join_keys.names)
    )


def reconstruct(
    actions: SegmentActions, config: ReplayConfig, num_partitions: int | None = None
) -> ReconstructedState:
    """The state of a segment (runs the replay job now; the rest stays lazy)."""
    if actions.checkpoint is not None:
        for frame in actions.checkpoint.frames:
            check_read_from_log(frame, config.log_dir)
        # Its rows replayed (all of them, or its non-file actions) are tested by the workers.
        config = dataclasses.replace(
            config,
            required_fields=actions.checkpoint.required_fields(),
            checkpoint_version=actions.checkpoint.version,
        )
    if actions.checkpoint is not None and not _replays_checkpoint_files(actions):
        return _reconstructed_over_checkpoint(actions, actions.checkpoint, config, num_partitions)
    # The replay's rows are the whole state (no checkpoint, or a small one replayed with its
    # commits): the job that replays them also counts them (observed metrics), and
    # computedState needs no query of its own (a 10-file table: 2 of 6 jobs, about 0.5 s; a
    # checkpointed 10,000-file table: the state query's 3 jobs).
    to_replay = [actions.checkpoint.all_rows()] if actions.checkpoint is not None else []
    to_replay += [actions.commits] if actions.commits is not None else []
    replayed_bytes = actions.commit_bytes + actions.checkpoint_bytes
    partitions = num_partitions or partitions_for(replayed_bytes)
    small = replayed_bytes <= BYTES_PER_PARTITION
    replayed, observed, hashes = _replayed_observed(
        to_replay,
        config,
        partitions,
        small,
        small,
        actions.reads_with_spark_sources,
        check_strings=actions.checkpoint is not None,
    )
    if actions.checkpoint is not None:
        if observed is None:  # not counted: the checkpoint's strings are tested by a job
            actions.checkpoint.check_readable()
        elif observed.not_utf8_rows:
            raise actions.checkpoint.not_utf8_error()
    return ReconstructedState(
        checkpoint=None,
        replayed=replayed,
        table_root=config.table_root,
        replayed_bytes=replayed_bytes,
        plain_keys=False,
        base_sums=None if observed is None else observed.sums,
        observed=observed,
        observed_in_base=True,
        replayed_hashes=None if hashes is None else frozenset(hashes),
    )


#: Up to this many checkpoint bytes (a segment of one replay partition in all), the
#: checkpoint's file actions are replayed with the commits instead of joined to the replay by
#: the state query: one job instead of four for a 10,000-file table (a 1.6 MB checkpoint).
#: Larger ones stay out of the replay, whose single Python task would then outlast the
#: query's parallel column reads.
MAX_REPLAYED_CHECKPOINT_BYTES = 4 << 20


def _replays_checkpoint_files(actions: SegmentActions) -> bool:
    """Whether the checkpoint is small enough to replay whole. One with sidecars never is:
    ``checkpoint_bytes`` counts its top-level file only, which says nothing of the sidecars
    holding its file actions."""
    assert actions.checkpoint is not None
    return (
        not actions.checkpoint.has_sidecars
        and actions.checkpoint_bytes <= MAX_REPLAYED_CHECKPOINT_BYTES
        and actions.checkpoint_bytes + actions.commit_bytes <= BYTES_PER_PARTITION
    )


def _reconstructed_over_checkpoint(
    actions: SegmentActions,
    checkpoint: CheckpointFrames,
    config: ReplayConfig,
    num_partitions: int | None,
) -> ReconstructedState:
    """The commits replayed with the checkpoint's non-file rows; the checkpoint's file actions
    join the state at query time (see the module)."""
    to_replay = [checkpoint.non_file_rows()]
    to_replay += [actions.commits] if actions.commits is not None else []
    partitions = num_partitions or partitions_for(actions.commit_bytes)
    # A small replay's file names are observed as it runs (see ``probed``).
    observe_hashes = actions.commit_bytes <= BYTES_PER_PARTITION
    small = actions.commit_bytes + actions.checkpoint_bytes <= BYTES_PER_PARTITION
    replayed, hashes = _replayed(to_replay, config, partitions, observe_hashes, small)
    return ReconstructedState(
        checkpoint=checkpoint,
        replayed=replayed,
        table_root=config.table_root,
        replayed_bytes=actions.commit_bytes,
        replayed_hashes=None if hashes is None else frozenset(hashes),
    )


#: Commit bytes an update's replay (``ReconstructedState.updates``) may hold before it is
#: folded into the state's first replay. Each update replays them all again, and each fold
#: rewrites the first replay: L, 12 updates of one 7.4 MB commit each, update then
#: computedState, medians 1.23-1.32 s with 32 MB, against 1.37-1.40 s with 16 MB, 1.30-1.48 s
#: with 64 MB, and 1.56 s folding every update.
MAX_UPDATE_BYTES = 32 << 20


def reconstruct_after(
    previous: ReconstructedState,
    previous_commit: str,
    previous_version: int,
    actions: SegmentActions,
    config: ReplayConfig,
    num_partitions: int | None = None,
) -> ReconstructedState:
    """The state after ``actions.commits`` applied to an earlier snapshot's state.

    The new commits are replayed together with the earlier state's ``updates`` (or its non-file
    actions), those rows attributed to its newest commit file ``previous_commit`` so the source
    check passes: the result is the new state's ``updates``, and the first replay and the
    checkpoint under it stay as they were. Leaving the first replay's rows in place saves
    rewriting them, which cost more than replaying the small ``updates`` again (L, one commit of
    10k adds per update, ``update()`` then computedState: medians 1.48-1.51 s, against
    1.65-1.76 s rewriting). Queries drop the first replay's rows that ``updates`` supersedes
    with a small broadcast join each time. The replay's job also observes the state's
    aggregations over its rows (``observed``). Once ``updates`` holds more than
    ``MAX_UPDATE_BYTES`` of commits, it is folded into the first replay.
    """
    assert actions.commits is not None
    carried = previous.updates
    if carried is None:
        carried = previous.replayed.where(~is_file_action())
    carried_rows = carried.select(
        *STATE_COLUMNS,
        F.lit(previous_version).cast("long").alias(VERSION_COLUMN),
        F.lit(previous_commit).alias(FILE_COLUMN),
    )
    update_bytes = previous.update_bytes + actions.commit_bytes
    partitions = num_partitions or partitions_for(update_bytes)
    # The carried rows are the small ``updates``, or a scan of the first replay.
    small = update_bytes <= BYTES_PER_PARTITION and (
        previous.updates is not None or previous.replayed_bytes <= BYTES_PER_PARTITION
    )
    updates, observed, hashes = _replayed_observed(
        [carried_rows, actions.commits],
        config,
        partitions,
        True,
        small,
        actions.reads_with_spark_sources,
    )
    updated = dataclasses.replace(
        previous,
        updates=updates,
        update_bytes=update_bytes,
        replayed_bytes=previous.replayed_bytes + actions.commit_bytes,
        plain_keys=_plain_keys_after(previous, observed),
        observed=observed,
        observed_in_base=False,
        update_hashes=hashes,
    )
    if update_bytes <= MAX_UPDATE_BYTES:
        return updated
    return folded(updated, config, num_partitions)


def _plain_keys_after(previous: ReconstructedState, observed: ObservedLayer | None) -> bool | None:
    """``plain_keys`` once ``updates`` is replayed: a key that is not plain stays in the state
    (whatever drops it is not plain either); the new keys are as observed, else unknown."""
    if previous.checkpoint is None or previous.plain_keys is False:
        return False
    if observed is None:
        return None
    if observed.keys_not_plain:
        return False
    return previous.plain_keys


def folded(
    state: ReconstructedState, config: ReplayConfig, num_partitions: int | None
) -> ReconstructedState:
    """``state`` with its ``updates`` folded into one replay, kept on the server; its
    ``base_sums`` then count the folded rows too, when their keys miss the earlier ones (a
    probe), else they are dropped.

    The union has both replays' partitions: coalesced to what a new snapshot's replay of as
    many bytes would have, so that a polling loop's state does not split into ever more
    partitions (S: a query over the state 0.04 s fresh, 0.35 s after 40 updates).
    """
    base_sums = None
    if state.carries_base_sums(config) and not state.observed_in_base:
        state, missed = state.probed()
        if missed:
            assert state.base_sums is not None and state.observed is not None
            base_sums = state.base_sums.plus(state.observed.sums)
    # Plain keys spare canonicalizing both replays' paths (L, the fold's job 0.42-0.69 s
    # against 0.65-1.15 s).
    rows = state._replayed_rows(state._exact_join_keys())
    partitions = num_partitions or partitions_for(state.replayed_bytes)
    return dataclasses.replace(
        state,
        replayed=materialize(rows.coalesce(partitions)),
        updates=None,
        update_bytes=0,
        base_sums=base_sums,
        observed_in_base=True,
        counted_updates=None,
        replayed_index=_folded_index(state) if base_sums is not None else None,
        update_hashes=None,
        replayed_hashes=_folded_hashes(state),
    )


def _folded_hashes(state: ReconstructedState) -> frozenset[int] | None:
    """``replayed_hashes`` once ``updates`` is folded into ``replayed``: both replays' file
    names (a replay keeps every key it saw), when both are known and within the bound."""
    if state.replayed_hashes is None or state.update_hashes is None:
        return None
    hashes = state.replayed_hashes.union(state.update_hashes)
    return hashes if len(hashes) <= MAX_OBSERVED_HASHES else None


def _folded_index(state: ReconstructedState) -> DataFrame | None:
    """``replayed_index`` once ``updates`` is folded into ``replayed``: a replay keeps every
    key it saw (tombstones included), so the folded replay's keys are both replays' keys."""
    if state.replayed_index is None:  # never built (``replayed_hashes`` served): built on demand
        return None
    assert state.updates is not None
    return materialize(state.replayed_index.unionByName(_file_name_hashes(state.updates)))


def _key_not_plain() -> Column:
    """Whether the row's file key is not plain (see ``_JoinKeys``)."""
    return ~is_plain_path(action_path()) | has_deletion_vector()


def _replayed(
    to_replay: list[DataFrame],
    config: ReplayConfig,
    partitions: int,
    observe_hashes: bool,
    small_input: bool,
) -> tuple[DataFrame, tuple[int, ...] | None]:
    """The replay of ``to_replay``, run now and kept on the server, every tombstone and txn kept
    (retention is applied by ``ReconstructedState``'s queries); with ``observe_hashes``, also
    its file actions' file name hashes, observed by the same job (see ``_replayed_observed``)."""
    replay_rows = _replay_keeping_all(to_replay, config, partitions, small_input)
    if not observe_hashes:
        return materialize(replay_rows, INTERPRETED_HINTS), None
    replayed, metrics = materialize_observed(
        replay_rows, [_file_name_hash_aggregation()], INTERPRETED_HINTS
    )
    return replayed, None if metrics is None else _observed_hashes(metrics)


def _replay_keeping_all(
    to_replay: list[DataFrame], config: ReplayConfig, partitions: int, small_input: bool
) -> DataFrame:
    """The replay of ``to_replay`` with every tombstone and txn kept (retention is applied by
    ``ReconstructedState``'s queries)."""
    keep_all = dataclasses.replace(
        config, min_file_retention_timestamp=None, min_set_transaction_retention_timestamp=None
    )
    return replay(union_all(to_replay), keep_all, partitions, small_input)


def _replayed_observed(
    to_replay: list[DataFrame],
    config: ReplayConfig,
    partitions: int,
    observe_hashes: bool,
    small_input: bool,
    reads_files: bool = True,
    check_strings: bool = False,
) -> tuple[DataFrame, ObservedLayer | None, tuple[int, ...] | None]:
    """``_replayed``, and the state's aggregations over its rows under ``config``'s retention,
    observed by the same job (None when the server returned none); with ``observe_hashes``,
    also the file name hashes of its file actions (retained or not), when there are at most
    ``MAX_OBSERVED_HASHES`` (else None). ``reads_files``: whether the rows are read through
    Spark's file sources (``plans.spark.materialize``). With ``check_strings`` (a checkpoint's
    rows replayed: Spark reads their strings' bytes as they are), also how many kept rows hold
    a string that is not UTF-8 (``ObservedLayer.not_utf8_rows``)."""
    aggregations = layer_aggregations(retained(config), F.when(is_file_action(), _key_not_plain()))
    if observe_hashes:
        aggregations.append(_file_name_hash_aggregation())
    if check_strings:
        aggregations.append(_not_utf8_row_count())
    replayed, metrics = materialize_observed(
        _replay_keeping_all(to_replay, config, partitions, small_input),
        aggregations,
        INTERPRETED_HINTS,
        reads_files,
    )
    if metrics is None:
        return replayed, None, None
    observed = ObservedLayer.from_metrics(metrics, config.min_file_retention_timestamp)
    return replayed, observed, _observed_hashes(metrics) if observe_hashes else None


_OBSERVED_HASHES = "fileNameHashes"


def _not_utf8_row_count() -> Column:
    """How many replayed rows hold a string that is not UTF-8 (``plans.checkpoint_strings``;
    only a checkpoint's can, commit lines are checked as they are read). A row holds one
    action: only its column is tested (the replay runs interpreted, node by node)."""

    def test(name: str) -> Column:
        found = any_not_utf8({name: (F.col(name), STATE_SPARK_SCHEMA[name].dataType)})
        assert found is not None  # every state column holds strings
        return found

    by_action = F.when(F.col("add").isNotNull(), test("add"))
    for name in STATE_COLUMNS:
        if name != "add":
            by_action = by_action.when(F.col(name).isNotNull(), test(name))
    return F.count_if(by_action).alias(NOT_UTF8_ROWS)


def _file_name_hash_aggregation() -> Column:
    """The file name hashes of the rows' file actions, at most one more than
    ``MAX_OBSERVED_HASHES`` (to tell a full list from a cut one); sorted, as observed metrics
    must be deterministic. Joined into one comma-separated string: a Spark 4.0 server cannot
    return an array in observed metrics (``Unsupported component type ... in arrays``)."""
    names = F.sort_array(F.collect_set(F.when(is_file_action(), _file_name_hash())))
    cut = F.slice(names, 1, MAX_OBSERVED_HASHES + 1).cast("array<string>")
    return F.array_join(cut, ",").alias(_OBSERVED_HASHES)


def _observed_hashes(metrics: dict[str, Any]) -> tuple[int, ...] | None:
    """The observed file name hashes, None when cut at the bound (or not returned)."""
    joined = metrics.get(_OBSERVED_HASHES)
    if joined is None:
        return None
    hashes = tuple(int(h) for h in joined.split(",")) if joined else ()
    return hashes if len(hashes) <= MAX_OBSERVED_HASHES else None


@dataclasses.dataclass(frozen=True)
class _JoinKeys:
    """The columns rows are matched on by file key.

    In general these are the file key's two halves, canonical path and DV id. When every key
    on the replayed side is ``plain`` (a plain path, no deletion vector), a row matches one of
    them exactly when it has no deletion vector and the same path as written: a plain path is
    its own canonical path and no other path has a plain canonical path
    (``file_keys.is_plain_path``). That one column is read and hashed as it is, where
    canonicalizing every checkpoint path was most of the cost of a large state's queries
    (L: 0.7 of 1.1 s of wall time per scan of the checkpoint).
    """

    table_root: str
    plain: bool

    @property
    def names(self) -> list[str]:
        return [_PATH] if self.plain else _KEY_COLUMNS

    def columns(self, add: Column | None = None, remove: Column | None = None) -> list[Column]:
        """Key columns of the row's add or remove (default: the row's ``add`` and ``remove``)."""
        if self.plain:
            return [plain_file_key_column(add, remove).alias(_PATH)]
        canonical_path, dv_id = file_key_columns(self.table_root, add, remove)
        return [canonical_path.alias(_PATH), dv_id.alias(_DV_ID)]

    def of_replayed(self, replayed: DataFrame, replayed_bytes: int) -> DataFrame:
        """The keys of ``replayed``, the replay of ``replayed_bytes`` of commits: broadcast to
        every task rather than shuffled when that is small enough."""
        keys = replayed.where(is_file_action()).select(*self.columns())
        return F.broadcast(keys) if replayed_bytes <= BROADCAST_COMMIT_BYTES else keys


def _unreplayed_files(
    checkpoint_frame: DataFrame,
    replayed_keys: DataFrame,
    join_keys: _JoinKeys,
    stats_parsed: StructType | None = None,
) -> DataFrame:
    """The checkpoint frame's file actions no replayed action has the key of, as state rows
    with ``dataChange`` false.

    The join runs on the rows as read and only then are they conformed: a join over conformed
    (rebuilt) structs stops Spark from pruning their fields, and counting files would read every
    checkpoint column, stats included.
    """
    # Keys from the conformed structs' fields: Spark reads such a field straight from the
    # file's column, or as null where the file has no such field. The conformed add and remove
    # name only those two columns, which the join keeps as they were.
    conformed = conformed_state_columns(checkpoint_frame.schema)
    untouched = (
        checkpoint_frame.where(is_file_action())
        .select("add", "remove", *join_keys.columns(conformed["add"], conformed["remove"]))
        .join(replayed_keys, on=join_keys.names, how="left_anti")
    )
    # A checkpoint row holds one action, so the other action columns are null by definition;
    # saying so lets queries skip reading them. withField keeps a null struct null.
    columns = [
        conformed[name].withField("dataChange", F.lit(False)).alias(name)
        if name in ("add", "remove")
        else F.lit(None).cast(STATE_SPARK_SCHEMA[name].dataType).alias(name)
        for name in STATE_COLUMNS
    ]
    if stats_parsed is not None:
        columns.append(_written_stats_parsed(checkpoint_frame, stats_parsed))
    return untouched.select(*columns)


def _writes_stats_parsed(checkpoint_frame: DataFrame, stats_parsed: StructType) -> bool:
    """Whether the frame's ``add.stats_parsed`` has the type ``stats_parsed`` (nullability
    aside: parquet reads every field back nullable)."""
    add = struct_fields(checkpoint_frame.schema).get("add")
    written_type = struct_fields(add).get("stats_parsed") if isinstance(add, StructType) else None
    return written_type is not None and all_nullable(written_type) == all_nullable(stats_parsed)


def _written_stats_parsed(checkpoint_frame: DataFrame, stats_parsed: StructType) -> Column:
    """The frame's ``add.stats_parsed`` when it has the type ``stats_parsed``, else null."""
    same = _writes_stats_parsed(checkpoint_frame, stats_parsed)
    column = F.col("add.stats_parsed") if same else F.lit(None).cast(stats_parsed)
    return column.alias(PARSED_STATS_COLUMN)


def check_read_from_log(checkpoint: DataFrame, log_dir: str) -> None:
    """Every file the checkpoint rows are read from lies in this table's ``_delta_log``.

    Spark's own list of the scan's files (``inputFiles``, no job): the rows read directly from
    the checkpoint come from exactly these files, so checking them is checking every row.
    """
    foreign = first_foreign_source(checkpoint.inputFiles(), log_dir)
    if foreign is not None:
        raise LogFileOutsideTableError(file=foreign, log_path=log_dir)


def retained(config: ReplayConfig) -> Column:
    """Rows to keep: all but tombstones deleted, and txns last updated (or never), at or before
    their retention horizon (the worker's rules, ``worker.replay``)."""
    keep = F.lit(True)
    # remove.path and txn.appId, not the structs: a struct's null-ness would make every scan
    # read all its fields.
    if config.min_file_retention_timestamp is not None:
        deleted_at = F.coalesce(F.col("remove.deletionTimestamp"), F.lit(0))
        keep = F.col("remove.path").isNull() | _after(
            deleted_at, config.min_file_retention_timestamp
        )
    if config.min_set_transaction_retention_timestamp is not None:
        updated_after = _after(
            F.col("txn.lastUpdated"), config.min_set_transaction_retention_timestamp
        )
        keep = keep & (F.col("txn.appId").isNull() | F.coalesce(updated_after, F.lit(False)))
    return keep


def _after(millis: Column, horizon: int) -> Column:
    """``millis > horizon``, written so that the horizon stays out of generated code.

    Spark inlines a long literal into the Java code it generates, and caches compiled code by
    its text: a horizon that moves with every snapshot's clock made each snapshot compile its
    state queries anew (L: 12 classes, 0.4-0.6 s). A decimal literal is passed to the code as a
    reference instead, and the difference keeps the optimizer from turning the comparison back
    into a long one (``UnwrapCastInBinaryComparison``). Exact: decimal(20,0) holds every long.
    """
    difference = millis.cast("decimal(20,0)") - F.lit(Decimal(horizon))
    return difference > F.lit(0)
