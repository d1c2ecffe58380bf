"""Loading a log segment's actions as one DataFrame (delta-spark's ``loadActions``).

Responsibility: read the chosen checkpoint (classic, multi-part, V2 with sidecars, parquet or
JSON) and the commit JSON after it, each row conformed to the protocol's action types and tagged
with the version of its source file (``version``; checkpoint and sidecar rows carry the
checkpoint's version, compaction rows their end version) and the source file itself (``_file``,
from ``_metadata.file_path``), which the replay checks lies in this table's ``_delta_log``.

Invariants: commits are read with an explicit schema in FAILFAST mode (a malformed line fails
the load, it is never silently dropped; ``malformed_commits_reported`` then names the file and
the line as ``DELTA_CORRUPT_LOG_FILE``); a V2 checkpoint in JSON form has every line checked
the same way (once per file content) before Spark's JSON source reads it; checkpoint parquet
is read with its own footer schema and conformed field by field, so absent fields become null
and ``stats_parsed``-only checkpoints still yield ``add.stats`` (as JSON, like delta-spark's
``add_stats_to_use``).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial, reduce
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyspark.sql.connect.functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from delta_connect_py.connections import session_key
from delta_connect_py.errors import (
    CorruptLogFileError,
    checkpoint_value_not_utf8,
    corrupt_checkpoint_file,
)
from delta_connect_py.plans.action_lines import (
    RequiredFields,
    checked_version,
    first_missing_field,
    missing_field_count,
    required_fields,
    struct_field_type,
    text_problem,
)
from delta_connect_py.plans.checkpoint_strings import (
    any_not_utf8,
    columns_of,
    first_not_utf8_column,
    refused_if_not_utf8,
)
from delta_connect_py.plans.file_keys import is_file_action
from delta_connect_py.plans.spark import (
    collect,
    conform,
    escape_glob,
    map_in_arrow,
    materialize,
    spark_schema,
    strict_reader,
    struct_fields,
    task_numbers,
    type_mismatch,
    union_all,
    with_known_schema,
)
from delta_connect_py.protocol.actions import (
    COMMIT_SCHEMA,
    FILE_COLUMN,
    REQUIRED_FIELD_PATHS,
    STATE_SCHEMA,
    VERSION_COLUMN,
)
from delta_connect_py.protocol.filenames import LogFile
from delta_connect_py.spark_failures import (
    caused_by,
    raising_delta_errors,
    translate_server_error,
)
from delta_connect_py.worker.line_checks import LINE_PROBLEM_COLUMN
from delta_connect_py.worker.log_files import (
    COMMIT_LINES_SCHEMA,
    CommitLinesRead,
    read_assigned_commit_lines,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession

    from delta_connect_py.protocol.segment import LogSegment

COMMIT_SPARK_SCHEMA = spark_schema(COMMIT_SCHEMA)
STATE_SPARK_SCHEMA = spark_schema(STATE_SCHEMA)
COMMIT_VERSION_PATTERN = r"(\d+)(\.compacted)?\.json$"
#: Lines starting so hold one action that is not part of the table state.
NON_STATE_LINE_PREFIXES = ('{"commitInfo"', '{"cdc"')


@dataclass(frozen=True)
class CheckpointFrames:
    """A checkpoint's files as Spark reads them: the top-level file(s), then any sidecars.

    Each frame has an ``add`` and a ``remove`` column (null where its files have none) and keeps
    the struct types the files were written with; ``conformed_state_columns`` gives the
    protocol's.
    """

    frames: tuple[DataFrame, ...]
    version: int
    #: What the frames were read from (paths, sizes, modification times): their content.
    identity: tuple[object, ...] = ()

    def check_readable(self) -> None:
        """Read every column of every row once (one job, the first time a session asks for
        these files): a damaged page of a column no query of ours has read yet (the state
        rows read the checkpoint lazily) is ``DELTA_CORRUPT_LOG_FILE`` here, which Spark's
        failure names the file of, rather than a raw Spark error at a caller's first action
        on the rows. Spark decodes a column's pages only when a query uses the column: a
        count of each whole top-level column keeps every nested field in the scan (so every
        page is decoded) at a fifth of the cost of serialising the rows (2-4 s against
        10-20 s for a 910k-row checkpoint with stats). The same job tests every string for
        UTF-8 (``plans.checkpoint_strings``) and every action for the fields the protocol
        requires (``action_lines.missing_field_count``, as commit lines are): a value that
        is not UTF-8, or an action without such a field (an add without ``size``, a deletion
        vector without ``storageType``, read as no vector), is ``DELTA_CORRUPT_LOG_FILE`` too,
        naming the file and the column or field."""
        if not self.frames:
            return
        spark = self.frames[0].sparkSession
        key = (session_key(spark), self.identity)
        if self.identity and key in _readable_checkpoints:
            return
        every_column = [_every_value_read(frame) for frame in self.frames]
        counted = collect(union_all(every_column))
        if any(row["not_utf8"] for row in counted):
            raise self.not_utf8_error()
        if any(row["missing_fields"] for row in counted):
            raise self.missing_field_error()
        _remember(_readable_checkpoints, key, None, MAX_READABLE_CHECKPOINTS)

    def not_utf8_error(self) -> CorruptLogFileError:
        """The error naming the first file and column of these files holding a string that
        is not UTF-8, which a job has counted (a job; on damaged files only)."""
        for frame in self.frames:
            found = _first_not_utf8(frame, self.version)
            if found is not None:
                return found
        return checkpoint_value_not_utf8(self._first_file(), self.version, None)

    def missing_field_error(self) -> CorruptLogFileError:
        """The error naming the first file of these files holding an action without a field
        the protocol requires, and the field, which a job has counted (a job; on damaged files
        only)."""
        for frame in self.frames:
            reason = first_missing_field(_top_level_column, frame.schema)
            if reason is None:
                continue
            first = (
                frame.select(F.col("_metadata.file_path").alias("file"), reason.alias("reason"))
                .where(F.col("reason").isNotNull())
                .limit(1)
            )
            rows = collect(first)
            if rows:
                return corrupt_checkpoint_file(rows[0]["file"], self.version, rows[0]["reason"])
        unknown = "an action lacks a field the protocol requires"
        return corrupt_checkpoint_file(self._first_file(), self.version, unknown)

    def _first_file(self) -> str:
        """The first file read, to name when a problem a job counted is not found again (the
        files changed in between)."""
        first = self.identity[0] if self.identity else None
        file = first[0] if isinstance(first, tuple) else f"the checkpoint of version {self.version}"
        return str(file)

    def required_fields(self) -> tuple[RequiredFields, ...]:
        """The required fields the replay's worker tests in these files' rows, conformed to the
        state columns (``all_rows``, ``non_file_rows``): those every file holding the action
        wrote, as a field a file did not write is null once its rows are conformed."""
        return required_fields(_shared_schema(self.frames))

    @property
    def has_sidecars(self) -> bool:
        """Whether file actions live in sidecar files (frames after the top-level one)."""
        return len(self.frames) > 1

    def all_rows(self) -> DataFrame:
        """Every row, conformed to the state columns and tagged with version and source file:
        a small checkpoint replayed with the commits after it."""
        return union_all([conformed_state_rows(frame, self.version) for frame in self.frames])

    def non_file_rows(self) -> DataFrame:
        """Rows holding neither an add nor a remove path, conformed to the state columns and
        tagged with version and source file; their (pathless) add and remove are left out, so
        the scan reads no file action's fields but the paths it filters on."""
        no_file_actions = {
            name: F.lit(None).cast(STATE_SPARK_SCHEMA[name].dataType) for name in ("add", "remove")
        }
        return union_all(
            [
                conformed_state_rows(frame.where(~is_file_action()), self.version).withColumns(
                    no_file_actions
                )
                for frame in self.frames
            ]
        )


def _every_value_read(frame: DataFrame) -> DataFrame:
    """One row: how many values ``frame`` holds, how many rows hold a string that is not
    UTF-8, and how many required fields its actions lack (``missing_field_count``). Reads
    every page of every column."""
    values = reduce(operator.add, [F.count(_top_level_column(c)) for c in frame.columns])
    not_utf8 = any_not_utf8(columns_of(frame))
    rows = F.lit(0) if not_utf8 is None else F.count_if(not_utf8)
    missing = missing_field_count(_top_level_column, frame.schema)
    return frame.select(
        values.alias("values"),
        rows.alias("not_utf8"),
        (F.lit(0) if missing is None else missing).alias("missing_fields"),
    )


def _top_level_column(name: str) -> Column:
    return F.col(f"`{name}`")


def _shared_schema(frames: Sequence[DataFrame]) -> StructType:
    """Each column of ``frames`` with only the fields every frame holding the column has (by
    name, into nested structs)."""
    by_name: dict[str, list[DataType]] = {}
    for frame in frames:
        for field in frame.schema.fields:
            by_name.setdefault(field.name, []).append(field.dataType)
    return StructType([StructField(name, _shared_type(types)) for name, types in by_name.items()])


def _shared_type(types: Sequence[DataType]) -> DataType:
    """The fields every one of ``types`` has, when all are structs; else the first type."""
    structs = [t for t in types if isinstance(t, StructType)]
    if len(structs) < len(types):
        return types[0]
    first, rest = structs[0], structs[1:]
    return StructType(
        [
            StructField(f.name, _shared_type([f.dataType, *(t[f.name].dataType for t in rest)]))
            for f in first.fields
            if all(f.name in t.fieldNames() for t in rest)
        ]
    )


def _first_not_utf8(frame: DataFrame, version: int) -> CorruptLogFileError | None:
    """The error naming the first file and column of ``frame`` holding a string that is not
    UTF-8; None when none does."""
    column = first_not_utf8_column(columns_of(frame))
    if column is None:
        return None
    first = (
        frame.select(F.col("_metadata.file_path").alias("file"), column.alias("column"))
        .where(F.col("column").isNotNull())
        .limit(1)
    )
    rows = collect(first)
    if not rows:
        return None
    return checkpoint_value_not_utf8(rows[0]["file"], version, rows[0]["column"])


def _remember(cache: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Store ``value`` in one of this module's bounded caches, first dropping its oldest entry
    when it holds ``limit`` (safe when two threads do it at once)."""
    if len(cache) >= limit:
        for oldest in list(cache)[:1]:
            cache.pop(oldest, None)
    cache[key] = value


def _content_identity(files: Sequence[LogFile]) -> tuple[tuple[str, int, int], ...]:
    """What names log files' content: paths, sizes and modification times (checkpoints,
    sidecars and commits are written once, never changed in place)."""
    return tuple((f.path, f.size, f.modification_time) for f in files)


#: How many checkpoints ``CheckpointFrames.check_readable`` remembers as read in full.
MAX_READABLE_CHECKPOINTS = 64
#: Checkpoints ``CheckpointFrames.check_readable`` read in full, per session.
_readable_checkpoints: dict[tuple[str, tuple[object, ...]], None] = {}


@dataclass(frozen=True)
class SegmentActions:
    """A segment's action rows, the checkpoint's apart from the commits' (either may be None),
    and the bytes each was read from."""

    checkpoint: CheckpointFrames | None
    commits: DataFrame | None
    checkpoint_bytes: int
    commit_bytes: int
    #: Whether reading the rows reads files through Spark's file sources (a checkpoint, or
    #: commits not read by Python workers), which ``plans.spark.LOG_READ_CONF`` is for.
    reads_with_spark_sources: bool = True


def read_commits(
    spark: SparkSession, files: Sequence[LogFile], schema: StructType = COMMIT_SPARK_SCHEMA
) -> DataFrame:
    """Commit (or compaction) JSON with the ``schema`` action columns (default: every action),
    plus ``version`` and ``_file``; every line checked (``action_lines``).

    Spark's text source and ``from_json`` rather than its JSON source: the same parser, and
    the raw line stays at hand for the checks the parser does not make.
    """
    return parse_lines(_spark_commit_lines(spark, files), schema)


#: Commit bytes one reading task handles.
BYTES_PER_READ_TASK = 16 << 20
#: The same when the task only searches the bytes for a few strings and returns a few lines:
#: one warm worker process then does a small read, where more tasks would each pay a task's
#: fixed cost (and the second core a fresh worker process).
BYTES_PER_FILTERED_READ_TASK = 512 << 20
MAX_READ_TASKS = 16


#: Fewer commit files than this are named one by one (a directory listing would cost more).
DIRECTORY_READ_MIN_FILES = 8
_PLAIN_LOG_NAME = re.compile(r"\d{20}\.json")


def load_log_files(reader: DataFrameReader, files: Sequence[LogFile]) -> DataFrame:
    """``reader.load`` of exactly ``files``.

    Many commits of one non-local ``_delta_log`` are read as the directory with a file-name
    filter naming them: Spark then lists the directory (one LIST per 1,000 keys) instead of
    probing every named file before reading it (on S3A a HEAD to check it exists, a HEAD and a
    LIST to list it: 1,000 commits cost ~7 HEADs and ~2 LISTs each per fresh snapshot). The
    files the listing found are checked to be exactly ``files``; when one is missing the
    files are named one by one after all, so a missing file fails the read as it always did.
    """
    directories = {f.path.rsplit("/", 1)[0] for f in files}
    by_name = len(files) < DIRECTORY_READ_MIN_FILES or len(directories) != 1
    if (
        by_name
        or files[0].path.startswith("file:")
        or not all(_PLAIN_LOG_NAME.fullmatch(f.name) for f in files)
    ):
        return reader.load([escape_glob(f.path) for f in files])
    wanted = "{" + ",".join(f.name for f in files) + "}"
    frame = reader.option("pathGlobFilter", wanted).load(escape_glob(directories.pop()))
    found = {path.rsplit("/", 1)[-1] for path in frame.inputFiles()}
    if found != {f.name for f in files}:
        return reader.load([escape_glob(f.path) for f in files])
    return frame


def _spark_commit_lines(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame:
    source = F.col("_metadata.file_path")
    version = F.regexp_extract(source, COMMIT_VERSION_PATTERN, 1).cast("long")
    return _text_source_lines(spark, files, version)


def _text_source_lines(spark: SparkSession, files: Sequence[LogFile], version: Column) -> DataFrame:
    """Lines of ``files`` read by Spark's text source, shaped as the workers' lines: their text
    checked by Spark expressions (``action_lines.text_problem``), evaluated with the parse."""
    return load_log_files(strict_reader(spark).format("text"), files).select(
        version.alias(VERSION_COLUMN),
        F.col("_metadata.file_path").alias(FILE_COLUMN),
        "value",
        text_problem(F.col("value")).alias(LINE_PROBLEM_COLUMN),
    )


def _worker_commit_lines(
    spark: SparkSession, files: Sequence[LogFile], request: CommitLinesRead
) -> DataFrame:
    """Lines of local ``files`` read by Python tasks, the files dealt round-robin.

    The tasks are numbered by ``spark.range`` (one per partition) and find their files in the
    body's arguments: no list of files is uploaded and shuffled to them, and the frame's
    schema is known on the client (no analysis request for ``mapInArrow``'s columns).
    """
    per_task = BYTES_PER_FILTERED_READ_TASK if request.only_containing else BYTES_PER_READ_TASK
    tasks = max(1, min(MAX_READ_TASKS, math.ceil(sum(f.size for f in files) / per_task)))
    assigned = [[(f.version, f.path) for f in files[task::tasks]] for task in range(tasks)]
    reader = partial(read_assigned_commit_lines, request, assigned)
    return map_in_arrow(task_numbers(spark, tasks), reader, spark_schema(COMMIT_LINES_SCHEMA))


def lines_read_by_workers(files: Sequence[LogFile]) -> bool:
    """Whether ``commit_lines`` has Python workers read these files (all on the local file
    system), not Spark's text source."""
    return all(f.path.startswith("file:") for f in files)


def commit_lines(
    spark: SparkSession,
    files: Sequence[LogFile],
    request: CommitLinesRead | None = None,
    *,
    keep_for_replay: bool = False,
) -> DataFrame:
    """Every non-empty line of the commit files: ``version``, ``_file`` (URI), ``value`` and
    why its text is not a valid action (``LINE_PROBLEM_COLUMN``, see ``action_lines``); with
    a ``request`` filter, at least the lines containing the strings it asks for.

    Local logs are read by Python workers, many files per task, because Spark's file sources
    pay a setup per file that dominates logs of thousands of small commits (10,000 commits:
    minutes instead of seconds). Other file systems are read by Spark's text source, through
    the server's Hadoop configuration and credentials; with ``keep_for_replay`` (the P&M read
    of a snapshot) the lines are read now and kept on the server for ``commit_actions`` to
    take, so the replay of the same commits fetches none of them again.
    """
    if lines_read_by_workers(files):
        return _worker_commit_lines(
            spark, files, request or CommitLinesRead(table_path=files[0].path)
        )
    if keep_for_replay and sum(f.size for f in files) <= MAX_KEPT_COMMIT_BYTES:
        lines = materialize(_spark_commit_lines(spark, files))
        _remember(_kept_commit_lines, _commit_lines_key(spark, files), lines, MAX_KEPT_COMMIT_LINES)
        return lines
    return _spark_commit_lines(spark, files)


#: Commit lines of an object store kept between a snapshot's P&M read and its replay: each
#: commit file costs an S3 GET (and HEAD) per read, and a request is what costs on an object
#: store. Bounded in count and bytes (they sit in the server's memory until taken or evicted).
MAX_KEPT_COMMIT_LINES = 2
MAX_KEPT_COMMIT_BYTES = 256 << 20
_kept_commit_lines: dict[tuple[str, tuple[object, ...]], DataFrame] = {}


def _commit_lines_key(
    spark: SparkSession, files: Sequence[LogFile]
) -> tuple[str, tuple[object, ...]]:
    # A commit file is written once and never changed; size and time tell a rewrite apart.
    return session_key(spark), _content_identity(files)


def take_kept_commit_lines(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame | None:
    """The lines ``commit_lines(..., keep_for_replay=True)`` kept for exactly ``files``, once:
    a later snapshot reads the files again, like a fresh reader."""
    return _kept_commit_lines.pop(_commit_lines_key(spark, files), None)


#: Spark's error class when a FAILFAST JSON parse meets a line that is not ``schema`` JSON.
MALFORMED_RECORD = "MALFORMED_RECORD_IN_PARSING"
_CORRUPT_RECORD = "_corrupt_record"
#: How much of a malformed line the error quotes.
QUOTED_LINE_CHARS = 200


def first_malformed_line(
    spark: SparkSession, files: Sequence[LogFile], schema: StructType
) -> tuple[int, str, str] | None:
    """(version, file, line) of the oldest commit line that does not parse as ``schema`` actions.

    The same parser as the FAILFAST reads, in PERMISSIVE mode, which marks exactly the lines
    FAILFAST fails on (one job, run only after a read has failed).
    """
    if not files:
        return None
    marked = StructType([*schema.fields, StructField(_CORRUPT_RECORD, StringType(), True)])
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT_RECORD}
    parsed = F.from_json(F.col("value"), marked, options).getField(_CORRUPT_RECORD)
    lines = commit_lines(spark, files)
    bad = lines.where(parsed.isNotNull()).select(VERSION_COLUMN, FILE_COLUMN, "value")
    rows = collect(bad.orderBy(VERSION_COLUMN).limit(1))
    return (rows[0][VERSION_COLUMN], rows[0][FILE_COLUMN], rows[0]["value"]) if rows else None


@contextmanager
def malformed_commits_reported(
    spark: SparkSession, files: Sequence[LogFile], path: str, schema: StructType
) -> Iterator[None]:
    """Turn Spark's malformed-record failure of a read of ``files`` into
    ``DELTA_CORRUPT_LOG_FILE`` naming the commit file and quoting the line; ``path`` is the
    table (or log) the error names.

    Spark's own error names no line, and no file at all when the lines were parsed by
    ``from_json``. A failure that is something else, or whose line cannot be found among
    ``files``, is raised as it was.
    """
    try:
        yield
    except Exception as exc:
        if MALFORMED_RECORD not in str(exc):
            raise
        found = first_malformed_line(spark, files, schema)
        if found is None:
            raise
        version, file, line = found
        quoted = line if len(line) <= QUOTED_LINE_CHARS else line[:QUOTED_LINE_CHARS] + "..."
        corrupt = CorruptLogFileError(
            file=file,
            path=path,
            reason=f"version {version}: a line is not valid JSON of Delta actions: {quoted}",
        )
        raise caused_by(corrupt, exc) from None


def parse_lines(lines: DataFrame, schema: StructType) -> DataFrame:
    """``lines`` parsed as ``schema`` actions, keeping ``version`` and ``_file``; the query
    fails on the first line that is not a valid action (``action_lines``)."""
    action, version = _parse_columns(schema.json())
    parsed = lines.select(
        action.alias("action"), "value", LINE_PROBLEM_COLUMN, VERSION_COLUMN, FILE_COLUMN
    )
    # The check rides on ``version``, which every reader of these rows uses, in a projection
    # over the parsed struct: Spark parses each line once (a filter would be pushed below the
    # parse and copy ``from_json`` into each of its conditions).
    return parsed.select("action.*", version.alias(VERSION_COLUMN), FILE_COLUMN)


@lru_cache(maxsize=16)
def _parse_columns(schema_json: str) -> tuple[Column, Column]:
    """``parse_lines``' parse of a line and its checked version, for the schema of
    ``schema_json``: built once, as a column is an immutable expression and the check's
    conditions cost the client a few milliseconds a read to build."""
    schema = StructType.fromJson(json.loads(schema_json))
    action = F.from_json(F.col("value"), schema, {"mode": "FAILFAST"})
    problem = F.col(LINE_PROBLEM_COLUMN)
    return action, checked_version(F.col("value"), problem, F.col("action"), schema)


#: Up to this many commit files (those after a checkpoint, or an update's new commits) and
#: ``MAX_BYTES_FOR_JSON_SOURCE``, Spark's text source reads them: its cost per file only
#: matters for logs of thousands of small commits, and for a few small ones it runs no Python
#: stage (K's 10 commits of 75 KB: 0.38 s against 0.42 s by workers).
MAX_FILES_FOR_JSON_SOURCE = 32
#: Past one worker task's bytes, workers read even a few commits: their line checks run on
#: bytes, where the text source's are regular expressions over every line decoded to a Java
#: string (L's 9 commits, 67 MB: a fresh state 1.92 s against 2.14 s).
MAX_BYTES_FOR_JSON_SOURCE = BYTES_PER_READ_TASK


def commit_state_rows(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame:
    """The state actions of commits, stats left as unparsed strings.

    Lines of other actions (commitInfo, cdc) become rows with every state column null, which
    replay ignores; when workers read the lines, most are skipped as text first. Not filtering
    them here is deliberate: Spark would push such a filter below the parse and run
    ``from_json`` once per tested column.
    """
    request = CommitLinesRead(table_path=files[0].path, skip_prefixes=NON_STATE_LINE_PREFIXES)
    return commit_actions(spark, files, STATE_SPARK_SCHEMA, request)


def commit_actions(
    spark: SparkSession, files: Sequence[LogFile], schema: StructType, request: CommitLinesRead
) -> DataFrame:
    """Commit actions as ``schema`` columns plus ``version`` and ``_file``, FAILFAST.

    Lines a P&M read of an object store kept for these files are parsed from the server's
    copy. Otherwise few small files (``read_by_text_source``) Spark's text source reads every
    line; beyond, workers read the lines ``request`` asks for (a superset filter; lines it
    leaves out are not parsed) and ``from_json`` parses them.
    """
    kept = take_kept_commit_lines(spark, files)
    if kept is not None:
        return parse_lines(kept, schema)
    if read_by_text_source(files):
        return read_commits(spark, files, schema)
    return parse_lines(commit_lines(spark, files, request), schema)


def read_by_text_source(files: Sequence[LogFile]) -> bool:
    """Whether Spark's text source reads these commits (see ``MAX_FILES_FOR_JSON_SOURCE``);
    otherwise ``commit_lines`` does (workers for a local log)."""
    return (
        len(files) <= MAX_FILES_FOR_JSON_SOURCE
        and sum(f.size for f in files) <= MAX_BYTES_FOR_JSON_SOURCE
    )


def read_checkpoint_files(
    spark: SparkSession, files: Sequence[LogFile], footer_schema: StructType | None = None
) -> DataFrame:
    """The raw rows of checkpoint files (parquet with their own schema, or V2 JSON);
    ``footer_schema``: the schema Spark would infer for parquet ``files``, when known."""
    escaped = [escape_glob(f.path) for f in files]
    identity = _content_identity(files)
    if files[0].name.endswith(".json"):
        _check_json_checkpoint_lines(spark, files, identity)
        return (
            strict_reader(spark)
            .schema(COMMIT_SPARK_SCHEMA)
            .option("mode", "FAILFAST")
            .json(escaped)
        )
    return read_parquet(spark, escaped, identity, footer_schema)


#: The actions a checkpoint (or sidecar) column may hold, with the types their fields must
#: be of a kind with (``commitInfo`` is free-form, and not in checkpoints).
CHECKPOINT_ACTION_TYPES = {
    field.name: field.dataType
    for field in COMMIT_SPARK_SCHEMA.fields
    if field.name not in ("commitInfo", "cdc")
}


def _check_action_columns_in_schema(schema: StructType, paths: Sequence[str]) -> None:
    """``DELTA_CORRUPT_LOG_FILE`` when the footers' ``schema`` of checkpoint (or sidecar)
    ``paths`` has an action column without a field the protocol requires
    (``protocol.actions.REQUIRED_FIELD_PATHS``: an add without ``size`` or ``partitionValues``,
    a deletion vector without ``storageType``; a damaged footer renamed it, or a writer left it
    out), or an action column or field of another kind than the protocol's (a path written as
    a number, an action as a string: ``plans.spark.type_mismatch``). Every reader of the rows
    would read the missing field as null (a file without its partition values or size, a
    vector read as none) or fail with a raw Spark error, or read values cast into others,
    where the protocol-and-metadata read would not read around it. Every writer of the
    conformance tables (delta-spark, Delta Kernel, delta-rs 0.15 to 1.6) writes them all."""
    columns = struct_fields(schema)
    for action, carrier, name in REQUIRED_FIELD_PATHS:
        holder = struct_field_type(schema, action)
        if holder is not None and carrier is not None:
            holder = struct_field_type(holder, carrier)
        if holder is not None and name not in holder.fieldNames():
            where = action if carrier is None else f"{action} column's {carrier}"
            raise _corrupt_checkpoint_schema(
                paths,
                f"its parquet schema's {where} column has no {name} field "
                f"(fields: {', '.join(holder.fieldNames())[:200]})",
            )
    for action, target in CHECKPOINT_ACTION_TYPES.items():
        if action in columns:
            mismatch = type_mismatch(columns[action], target, action)
            if mismatch is not None:
                raise _corrupt_checkpoint_schema(paths, f"in its parquet schema, {mismatch}")


def _corrupt_checkpoint_schema(paths: Sequence[str], reason: str) -> CorruptLogFileError:
    log_dir = paths[0].rsplit("/_delta_log/", 1)[0] + "/_delta_log"
    which = "" if len(paths) == 1 else f" (the schema merged from {len(paths)} files)"
    return CorruptLogFileError(file=paths[0], path=log_dir, reason=reason + which)


#: How many JSON checkpoints ``_check_json_checkpoint_lines`` remembers as checked.
MAX_CHECKED_JSON_CHECKPOINTS = 64
_checked_json_checkpoints: dict[tuple[str, tuple[object, ...]], None] = {}


def _check_json_checkpoint_lines(
    spark: SparkSession, files: Sequence[LogFile], identity: tuple[object, ...]
) -> None:
    """Every line of a V2 checkpoint in JSON form checked as a commit's lines are
    (``action_lines``, FAILFAST parse): ``DELTA_CORRUPT_LOG_FILE`` naming the file, its
    version and the line, which ``TableLog.loaded_segment`` reads around like any unreadable
    checkpoint (an earlier checkpoint, else the commits).

    One job, the first time a session reads these files (``identity``: paths, sizes and
    modification times; a checkpoint is written once). The checkpoint's readers then use
    Spark's JSON source, the same parser, whose own failure would name no line and whose
    leniencies (text after an object, a number read as a path) would pass damage on; the
    check cannot ride on their rows as it does on commits' (they filter rows before using
    ``version``, and tag rows with the checkpoint's version instead).
    """
    key = (session_key(spark), identity)
    if key in _checked_json_checkpoints:
        return
    lines = _text_source_lines(spark, files, F.lit(files[0].version).cast("long"))
    checked = parse_lines(lines, COMMIT_SPARK_SCHEMA).agg(F.max(VERSION_COLUMN))
    log_dir = files[0].path.rsplit("/", 1)[0]
    with malformed_commits_reported(spark, files, log_dir, COMMIT_SPARK_SCHEMA):
        collect(checked)
    _remember(_checked_json_checkpoints, key, None, MAX_CHECKED_JSON_CHECKPOINTS)


#: How many footer schemas ``read_parquet`` keeps.
MAX_FOOTER_SCHEMAS = 64
_footer_schemas: dict[tuple[str, tuple[object, ...]], StructType] = {}


def read_parquet(
    spark: SparkSession,
    paths: Sequence[str],
    identity: tuple[object, ...],
    footer_schema: StructType | None = None,
) -> DataFrame:
    """Parquet files read with the merge of their footers' schemas, inferred the first time only
    (not at all when ``footer_schema`` tells it), and known to the client.

    Parts of one checkpoint may carry different columns (a part without protocol rows may have
    no protocol column), hence the merge. Without a given schema the server infers it (a Spark
    job reading every footer) each time a plan reading the files is analyzed or run, and a
    snapshot's plans read its checkpoint several times (L: 5 such jobs, 0.02-0.07 s each).
    ``identity`` names the files' content (paths, sizes, modification times): checkpoint and
    sidecar files are written once, never changed in place. Schemas are kept per Connect
    session, as another session may be another server's file system.
    """
    key = (session_key(spark), identity)
    schema = _footer_schemas.get(key) or footer_schema
    if schema is None:
        with raising_delta_errors(spark), _unreadable_footers_reported(paths):
            schema = strict_reader(spark).option("mergeSchema", "true").parquet(*paths).schema
    if key not in _footer_schemas:
        _check_action_columns_in_schema(schema, paths)
        _remember(_footer_schemas, key, schema, MAX_FOOTER_SCHEMAS)
    # The read's schema is the one stated (Spark's parquet source shows every field nullable,
    # as the footers' schema is here): the client need not ask for it.
    return with_known_schema(strict_reader(spark).schema(schema).parquet(*paths), schema)


#: Spark's failures to read a parquet footer, which name no file (the footers of a schema
#: merge are read in a job of their own): a damaged footer, a file that is not parquet, a
#: footer whose Spark schema names a column twice (one bit of a field's name flipped).
_UNREADABLE_FOOTER = re.compile(
    r"FileMetaData|footer|not a Parquet file|COLUMN_ALREADY_EXISTS", re.IGNORECASE
)


@contextmanager
def _unreadable_footers_reported(paths: Sequence[str]) -> Iterator[None]:
    """A damaged footer among ``paths`` (log files) as ``DELTA_CORRUPT_LOG_FILE``: Spark's own
    naming of the file when its text has one (``translate_server_error``), else the first of
    ``paths`` with the line of Spark's text that names the footer."""
    try:
        yield
    except CorruptLogFileError:
        raise
    except Exception as exc:
        found = _UNREADABLE_FOOTER.search(str(exc))
        if found is None:
            raise
        translated = translate_server_error(exc)
        if isinstance(translated, CorruptLogFileError):
            raise translated from None
        log_dir = paths[0].rsplit("/_delta_log/", 1)[0] + "/_delta_log"
        which = "its" if len(paths) == 1 else f"its or another of {len(paths)} files'"
        reason = f"Spark could not read {which} parquet footer ({_line_at(str(exc), found)})"
        corrupt = CorruptLogFileError(file=paths[0], path=log_dir, reason=reason)
        raise caused_by(corrupt, exc) from None


#: A frame of Spark's parquet reader in a failure's text (the task's stack trace, which a
#: stage failure's message carries).
_PARQUET_READER_FRAME = re.compile(
    r"\bat org\.apache\.(?:parquet\.|spark\.sql\.execution\.datasources\.parquet\.)"
)
#: The exception a failed task threw, as a stage failure's message names it.
_THROWN = re.compile(r"\): ((?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b[^\n]*)")
#: Failures that are not the file's damage even inside the parquet reader.
_NOT_DAMAGE = re.compile(r"OutOfMemory|TaskKilled|cancel", re.IGNORECASE)


@contextmanager
def parquet_damage_reported(files: Sequence[LogFile]) -> Iterator[None]:
    """A failure inside Spark's parquet reader that Spark names no file for (a damaged
    dictionary page: ``newLimit > capacity``), in jobs that read nothing but the log while its
    parquet ``files`` (a checkpoint) are read, as ``DELTA_CORRUPT_LOG_FILE`` naming the first
    of them; the caller may read around it as around any unreadable checkpoint."""
    try:
        yield
    except CorruptLogFileError:
        raise
    except Exception as exc:
        text = str(exc)
        if not files or _NOT_DAMAGE.search(text):
            raise
        found = _PARQUET_READER_FRAME.search(text)
        if found is None or translate_server_error(exc) is not exc:
            raise
        thrown = _THROWN.search(text)
        what = thrown.group(1) if thrown else text.strip().split("\n", 1)[0]
        log_dir = files[0].path.rsplit("/", 1)[0]
        which = "it" if len(files) == 1 else f"it or another of its {len(files)} files"
        reason = f"Spark's parquet reader failed on {which} ({what[:300]})"
        corrupt = CorruptLogFileError(file=files[0].path, path=log_dir, reason=reason)
        raise caused_by(corrupt, exc) from None


def _line_at(text: str, found: re.Match[str]) -> str:
    """The line of ``text`` holding ``found``, at most 200 characters."""
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start : end if end >= 0 else len(text)].strip()[:200]


def _add_with_stats(actual: StructType, target: StructType) -> Column:
    """``add`` conformed, taking ``stats`` from ``stats_parsed`` when only that was written."""
    add_fields = struct_fields(actual)
    column = conform(F.col("add"), actual, target)
    if "stats_parsed" not in add_fields:
        return column
    stats = (
        F.coalesce(F.col("add.stats"), F.to_json(F.col("add.stats_parsed")))
        if "stats" in add_fields
        else F.to_json(F.col("add.stats_parsed"))
    )
    return column.withField("stats", stats)  # withField keeps a null add null


def conformed_state_rows(frame: DataFrame, version: int) -> DataFrame:
    """Checkpoint (or sidecar) rows as the state columns, tagged with the checkpoint version."""
    columns = conformed_state_columns(frame.schema)
    return frame.select(
        *[column.alias(name) for name, column in columns.items()],
        F.lit(version).cast("long").alias(VERSION_COLUMN),
        F.col("_metadata.file_path").alias(FILE_COLUMN),
    )


def conformed_state_columns(schema: StructType) -> dict[str, Column]:
    """Each state column of rows read with ``schema``, conformed to the protocol's type."""
    actual = struct_fields(schema)
    columns = {}
    for field in STATE_SPARK_SCHEMA.fields:
        if field.name not in actual:
            column = F.lit(None).cast(field.dataType)
        elif field.name == "add":
            column = _add_with_stats(actual["add"], field.dataType)  # type: ignore[arg-type]
        else:
            column = conform(F.col(field.name), actual[field.name], field.dataType)
        columns[field.name] = column
    return columns


def with_file_action_columns(frame: DataFrame) -> DataFrame:
    """``frame`` with an ``add`` and a ``remove`` column (null when its files have none), so
    file actions can be told apart without knowing which columns a checkpoint part wrote."""
    present = struct_fields(frame.schema)
    missing = {
        name: F.lit(None).cast(STATE_SPARK_SCHEMA[name].dataType)
        for name in ("add", "remove")
        if name not in present
    }
    return frame.withColumns(missing) if missing else frame


def sidecar_paths(frame: DataFrame, version: int, log_dir: str) -> list[str]:
    """Sidecar files a (possibly V2) checkpoint of ``version`` references, as paths Spark can
    read (a name that is not UTF-8: ``DELTA_CORRUPT_LOG_FILE``), each once: a sidecar named
    twice holds its actions once (read twice, each of its adds would count twice)."""
    if "sidecar" not in struct_fields(frame.schema):
        return []
    sidecars = refused_if_not_utf8(
        frame.where(F.col("sidecar.path").isNotNull()),
        version,
        ["sidecar"],
        F.col("_metadata.file_path"),
    )
    rows = collect(sidecars.select("sidecar.path"))
    return list(dict.fromkeys(_sidecar_location(row["path"], log_dir) for row in rows))


def _sidecar_location(path: str, log_dir: str) -> str:
    if "://" in path or path.startswith(("/", "file:")):
        return unquote(path)
    return f"{log_dir.rstrip('/')}/_sidecars/{unquote(path)}"


@contextmanager
def _missing_sidecar_reported(checkpoint_file: str, log_dir: str) -> Iterator[None]:
    """A sidecar the checkpoint names that does not exist (a damaged name, a lost file) as
    ``DELTA_CORRUPT_LOG_FILE`` of the checkpoint, not Spark's ``PATH_NOT_FOUND``."""
    try:
        yield
    except Exception as exc:
        if "PATH_NOT_FOUND" not in str(exc):
            raise
        raise CorruptLogFileError(
            file=checkpoint_file,
            path=log_dir,
            reason="it names a sidecar file that does not exist",
        ) from exc


def checkpoint_frames(
    spark: SparkSession, segment: LogSegment, log_dir: str
) -> tuple[CheckpointFrames, int]:
    """The checkpoint's frames (top-level file(s) plus sidecars) and their byte size."""
    checkpoint = segment.checkpoint
    assert checkpoint is not None
    top_level = read_checkpoint_files(spark, checkpoint.files)
    frames = [top_level]
    sidecars = sidecar_paths(top_level, checkpoint.version, log_dir)
    if sidecars:
        # Sidecars are named by a UUID: a path names one content.
        escaped = [escape_glob(path) for path in sidecars]
        with _missing_sidecar_reported(checkpoint.files[0].path, log_dir):
            frames.append(read_parquet(spark, escaped, tuple(sidecars)))
    size = sum(f.size for f in checkpoint.files)
    identity = (*_content_identity(checkpoint.files), *sidecars)
    return CheckpointFrames(
        tuple(with_file_action_columns(frame) for frame in frames),
        checkpoint.version,
        identity,
    ), size


def load_actions(spark: SparkSession, segment: LogSegment, log_dir: str) -> SegmentActions:
    """Every action row replay needs for ``segment``: the checkpoint's and the commits'."""
    checkpoint: CheckpointFrames | None = None
    checkpoint_bytes = 0
    if segment.checkpoint is not None:
        checkpoint, checkpoint_bytes = checkpoint_frames(spark, segment, log_dir)
    commits = segment.commits
    return SegmentActions(
        checkpoint=checkpoint,
        commits=commit_state_rows(spark, commits) if commits else None,
        checkpoint_bytes=checkpoint_bytes,
        commit_bytes=sum(f.size for f in commits),
        reads_with_spark_sources=checkpoint is not None or not read_by_workers(commits),
    )


def read_by_workers(files: Sequence[LogFile]) -> bool:
    """Whether ``commit_actions`` has Python workers read these commits (a local log's, too
    many for Spark's text source), not Spark's file sources."""
    return bool(files) and lines_read_by_workers(files) and not read_by_text_source(files)
