"""The protocol and metadata fast path: a snapshot's P&M without replaying file actions.

Responsibility: delta-spark's P&M fast path: from the version checksum (``v.crc``) when it holds
both (parsed on the client when the listing brought its text, else read by Spark), else from
only the ``protocol``, ``metaData`` and ``commitInfo.inCommitTimestamp`` columns of the
checkpoint and the commits after it (one small collect, newest wins). For a local log, the
listing's own job can bring those commits' P&M lines, parsed, and a parquet checkpoint's P&M
as lines too (``pm_lines_scan``, ``ScannedPmLines``, ``worker.checkpoint_pm``): then no job of
its own but, with a checkpoint, the inference of its footers' schema.

Invariants: a missing protocol or metadata raises ``DELTA_STATE_RECOVER_ERROR`` naming the
version; the in-commit timestamp is taken only from the snapshot version's own commit. Lines the
listing brought are used only when they are the lines this read would parse, every one of them
valid (Spark's parser, the same checks); otherwise this read runs and reports what it finds.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyspark.sql.connect.functions as F
from pyspark.sql.types import StringType, StructField, StructType

from delta_connect_py.errors import CorruptLogFileError, StateRecoverError
from delta_connect_py.plans.action_lines import invalid_line_reason
from delta_connect_py.plans.checkpoint_strings import refused_if_not_utf8
from delta_connect_py.plans.loading import (
    BYTES_PER_FILTERED_READ_TASK,
    commit_lines,
    conformed_state_rows,
    lines_read_by_workers,
    malformed_commits_reported,
    parse_lines,
    read_checkpoint_files,
)
from delta_connect_py.plans.spark import (
    collect,
    escape_glob,
    spark_schema,
    strict_reader,
    union_all,
)
from delta_connect_py.protocol.actions import (
    FILE_COLUMN,
    METADATA,
    PROTOCOL,
    VERSION_COLUMN,
    Metadata,
    Protocol,
)
from delta_connect_py.protocol.filenames import LogFileKind
from delta_connect_py.worker.log_files import CommitLinesRead, PmLinesScan

if TYPE_CHECKING:
    from collections.abc import Iterable

    from pyspark.sql import Column, DataFrame, SparkSession

    from delta_connect_py.protocol.filenames import LogFile
    from delta_connect_py.protocol.segment import LogSegment

#: Every line that can hold protocol, metaData or the in-commit timestamp contains one of these.
PM_SUBSTRINGS = ('"protocol"', '"metaData"', '"inCommitTimestamp"')

PM_LINE_SCHEMA = spark_schema(
    pa.schema(
        [
            ("protocol", PROTOCOL),
            ("metaData", METADATA),
            ("commitInfo", pa.struct([("inCommitTimestamp", pa.int64())])),
        ]
    )
)

CHECKSUM_SCHEMA = spark_schema(
    pa.schema(
        [
            ("metadata", METADATA),
            ("protocol", PROTOCOL),
            ("inCommitTimestampOpt", pa.int64()),
            ("tableSizeBytes", pa.int64()),
            ("numFiles", pa.int64()),
        ]
    )
)


#: The listing's lines are parsed as a P&M read parses them, marking a line it would fail on.
_CORRUPT_RECORD = "_corrupt_record"
_MARKED_PM_LINE_SCHEMA = StructType(
    [*PM_LINE_SCHEMA.fields, StructField(_CORRUPT_RECORD, StringType(), True)]
)


def pm_lines_scan(after_version: int) -> PmLinesScan:
    """What a local listing reads for the P&M of the commits after ``after_version`` (-1: every
    commit, when the log has no checkpoint): the lines ``_commit_pm_rows`` would parse."""
    return PmLinesScan(
        after_version=after_version,
        only_containing=PM_SUBSTRINGS[:2],
        newest_also_containing=PM_SUBSTRINGS[2:],
        max_bytes=BYTES_PER_FILTERED_READ_TASK,
    )


def scanned_line_columns(is_pm_line: Column, line: Column) -> list[Column]:
    """The columns a listing adds for its P&M lines (null on other rows): ``protocol``,
    ``metaData`` and ``ict`` as ``_commit_pm_rows`` parses them, and ``invalid``: whether that
    read would fail on the line (Spark's parser, then ``action_lines``' checks)."""
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT_RECORD}
    parsed = F.when(is_pm_line, F.from_json(line, _MARKED_PM_LINE_SCHEMA, options))
    reason = invalid_line_reason(F.lit(None).cast("string"), parsed, PM_LINE_SCHEMA)
    return [
        parsed.getField("protocol").alias("protocol"),
        parsed.getField("metaData").alias("metaData"),
        parsed.getField("commitInfo").getField("inCommitTimestamp").alias("ict"),
        (parsed.getField(_CORRUPT_RECORD).isNotNull() | reason.isNotNull()).alias("invalid"),
    ]


@dataclass(frozen=True)
class ScannedPmLines:
    """The P&M lines a local listing brought (``pm_lines_scan``): of every commit after
    ``after_version`` up to ``newest_version``, each parsed (``scanned_line_columns``); when
    ``checkpoint_files`` are named, also the P&M of that checkpoint, of version
    ``after_version``, as lines of that version."""

    after_version: int
    newest_version: int
    #: ``version``, ``protocol``, ``metaData``, ``ict`` and ``invalid`` of each line, in the
    #: order of the commits' lines.
    rows: tuple[dict[str, Any], ...]
    #: The paths of the checkpoint files whose P&M the scan read (none: no checkpoint read).
    checkpoint_files: tuple[str, ...] = ()
    #: The schema Spark would infer for those files, as a ``StructType``'s JSON, when the
    #: listing's task could tell it (``worker.parquet_schema``).
    checkpoint_schema: str | None = None

    def footer_schema(self) -> StructType | None:
        """``checkpoint_schema`` as a ``StructType``."""
        if self.checkpoint_schema is None:
            return None
        return StructType.fromJson(json.loads(self.checkpoint_schema))

    def rows_for(self, segment: LogSegment) -> list[dict[str, Any]] | None:
        """The lines of ``segment``'s checkpoint and commits, when the scan read exactly what a
        P&M read of ``segment`` would and every line is valid; else None."""
        commits = segment.commits
        if segment.checkpoint is None:
            covered = bool(commits) and commits[0].version > self.after_version
            first = commits[0].version if commits else 0
        else:
            covered = (
                segment.checkpoint.version == self.after_version
                and tuple(f.path for f in segment.checkpoint.files) == self.checkpoint_files
            )
            first = segment.checkpoint.version
        covered = (
            covered
            and segment.version == self.newest_version
            and all(c.kind is LogFileKind.COMMIT for c in commits)
        )
        if not covered:
            return None
        rows = [row for row in self.rows if row[VERSION_COLUMN] >= first]
        return None if any(row["invalid"] for row in rows) else rows


@dataclass(frozen=True)
class ProtocolAndMetadata:
    protocol: Protocol
    metadata: Metadata
    in_commit_timestamp: int | None
    source: str
    #: Taken from the listing's pyarrow read of the segment's checkpoint, not read by Spark,
    #: which may refuse a damaged file pyarrow reads (see ``Snapshot``'s state).
    from_listed_checkpoint: bool = field(default=False, compare=False)


def _from_checksum(spark: SparkSession, checksum: LogFile) -> ProtocolAndMetadata | None:
    frame = strict_reader(spark).schema(CHECKSUM_SCHEMA).json(escape_glob(checksum.path))
    try:
        rows = collect(frame)
    except Exception:  # a corrupt .crc is optional data: fall back to the log
        return None
    if len(rows) != 1 or rows[0]["protocol"] is None or rows[0]["metadata"] is None:
        return None
    row = rows[0]
    if row["metadata"]["id"] is None or row["protocol"]["minReaderVersion"] is None:
        return None
    return ProtocolAndMetadata(
        protocol=Protocol.from_action(row["protocol"].asDict(recursive=True)),
        metadata=Metadata.from_action(row["metadata"].asDict(recursive=True)),
        in_commit_timestamp=row["inCommitTimestampOpt"],
        source=checksum.path,
    )


def _from_checksum_text(text: str, checksum: LogFile) -> ProtocolAndMetadata | None:
    """``_from_checksum`` of a checksum's text already at hand (no job), for a file whose one
    line is a JSON object holding a well-typed protocol and metadata; None for anything else,
    which ``_from_checksum`` then reads as before (whatever Spark's JSON reader makes of it)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        return None
    try:
        checksum_json = json.loads(lines[0])
    except ValueError:
        return None
    if not isinstance(checksum_json, dict):
        return None
    protocol: Any = checksum_json.get("protocol")
    metadata: Any = checksum_json.get("metadata")
    ict = checksum_json.get("inCommitTimestampOpt")
    if not (_plain_protocol(protocol) and _plain_metadata(metadata) and _is_int_or_none(ict)):
        return None
    return ProtocolAndMetadata(
        protocol=Protocol.from_action(protocol),
        metadata=Metadata.from_action(metadata),
        in_commit_timestamp=ict,
        source=checksum.path,
    )


def _is_int_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _is_str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_string_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _is_string_map(value: Any) -> bool:
    return value is None or (
        isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    )


def _plain_protocol(protocol: Any) -> bool:
    """A protocol action whose every field has its JSON type (the reader's schema's)."""
    return (
        isinstance(protocol, dict)
        and protocol.get("minReaderVersion") is not None
        and all(_is_int_or_none(protocol.get(k)) for k in ("minReaderVersion", "minWriterVersion"))
        and all(_is_string_list(protocol.get(k)) for k in ("readerFeatures", "writerFeatures"))
    )


def _plain_metadata(metadata: Any) -> bool:
    """A metaData action whose every field has its JSON type (the reader's schema's)."""
    if not isinstance(metadata, dict) or not isinstance(metadata.get("id"), str):
        return False
    fmt = metadata.get("format")
    return (
        all(_is_str_or_none(metadata.get(k)) for k in ("name", "description", "schemaString"))
        and _is_string_list(metadata.get("partitionColumns"))
        and _is_string_map(metadata.get("configuration"))
        and _is_int_or_none(metadata.get("createdTime"))
        and (
            fmt is None
            or (
                isinstance(fmt, dict)
                and _is_str_or_none(fmt.get("provider"))
                and _is_string_map(fmt.get("options"))
            )
        )
    )


def _commit_pm_rows(spark: SparkSession, segment: LogSegment) -> DataFrame:
    """P&M rows of the commits, parsing only lines that can hold them.

    Parsing every add's JSON (with its stats) is most of the cost of reading a log; the text
    filter is a cheap superset (a false positive is parsed and then dropped by the caller).
    """
    request = CommitLinesRead(
        table_path=segment.commits[0].path,
        only_containing=PM_SUBSTRINGS[:2],
        newest_also_containing=PM_SUBSTRINGS[2:],
        newest_version=segment.version,
    )
    # The replay of the same commits takes these lines instead of fetching each file again.
    lines = commit_lines(spark, segment.commits, request, keep_for_replay=True)
    is_last = F.col(VERSION_COLUMN) == F.lit(segment.version)
    candidates = lines.where(
        F.col("value").contains(PM_SUBSTRINGS[0])
        | F.col("value").contains(PM_SUBSTRINGS[1])
        | (is_last & F.col("value").contains(PM_SUBSTRINGS[2]))
    )
    # FAILFAST: a malformed protocol or metaData line must not leave an older one in force.
    parsed = parse_lines(candidates, PM_LINE_SCHEMA)  # each line checked (action_lines)
    return parsed.select(
        "protocol",
        "metaData",
        VERSION_COLUMN,
        F.when(is_last, F.col("commitInfo.inCommitTimestamp")).alias("ict"),
    )


def _log_rows(spark: SparkSession, segment: LogSegment, log_dir: str) -> DataFrame:
    frames: list[DataFrame] = []
    ict = F.lit(None).cast("long").alias("ict")
    if segment.checkpoint is not None:
        # Sidecars hold only file actions: the top-level checkpoint file(s) suffice.
        top = read_checkpoint_files(spark, segment.checkpoint.files)
        state = conformed_state_rows(top, segment.checkpoint.version).where(_is_pm())
        pm = refused_if_not_utf8(
            state, segment.checkpoint.version, ["protocol", "metaData"], F.col(FILE_COLUMN)
        )
        frames.append(pm.select("protocol", "metaData", VERSION_COLUMN, ict))
    if segment.commits:
        frames.append(_commit_pm_rows(spark, segment))
    rows = union_all(frames)
    return rows.where(_is_pm() | F.col("ict").isNotNull())


def _is_pm() -> Column:
    """Whether a row holds a protocol or a metadata action."""
    return F.col("protocol.minReaderVersion").isNotNull() | F.col("metaData.id").isNotNull()


def protocol_and_metadata(
    spark: SparkSession,
    segment: LogSegment,
    log_dir: str,
    previous: ProtocolAndMetadata | None = None,
    checksum_text: str | None = None,
    scanned: ScannedPmLines | None = None,
    state_follows: bool = True,
) -> ProtocolAndMetadata:
    """The snapshot's protocol, metadata and in-commit timestamp (one small Spark job, none
    when ``checksum_text``, the text of the segment's version checksum the listing brought,
    holds them, or when the P&M lines the listing brought (``scanned``) cover the segment and
    hold both; with a checkpoint then, only the job inferring its footers' schema, which the
    state's read of it would run anyway).

    With ``previous`` (the P&M as of the version just before ``segment.commits``), only those
    commits are read and whatever they do not change is carried over. Without
    ``state_follows`` (a caller that reads no state of the segment: history, commit
    timestamps), a checkpoint's footers are left unread when the listing brought its P&M.
    """
    if previous is None and segment.checksum is not None:
        from_checksum = None
        if checksum_text is not None:
            from_checksum = _from_checksum_text(checksum_text, segment.checksum)
        if from_checksum is None:
            from_checksum = _from_checksum(spark, segment.checksum)
        if from_checksum is not None:
            _check_checksum_repeats_log(from_checksum, scanned, segment, log_dir)
            return from_checksum
    if previous is not None:
        segment = dataclasses.replace(segment, checkpoint=None)
    # Commits of a local log are read by Python tasks, not by Spark's file sources: without a
    # checkpoint to read, no setting of LOG_READ_CONF applies (4 config requests fewer).
    reads_files = segment.checkpoint is not None or not lines_read_by_workers(segment.commits)
    scanned_rows = None if scanned is None else scanned.rows_for(segment)
    if scanned_rows is not None:
        protocol, metadata, ict = _newest(scanned_rows, previous, segment.version)
        if protocol is not None and metadata is not None:
            if segment.checkpoint is not None and state_follows:
                # The footers as the read would meet them: a damaged one fails here, where the
                # caller reads around it, as it would fail the read (their schema is kept for
                # the state's read of the checkpoint: no job more in all; none at all when the
                # listing's task could tell the schema).
                footers = None if scanned is None else scanned.footer_schema()
                read_checkpoint_files(spark, segment.checkpoint.files, footers)
            recovered = _recovered(protocol, metadata, ict, segment.version)
            listed = segment.checkpoint is not None
            return dataclasses.replace(recovered, from_listed_checkpoint=listed)
        # Missing: the read below reports it as it always has.
    with malformed_commits_reported(spark, segment.commits, log_dir, PM_LINE_SCHEMA):
        rows = collect(_log_rows(spark, segment, log_dir), reads_files=reads_files)
    return _recovered(*_newest(rows, previous, segment.version), segment.version)


def _check_checksum_repeats_log(
    from_checksum: ProtocolAndMetadata,
    scanned: ScannedPmLines | None,
    segment: LogSegment,
    log_dir: str,
) -> None:
    """A version checksum only repeats the log's P&M: where the listing brought the log's own
    for the segment (a local log), they must be equal, else the checksum is
    ``DELTA_CORRUPT_LOG_FILE``. A damaged checksum must not decide how rows are read (their
    schema, partition columns, features); delta-spark refuses such a table too, when it checks
    its state against the checksum."""
    rows = None if scanned is None else scanned.rows_for(segment)
    if rows is None:
        return
    protocol, metadata, _ = _newest(rows, None, segment.version)
    if protocol is None or metadata is None:
        return  # the log's own read will say what is missing
    from_log = _recovered(protocol, metadata, None, segment.version)
    for name, found in (("protocol", from_log.protocol), ("metadata", from_log.metadata)):
        if found != getattr(from_checksum, name):
            raise CorruptLogFileError(
                file=from_checksum.source,
                path=log_dir,
                reason=f"its {name} is not the log's at version {segment.version}: one of the "
                "two is damaged or was copied from another table (a version checksum only "
                "repeats the log; compare both with a backup before deleting either)",
            )


def _newest(
    rows: Iterable[Any], previous: ProtocolAndMetadata | None, version: int
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, int | None]:
    """The newest protocol and metadata actions of ``rows`` (over ``previous``'s), and the
    in-commit timestamp of the commit of ``version``."""
    ict: int | None = None
    protocol: dict[str, Any] | None = None if previous is None else previous.protocol.to_action()
    metadata: dict[str, Any] | None = None if previous is None else previous.metadata.to_action()
    for row in sorted(rows, key=lambda r: r[VERSION_COLUMN]):
        if row["protocol"] is not None and row["protocol"]["minReaderVersion"] is not None:
            protocol = row["protocol"].asDict(recursive=True)
        if row["metaData"] is not None and row["metaData"]["id"] is not None:
            metadata = row["metaData"].asDict(recursive=True)
        if row[VERSION_COLUMN] == version and row["ict"] is not None:
            ict = row["ict"]
    return protocol, metadata, ict


def _recovered(
    protocol: dict[str, Any] | None, metadata: dict[str, Any] | None, ict: int | None, version: int
) -> ProtocolAndMetadata:
    """The P&M of ``version``; ``DELTA_STATE_RECOVER_ERROR`` when either is missing."""
    if protocol is None:
        raise StateRecoverError(operation="protocol", version=version)
    if metadata is None:
        raise StateRecoverError(operation="metadata", version=version)
    return ProtocolAndMetadata(
        protocol=Protocol.from_action(protocol),
        metadata=Metadata.from_action(metadata),
        in_commit_timestamp=ict,
        source="log",
    )
