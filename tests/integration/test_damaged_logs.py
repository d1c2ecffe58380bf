"""Damaged logs are refused with a Delta error on every read path, never read wrongly.

A truncated action line and a wrong-typed one, appended to a middle commit of a short log (read
by Spark's file source) and of a long one (more commits than ``MAX_FILES_FOR_JSON_SOURCE``:
read by Python workers, with filtered reads for P&M and history), give
``DELTA_CORRUPT_LOG_FILE`` naming the file and version from the state, ``to_df``, history and
the change data feed. Flipped bytes in a checkpoint give a ``DeltaError`` or the undamaged
table's state (rebuilt from commits, delta-spark's rule), never a raw Spark error: a V2
checkpoint in JSON form is checked line by line like a commit, and a checkpoint parquet's page
that only the live files' rows would read is met before they are handed out, as is a checkpoint
string that is not UTF-8 (which Spark would hand out as it is). A data file the
change data feed would read that does not exist (a damaged path) is
``DELTA_FILE_NOT_FOUND_DETAILED``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from delta_connect_py import DeltaTable
from delta_connect_py.errors import (
    CorruptLogFileError,
    DeltaError,
    FailedCastPartitionValueError,
    FileReferencedNotFoundError,
    PartitionColumnNotFoundError,
)
from delta_connect_py.plans import spark as spark_plans
from delta_connect_py.plans.loading import MAX_FILES_FOR_JSON_SOURCE
from tests.checkpoint_paths import checkpoint_files
from tests.conftest import CONFORMANCE, log_bytes
from tests.fuzz import damaged_logs as fuzz
from tests.integration.test_checkpoint import age_log_files
from tests.integration.test_checkpoint_strings import strings_as_given

LONG_COMMITS = MAX_FILES_FOR_JSON_SOURCE + 8
DAMAGED_VERSION = 12

INVALID_LINES = {
    "truncated": b'{"add": {"path": "x.parquet", "size": ',
    "wrong_typed": b'{"add": {"path": 5}}\n',
    # A valid action but for one byte that is no UTF-8 (Spark alone would read it as U+FFFD).
    "invalid_utf8": b'{"add": {"path": "x\xff.parquet", "partitionValues": {}, "size": 1, '
    b'"modificationTime": 1, "dataChange": true}}\n',
}

READS: dict[str, Callable[[DeltaTable], Any]] = {
    "state": lambda dt: dt.snapshot().state.num_of_files,
    "to_df": lambda dt: dt.snapshot().to_df().count(),
    "history": lambda dt: dt.history().count(),
    "load_cdf": lambda dt: dt.load_cdf(0).count(),
}


@pytest.fixture(scope="module")
def long_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    deltalake = pytest.importorskip("deltalake")
    path = tmp_path_factory.mktemp("long") / "table"
    for i in range(LONG_COMMITS):
        deltalake.write_deltalake(
            str(path),
            pa.table({"id": [i], "part": [str(i % 3)]}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None,
        )
    return path


def _damaged_copy(source: Path, target: Path, line: bytes) -> Path:
    shutil.copytree(source, target)
    commit = target / "_delta_log" / f"{DAMAGED_VERSION:020d}.json"
    with commit.open("ab") as file:
        file.write(line)
    return target


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("kind", sorted(INVALID_LINES))
@pytest.mark.parametrize("log", ["short", "long"])
def test_invalid_action_line_is_refused(
    spark: Any, long_table: Path, tmp_path: Path, log: str, kind: str, read: str
) -> None:
    source = CONFORMANCE / "golden" / "checkpoint" / "delta" if log == "short" else long_table
    table = _damaged_copy(source, tmp_path / "table", INVALID_LINES[kind])
    with pytest.raises(CorruptLogFileError) as raised:
        READS[read](DeltaTable.for_path(spark, str(table)))
    message = str(raised.value)
    assert f"{DAMAGED_VERSION:020d}.json" in message
    assert f"version {DAMAGED_VERSION}" in message


def test_valid_lines_of_other_writers_are_read(spark: Any, tmp_path: Path) -> None:
    """Unknown fields, unknown actions, nulls the protocol allows and blank lines are valid."""
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / "golden" / "checkpoint" / "delta", table)
    before = DeltaTable.for_path(spark, str(table)).snapshot(version=DAMAGED_VERSION)
    expected = before.state.num_of_files
    commit = table / "_delta_log" / f"{DAMAGED_VERSION:020d}.json"
    with commit.open("a") as file:
        file.write('{"futureAction": {"x": [1, {"y": 2}]}}\n\n')
        file.write('{"txn": {"appId": "a", "version": 3, "lastUpdated": null, "extra": 1}}\n')
    after = DeltaTable.for_path(spark, str(table)).snapshot(version=DAMAGED_VERSION)
    assert after.state.num_of_files == expected
    assert after.state.set_transactions


@pytest.mark.parametrize("offset_fraction", [0.1, 0.5, 0.9])
def test_checkpoint_with_flipped_bytes_is_a_delta_error_or_rebuilt(
    spark: Any, tmp_path: Path, offset_fraction: float
) -> None:
    source = CONFORMANCE / "golden" / "checkpoint" / "delta"
    expected = DeltaTable.for_path(spark, str(source)).snapshot()
    expected_files = {row["path"] for row in expected.all_files().select("path").collect()}
    table = tmp_path / "table"
    shutil.copytree(source, table)
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    data = bytearray(checkpoint.read_bytes())
    offset = int(len(data) * offset_fraction)
    data[offset] ^= 0xFF
    data[offset + 1] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    try:
        snapshot = DeltaTable.for_path(spark, str(table)).snapshot()
        files = {row["path"] for row in snapshot.all_files().select("path").collect()}
    except DeltaError:
        return  # refused with a Delta error: the other allowed outcome
    assert (snapshot.version, files) == (expected.version, expected_files)


@pytest.mark.parametrize("kind", sorted(INVALID_LINES))
def test_update_refuses_a_new_commit_with_an_invalid_line(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / "golden" / "checkpoint" / "delta", table)
    snapshot = DeltaTable.for_path(spark, str(table)).snapshot()
    assert snapshot.state.num_of_files == 1  # computed, so update() replays only new commits
    new_commit = table / "_delta_log" / f"{snapshot.version + 1:020d}.json"
    new_commit.write_bytes(b'{"commitInfo": {"operation": "WRITE"}}\n' + INVALID_LINES[kind])
    with pytest.raises(CorruptLogFileError, match=f"version {snapshot.version + 1}"):
        _ = snapshot.update().state.num_of_files


V2_JSON = CONFORMANCE / "golden" / "v2-checkpoint-json" / "delta"
V2_PARQUET = CONFORMANCE / "golden" / "v2-checkpoint-parquet" / "delta"
V2_JSON_CHECKPOINT = "00000000000000000002.checkpoint.6374b053-df23-479b-b2cf-c9c550132b49.json"


def _damage_json_checkpoint(checkpoint: Path, kind: str) -> None:
    data = checkpoint.read_bytes()
    if kind == "truncated":
        checkpoint.write_bytes(data[: len(data) // 2])
    elif kind == "not_utf8":
        checkpoint.write_bytes(data[:100] + b"\xff" + data[101:])
    elif kind == "wrong_typed":
        checkpoint.write_bytes(data + INVALID_LINES["wrong_typed"])
    else:  # a parquet file where the JSON was
        parquet = CONFORMANCE / "golden" / "checkpoint" / "delta" / "_delta_log"
        checkpoint.write_bytes((parquet / "00000000000000000010.checkpoint.parquet").read_bytes())


JSON_CHECKPOINT_DAMAGE = ("truncated", "not_utf8", "wrong_typed", "parquet")


def _live_files(snapshot: Any) -> tuple[int, set[str]]:
    rows = snapshot.all_files().select("path").collect()
    return snapshot.version, {row["path"] for row in rows}


@pytest.mark.parametrize("kind", JSON_CHECKPOINT_DAMAGE)
def test_damaged_json_checkpoint_is_read_around(spark: Any, tmp_path: Path, kind: str) -> None:
    """With the commits at hand, the version is rebuilt from them (delta-spark's rule)."""
    expected = _live_files(DeltaTable.for_path(spark, str(V2_JSON)).snapshot())
    table = tmp_path / "table"
    shutil.copytree(V2_JSON, table)
    _damage_json_checkpoint(table / "_delta_log" / V2_JSON_CHECKPOINT, kind)
    assert _live_files(DeltaTable.for_path(spark, str(table)).snapshot()) == expected


@pytest.mark.parametrize("kind", JSON_CHECKPOINT_DAMAGE)
def test_damaged_json_checkpoint_without_commits_is_refused(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    table = tmp_path / "table"
    shutil.copytree(V2_JSON, table)
    for version in (0, 1):
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    _damage_json_checkpoint(table / "_delta_log" / V2_JSON_CHECKPOINT, kind)
    with pytest.raises(CorruptLogFileError) as raised:
        _ = DeltaTable.for_path(spark, str(table)).snapshot().state.num_of_files
    message = str(raised.value)
    assert V2_JSON_CHECKPOINT in message
    assert "version 2" in message


def _broken_page(table: Path, column: str) -> Path:
    """``table``'s version-10 checkpoint with the first data page of ``column`` overwritten."""
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    _overwrite_first_page(checkpoint, column)
    return checkpoint


def _overwrite_first_page(file: Path, column: str) -> None:
    """Overwrite the header of the first data page of ``column`` in the parquet ``file``."""
    row_group = pq.ParquetFile(file).metadata.row_group(0)
    chunk = next(
        row_group.column(i)
        for i in range(row_group.num_columns)
        if row_group.column(i).path_in_schema == column
    )
    data = bytearray(file.read_bytes())
    data[chunk.data_page_offset : chunk.data_page_offset + 4] = b"\xff\xff\xff\xff"
    file.write_bytes(bytes(data))


@pytest.mark.parametrize("column", ["add.tags.key_value.key", "add.deletionVector.storageType"])
def test_checkpoint_page_damage_is_met_before_the_live_files(
    spark: Any, tmp_path: Path, column: str
) -> None:
    """A damaged page of a column no query has read yet: ``all_files()`` (lazy rows the caller
    runs) is refused as the state is, not left to fail with Spark's error at ``collect``."""
    table = tmp_path / "table"
    shutil.copytree(
        CONFORMANCE / "golden" / "basic-with-inserts-deletes-checkpoint" / "delta", table
    )
    checkpoint = _broken_page(table, column)
    snapshot = DeltaTable.for_path(spark, str(table)).snapshot()
    with pytest.raises(CorruptLogFileError, match=checkpoint.name):
        snapshot.all_files().select("path").collect()


@pytest.mark.parametrize(
    ("original", "damaged"),
    [
        ('\\"name\\":\\"birthday\\"', '\\"nAme\\":\\"birthday\\"'),  # fuzzer seed 632
        ('\\"type\\":\\"date\\"', '\\"tyPe\\":\\"date\\"'),
        ('{\\"type\\":\\"struct\\"', '{\\"type\\";\\"struct\\"'),
    ],
    ids=["field-without-name", "field-without-type", "not-json"],
)
def test_a_table_schema_that_is_not_one_is_a_corrupt_log_file(
    spark: Any, tmp_path: Path, original: str, damaged: str
) -> None:
    """A metaData whose schemaString is valid JSON text but no Spark schema: the state and
    the change data feed refuse it (delta-rs too), never a state or pyspark's KeyError."""
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / "kernel" / "cdf-table" / "delta", table)
    commit = table / "_delta_log" / f"{0:020d}.json"
    text = commit.read_text()
    assert original in text
    commit.write_text(text.replace(original, damaged, 1))
    with pytest.raises(CorruptLogFileError, match=r"version \d+: the table schema"):
        _ = DeltaTable.for_path(spark, str(table)).snapshot().state
    with pytest.raises(CorruptLogFileError, match="schemaString"):
        DeltaTable.for_path(spark, str(table)).load_cdf(0).count()
    deltalake = pytest.importorskip("deltalake")
    with pytest.raises(Exception):  # noqa: B017  delta-rs refuses it too (its own error types)
        deltalake.DeltaTable(str(table)).get_add_actions()


def test_change_data_of_a_damaged_path_is_a_missing_file(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / "kernel" / "cdf-table" / "delta", table)
    commit = table / "_delta_log" / f"{0:020d}.json"
    text = commit.read_text()
    path = text.split('"path":"', 2)[1].split('"', 1)[0]  # the first file action's
    damaged = path.replace(".snappy.parquet", ".snappy,parquet")
    commit.write_text(text.replace(path, damaged))
    with pytest.raises(FileReferencedNotFoundError, match="snappy,parquet"):
        DeltaTable.for_path(spark, str(table)).load_cdf(0).count()


def test_checkpoint_whose_footer_lost_a_path_field_is_read_around(
    spark: Any, tmp_path: Path
) -> None:
    """The fuzzer's seed 528: bits flipped in the checkpoint's footer rename ``remove.path``
    to ``pith``; the checkpoint is unreadable (an earlier one, or the commits, rebuild the
    version), never Spark's ``FIELD_NOT_FOUND``."""
    rng = random.Random(528)
    name = rng.choice(fuzz.TABLES)
    assert name == "golden/checkpoint"
    source = CONFORMANCE / name / "delta"
    expected = _live_files(DeltaTable.for_path(spark, str(source)).snapshot())
    table = tmp_path / "table"
    shutil.copytree(source, table)
    assert "checkpoint" in fuzz.damage(table, rng, [table])
    assert _live_files(DeltaTable.for_path(spark, str(table)).snapshot()) == expected


@pytest.mark.parametrize("extra_name", ["other.writer field", "`quoted`", "ext\ufffdnded"])
def test_a_checkpoint_action_field_of_any_name_is_read_past(
    spark: Any, tmp_path: Path, extra_name: str
) -> None:
    """A field of an action struct that Delta does not define (another writer's, or a name a
    flipped footer byte made) is dropped whatever its name holds: Spark parses the names given
    to ``dropFields`` as dotted paths, and read unquoted such a name was a raw
    ``PARSE_SYNTAX_ERROR``."""
    source = CONFORMANCE / "golden" / "checkpoint" / "delta"
    expected = _live_files(DeltaTable.for_path(spark, str(source)).snapshot())
    table = tmp_path / "table"
    shutil.copytree(source, table)
    checkpoint = next((table / "_delta_log").glob("*.checkpoint.parquet"))
    actions = pq.read_table(checkpoint)
    add = actions.column("add").combine_chunks()
    extra = pa.array(["x"] * len(add), pa.string())
    widened = pa.StructArray.from_arrays(
        [*add.flatten(), extra],
        [*(field.name for field in add.type), extra_name],
        mask=add.is_null(),
    )
    index = actions.schema.get_field_index("add")
    pq.write_table(actions.set_column(index, "add", widened), checkpoint)
    assert _live_files(DeltaTable.for_path(spark, str(table)).snapshot()) == expected


def _with_field_as(actions: pa.Table, column: str, field: str | None, value: Any) -> pa.Table:
    """``actions`` with ``column`` (or its ``field``) turned into ``value`` where not null, of
    ``value``'s own type: a column written as another type by a broken writer."""
    struct = actions.column(column).combine_chunks()
    typed = pa.scalar(value).type
    if field is None:
        replaced = pa.array([value if ok else None for ok in struct.is_valid().to_pylist()], typed)
    else:
        names = [child.name for child in struct.type]
        children = [struct.field(i) for i in range(len(names))]
        index = names.index(field)
        old = children[index]
        children[index] = pa.array([None if v is None else value for v in old.to_pylist()], typed)
        replaced = pa.StructArray.from_arrays(children, names, mask=struct.is_null())
    changed = actions.set_column(actions.schema.get_field_index(column), column, replaced)
    # Without the schema Spark's writer kept in the footer, which Spark would trust over the
    # parquet types: as a writer other than Spark leaves it.
    return changed.replace_schema_metadata(None)


MISTYPED_CHECKPOINT_COLUMNS = {
    "add_not_a_struct": ("add", None, "x", "add is string, not struct"),
    "path_a_number": ("add", "path", 7, "add.path is bigint, not string"),
    "size_a_string": ("add", "size", "12", "add.size is string, not bigint"),
    "partition_values_a_string": ("add", "partitionValues", "{}", "add.partitionValues is"),
    "remove_not_a_struct": ("remove", None, "x", "remove is string, not struct"),
    "partition_columns_a_string": ("metaData", "partitionColumns", "[]", "metaData.partition"),
}


@pytest.mark.parametrize("kind", sorted(MISTYPED_CHECKPOINT_COLUMNS))
def test_a_checkpoint_column_of_another_type_is_read_around_or_refused(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    """A checkpoint column (or field) of another kind than the protocol's is a corrupt file,
    never cast into other values (a number as a path: a wrong state) nor a raw Spark error:
    read around with the commits before it (delta-spark's rule for an unreadable checkpoint),
    else ``DELTA_CORRUPT_LOG_FILE`` naming the checkpoint and the column."""
    column, field, value, said = MISTYPED_CHECKPOINT_COLUMNS[kind]
    source = CONFORMANCE / "golden" / "checkpoint" / "delta"
    expected = _live_files(DeltaTable.for_path(spark, str(source)).snapshot())
    table = tmp_path / "table"
    shutil.copytree(source, table)
    checkpoint = table / "_delta_log" / f"{10:020d}.checkpoint.parquet"
    pq.write_table(_with_field_as(pq.read_table(checkpoint), column, field, value), checkpoint)
    assert _live_files(DeltaTable.for_path(spark, str(table)).snapshot()) == expected
    for version in range(10):
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(CorruptLogFileError, match=re.escape(said)) as refused:
        _live_files(DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot())
    assert checkpoint.name in str(refused.value)


def test_checkpoint_page_damage_spark_names_no_file_for_is_a_corrupt_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    """A byte of a dictionary page that makes Spark's parquet reader fail without naming the
    file (``IllegalArgumentException: newLimit > capacity``; delta-spark 4.3.1 gives that raw
    error too) is ``DELTA_CORRUPT_LOG_FILE`` naming the checkpoint."""
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / "delta-rs" / "delta-1.2.1-only-struct-stats" / "delta", table)
    checkpoint = table / "_delta_log" / f"{10:020d}.checkpoint.parquet"
    damaged = bytearray(checkpoint.read_bytes())
    assert damaged[2410] == 0x00
    damaged[2410] = 0x08  # add.stats_parsed.maxValues.struct.struct_element's dictionary
    checkpoint.write_bytes(bytes(damaged))
    snapshot = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot()
    with pytest.raises(CorruptLogFileError, match="parquet reader failed") as refused:
        _live_files(snapshot)
    assert checkpoint.name in str(refused.value) and "newLimit" in str(refused.value)


@pytest.mark.parametrize(
    ("name", "data_type"), [("kernel/cdf-table", "date"), ("delta-rs/cdc_ict_table", "int")]
)
def test_a_partition_value_its_type_cannot_take_is_refused(
    spark: Any, tmp_path: Path, name: str, data_type: str
) -> None:
    """An add whose partition value its column's type cannot take: the rows and the change
    data feed are ``DELTA_FAILED_CAST_PARTITION_VALUE`` naming the value, column and file when
    asked for, not Spark's cast error at the caller's ``collect()``; the state still reads."""
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / name / "delta", table)
    commit = next(
        path
        for path in sorted((table / "_delta_log").glob("*.json"))
        if '"partitionValues":{"' in path.read_text().replace(" ", "")
    )
    lines = commit.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith('{"add"'))
    action = json.loads(lines[index])
    column = next(iter(action["add"]["partitionValues"]))
    action["add"]["partitionValues"][column] = "not-a-value"
    lines[index] = json.dumps(action)
    commit.write_text("\n".join(lines) + "\n")
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    assert dt.snapshot().state.num_of_files > 0
    said = f"`not-a-value` to {data_type}"
    with pytest.raises(FailedCastPartitionValueError, match=said) as refused:
        dt.snapshot(version=int(commit.stem)).to_df()  # the file may be removed later
    assert action["add"]["path"] in str(refused.value)
    with pytest.raises(FailedCastPartitionValueError, match=said):
        dt.load_cdf(0)


#: What a session (or a server's defaults) may set to have Spark's file sources skip files
#: they cannot read, or that vanished after they were listed.
SKIPPING_FILES = {
    "spark.sql.files.ignoreCorruptFiles": "true",
    "spark.sql.files.ignoreMissingFiles": "true",
}


@pytest.fixture(scope="module")
def skipping_spark(spark_remote: str) -> Iterator[Any]:
    """A session of its own (``connect`` would share the module's) that asks Spark to skip
    unreadable and missing files."""
    session = SparkSession.builder.remote(spark_remote).create()
    for key, value in SKIPPING_FILES.items():
        session.conf.set(key, value)
    yield session
    session.stop()


def _half_of_the_second_part(table: Path) -> Path:
    part = table / "_delta_log" / "00000000000000000001.checkpoint.0000000002.0000000002.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    return part


def _broken_tags_page(table: Path) -> Path:
    return _broken_page(table, "add.tags.key_value.key")


CHECKPOINT_DAMAGE: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "multi-part, a part cut short": ("golden/multi-part-checkpoint", _half_of_the_second_part),
    "a page of tags overwritten": (
        "golden/basic-with-inserts-deletes-checkpoint",
        _broken_tags_page,
    ),
}


@pytest.mark.parametrize("damage", sorted(CHECKPOINT_DAMAGE))
def test_a_session_skipping_unreadable_files_reads_a_damaged_checkpoint_as_any_session(
    spark: Any, skipping_spark: Any, tmp_path: Path, damage: str
) -> None:
    """``spark.sql.files.ignoreCorruptFiles`` does not reach the log: a damaged checkpoint is
    read around or refused as in any session (it gave half of the files before), never read as
    if its unreadable part held no actions."""
    relative, damaged = CHECKPOINT_DAMAGE[damage]
    table = tmp_path / "table"
    shutil.copytree(CONFORMANCE / relative / "delta", table)
    damaged(table)

    def outcome(session: Any) -> Any:
        try:
            snapshot = DeltaTable.for_path(session, str(table), snapshot_cache=False).snapshot()
            files = snapshot.all_files().select("path").collect()
            return snapshot.version, snapshot.state.num_of_files, sorted(r["path"] for r in files)
        except DeltaError as error:
            return type(error).__name__

    assert outcome(skipping_spark) == outcome(spark)


@pytest.mark.parametrize("digits", [19, 21])
def test_a_commit_name_without_twenty_digits_is_not_a_commit(
    spark: Any, conformance_table: Any, digits: int
) -> None:
    """A stray copy of the newest commit under a name of another width is not version 14: the
    protocol names commits with 20 digits (delta-rs ignores it too; delta-spark takes it or not
    depending on where its listing starts). Nor is it checkpointed as such."""
    name = "golden/basic-with-inserts-deletes-checkpoint/delta"
    path = conformance_table(name)
    log = path / "_delta_log"
    shutil.copy(log / f"{13:020d}.json", log / f"{14:0{digits}d}.json")
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    pristine = DeltaTable.for_path(spark, str(CONFORMANCE / name), snapshot_cache=False)
    snapshot = table.snapshot()
    assert snapshot.version == 13
    assert snapshot.state == pristine.snapshot().state
    assert sorted(row["version"] for row in table.history().collect()) == list(range(14))
    assert table.create_checkpoint().version == 13
    assert not (log / f"{14:020d}.checkpoint.parquet").exists()


@pytest.mark.parametrize("suffix", ["json", "crc", "checkpoint.parquet"])
def test_a_log_name_beyond_the_largest_version_is_not_a_log_file(
    spark: Any, conformance_table: Any, suffix: str
) -> None:
    """Twenty digits beyond a Java long name no version (delta-rs ignores such a file;
    delta-spark fails with a raw ``NumberFormatException``): it is not read, listed or
    checkpointed, where a worker's listing failed with a raw ``OverflowError``."""
    name = "kernel/crc-full/delta"
    path = conformance_table(name)
    log = path / "_delta_log"
    newest = max(log.glob("*.json"))
    shutil.copy(newest, log / f"{10**20 - 1}.{suffix}")
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    pristine = DeltaTable.for_path(spark, str(CONFORMANCE / name), snapshot_cache=False)
    expected = pristine.snapshot()
    assert table.latest_version() == expected.version
    snapshot = table.snapshot()
    assert (snapshot.version, snapshot.state) == (expected.version, expected.state)
    assert table.history().count() == pristine.history().count()


def test_a_partition_column_missing_from_the_schema_is_refused_for_rows_and_checkpoints(
    spark: Any, conformance_table: Any
) -> None:
    """A metaData naming a partition column its schema lacks: the state, files and history
    read as they are (delta-spark's DESCRIBE DETAIL answers too); rows and a checkpoint, which
    need the column's type, are DELTA_PARTITION_COLUMN_NOT_FOUND naming it, and nothing is
    written."""
    path = conformance_table("delta-rs/simple_table/delta")
    first = path / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in first.read_text().splitlines()]
    for action in actions:
        if "metaData" in action:
            action["metaData"]["partitionColumns"] = ["nope"]
    first.write_text("".join(json.dumps(action) + "\n" for action in actions))
    before = sorted(p.name for p in (path / "_delta_log").iterdir())
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    snapshot = table.snapshot()
    assert snapshot.state.num_of_files == snapshot.all_files().count() > 0
    assert table.history().count() == snapshot.version + 1
    with pytest.raises(PartitionColumnNotFoundError, match="nope"):
        snapshot.to_df()
    with pytest.raises(PartitionColumnNotFoundError, match="nope"):
        table.create_checkpoint()
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == before


@pytest.mark.parametrize("damage", ["protocol", "partition_columns"])
def test_a_version_checksum_that_is_not_the_logs_is_refused(
    spark: Any, conformance_table: Any, damage: str
) -> None:
    """The snapshot takes its P&M from the newest version checksum; one whose protocol or
    metadata is not the log's would decide how rows are read. It is DELTA_CORRUPT_LOG_FILE
    naming the checksum (delta-spark refuses such a table when it checks its state); without
    the checksum the table reads as it is."""
    path = conformance_table("kernel/crc-full/delta")
    checksum = path / "_delta_log" / f"{0:020d}.crc"
    content = json.loads(checksum.read_text())
    if damage == "protocol":
        content["protocol"] = {"minReaderVersion": 1, "minWriterVersion": 2}
    else:
        content["metadata"]["partitionColumns"] = ["id"]
    checksum.write_text(json.dumps(content))
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    with pytest.raises(CorruptLogFileError, match=r"00000000000000000000\.crc") as refused:
        table.snapshot()
    # Which of the two is damaged cannot be told: deleting the checksum is not advised blindly.
    assert "one of the two is damaged" in str(refused.value)
    checksum.unlink()
    pristine = DeltaTable.for_path(spark, str(CONFORMANCE / "kernel/crc-full/delta"))
    assert table.snapshot().state == pristine.snapshot().state


def _cut_in_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["empty", "cut"])
def test_an_unreadable_file_under_the_checkpoints_name_is_refused_and_kept(
    spark: SparkSession, tmp_path: Path, damage: str
) -> None:
    """A file already named as the checkpoint to write (left by a writer that died, or
    damaged) is never replaced; it cannot be counted either, so the write is
    DELTA_CORRUPT_LOG_FILE naming it, and the log is left as it was."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "golden" / "checkpoint" / "delta", table)
    in_place = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    if damage == "empty":
        in_place.write_bytes(b"")
    else:
        _cut_in_half(in_place)
    before = log_bytes(table / "_delta_log")
    with pytest.raises(CorruptLogFileError, match=r"00000000000000000010\.checkpoint\.parquet"):
        DeltaTable.for_path(spark, str(table)).create_checkpoint(10)
    assert log_bytes(table / "_delta_log") == before


@pytest.mark.parametrize("dry_run", [False, True])
def test_cleanup_keeping_an_unreadable_checkpoint_deletes_nothing(
    spark: SparkSession, tmp_path: Path, dry_run: bool
) -> None:
    """The checkpoint a cleanup keeps must rebuild its version: every log file before it is
    deleted, and readers (ours and delta-spark's) read around a damaged checkpoint only with
    those files. Before, a cut checkpoint 10 cost commits 0-9, and versions 10-14 became
    unreadable."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "golden" / "checkpoint" / "delta", table)
    _cut_in_half(table / "_delta_log" / "00000000000000000010.checkpoint.parquet")
    age_log_files(table / "_delta_log")
    before = log_bytes(table / "_delta_log")
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    state = dt.snapshot().state
    with pytest.raises(CorruptLogFileError, match="does not rebuild version 10") as refused:
        dt.cleanup_metadata(dry_run=dry_run)
    assert "nothing was deleted" in str(refused.value)
    assert log_bytes(table / "_delta_log") == before
    assert dt.snapshot().state == state


def test_cleanup_keeps_every_sidecar_when_a_kept_checkpoint_file_is_unreadable(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The sidecar sweep reads the kept checkpoints for the sidecars they name; an empty part
    of a dead multi-part writer names nothing that can be known, so no sidecar is garbage
    (before: a raw ArrowInvalid, after the expired files were already deleted)."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "golden" / "only-checkpoint-files" / "delta", table)
    log = table / "_delta_log"
    (log / "00000000000000000002.checkpoint.0000000001.0000000002.parquet").write_bytes(b"")
    age_log_files(log)
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    state = dt.snapshot().state
    listed = dt.cleanup_metadata(dry_run=True)
    deleted = dt.cleanup_metadata()
    assert sorted(deleted) == sorted(listed)
    assert {path.rsplit("/", 1)[-1] for path in deleted} == {
        "00000000000000000000.json",
        "00000000000000000001.json",
        "00000000000000000001.checkpoint.parquet",
    }
    assert dt.snapshot().state == state


def _with_non_utf8_string(checkpoint: Path, action: str = "add", field: str = "path") -> None:
    """Rewrite ``checkpoint`` with the last byte of its first ``action``'s ``field`` replaced by
    0xFF (no UTF-8: Spark's parquet reader keeps the bytes as they are)."""
    table = pq.read_table(checkpoint)
    column = table.column(action).combine_chunks()
    raw = [None if value is None else value.encode() for value in column.field(field).to_pylist()]
    first = next(i for i, value in enumerate(raw) if value)
    raw[first] = raw[first][:-1] + b"\xff"
    not_utf8 = strings_as_given(raw)
    fields = [not_utf8 if f.name == field else column.field(f.name) for f in column.type]
    damaged = pa.StructArray.from_arrays(fields, fields=list(column.type), mask=column.is_null())
    pq.write_table(
        table.set_column(table.schema.get_field_index(action), action, damaged), checkpoint
    )


@pytest.mark.parametrize("joined", [False, True], ids=["replayed", "joined"])
def test_a_checkpoint_string_that_is_not_utf8_is_refused(
    spark: SparkSession, tmp_path: Path, joined: bool
) -> None:
    """A checkpoint's add path that is not UTF-8 is DELTA_CORRUPT_LOG_FILE naming the file and
    the column: at the state when the checkpoint is replayed with the commits, at
    ``all_files()`` (not a ``UnicodeDecodeError`` at the caller's ``collect``), and at
    ``create_checkpoint``, which writes nothing rather than copy the bytes."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "golden" / "checkpoint" / "delta", table)
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    _with_non_utf8_string(checkpoint)
    before = log_bytes(table / "_delta_log")
    refused = pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*add column.*UTF-8")
    with checkpoint_files(joined):
        dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
        if not joined:
            with refused:
                dt.snapshot().state  # noqa: B018
        else:
            assert dt.snapshot().state.num_of_files == 2  # counted without the strings
        with refused:
            dt.snapshot().all_files().select("path").collect()
        with refused:
            dt.create_checkpoint()
    assert log_bytes(table / "_delta_log") == before


@pytest.mark.parametrize(("version", "action"), [(1, "add"), (3, "cdc")])
def test_a_change_data_action_without_its_path_is_refused_not_skipped(
    spark: SparkSession, tmp_path: Path, version: int, action: str
) -> None:
    """The change data feed reads every action of its commits through the line checks: one
    whose path key is damaged is DELTA_CORRUPT_LOG_FILE naming the commit, not a row less."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "delta-rs" / "cdc_ict_table" / "delta", table)
    commit = table / "_delta_log" / f"{version:020d}.json"
    lines = commit.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(f'{{"{action}"'))
    lines[first] = lines[first].replace('"path"', '"patx"', 1)
    commit.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorruptLogFileError, match=rf"{commit.name}.*{action} action has no path"):
        DeltaTable.for_path(spark, str(table)).load_cdf(0).count()


@pytest.mark.parametrize("field", ["storageType", "pathOrInlineDv", "cardinality"])
def test_a_deletion_vector_missing_a_required_field_is_refused(
    spark: SparkSession, tmp_path: Path, field: str
) -> None:
    """A descriptor without its storage type was read as no deletion vector (50 rows for 47),
    one without its path keyed the file apart from its later remove (the file live twice):
    DELTA_CORRUPT_LOG_FILE naming the commit, for the state and the rows."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "golden" / "log-replay-dv-key-cases" / "delta", table)
    commit = table / "_delta_log" / f"{1:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    damaged = next(a for a in actions if "add" in a and a["add"].get("deletionVector"))
    del damaged["add"]["deletionVector"][field]
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    refused = rf"{commit.name}.*deletionVector has no {field}"
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    with pytest.raises(CorruptLogFileError, match=refused):
        _ = dt.snapshot().state
    with pytest.raises(CorruptLogFileError, match=refused):
        dt.snapshot().to_df().count()


def test_a_sidecar_footer_naming_a_column_twice_is_a_corrupt_log_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    """One bit of the Spark schema a sidecar's footer keeps turns ``pathOrInlineDv`` into
    ``PathOrInlineDv``: Spark refuses the file's schema (COLUMN_ALREADY_EXISTS, naming no
    file); DELTA_CORRUPT_LOG_FILE naming the sidecars, not a raw AnalysisException."""
    table = tmp_path / "t"
    shutil.copytree(V2_PARQUET, table)
    sidecar = sorted((table / "_delta_log" / "_sidecars").glob("*.parquet"))[0]
    data = bytearray(sidecar.read_bytes())
    at = data.rindex(b'"name":"pathOrInlineDv"') + len(b'"name":"')
    data[at] ^= 0x20
    sidecar.write_bytes(bytes(data))
    with pytest.raises(CorruptLogFileError, match=r"_sidecars/.*COLUMN_ALREADY_EXISTS"):
        _ = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot().state


def test_without_observed_metrics_a_replayed_checkpoint_is_still_counted_and_tested(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that sends no observed metrics for the replay of a small checkpoint with its
    commits (a busy driver sends them empty): the state is queried, and a job tests the
    checkpoint's strings, which the replay would have counted."""
    source = CONFORMANCE / "golden" / "checkpoint" / "delta"
    expected = DeltaTable.for_path(spark, str(source), snapshot_cache=False).snapshot().state
    monkeypatch.setattr(spark_plans, "observed_metrics", lambda info: None)
    assert DeltaTable.for_path(spark, str(source), snapshot_cache=False).snapshot().state == (
        expected
    )
    table = tmp_path / "t"
    shutil.copytree(source, table)
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    _with_non_utf8_string(checkpoint)
    with pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*add column.*UTF-8"):
        _ = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot().state


@pytest.mark.parametrize("joined", [False, True], ids=["replayed", "joined"])
def test_a_checkpoint_transaction_that_is_not_utf8_is_refused(
    spark: SparkSession, tmp_path: Path, joined: bool
) -> None:
    """A checkpoint's txn appId that is not UTF-8 is DELTA_CORRUPT_LOG_FILE naming the file and
    the column, whether the checkpoint is replayed with the commits or only its non-file rows
    are, at ``transactions()`` and at ``create_checkpoint``, which writes nothing."""
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / "kernel" / "app-txn-checkpoint" / "delta", table)
    checkpoint = table / "_delta_log" / "00000000000000000001.checkpoint.parquet"
    _with_non_utf8_string(checkpoint, "txn", "appId")
    before = log_bytes(table / "_delta_log")
    refused = pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*txn column.*UTF-8")
    with checkpoint_files(joined):
        dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
        with refused:
            dt.create_checkpoint()
        with refused:
            dt.snapshot().transactions()
    assert log_bytes(table / "_delta_log") == before


def _without_field_in_one_row(
    checkpoint: Path, action: str, field: str, descriptor: str | None = None
) -> None:
    """Rewrite ``checkpoint`` with ``field`` of the first ``action`` that has it (or of that
    action's ``descriptor`` struct) made null, the struct itself kept: valid parquet whose
    action lacks a field the protocol requires."""
    table = pq.read_table(checkpoint)
    column = table.column(action).combine_chunks()
    inner = column if descriptor is None else column.field(descriptor)
    values = inner.field(field).to_pylist()
    first = next(i for i, value in enumerate(values) if value is not None)
    values[first] = None
    emptied = pa.array(values, inner.type.field(field).type)
    fields = [emptied if f.name == field else inner.field(f.name) for f in inner.type]
    damaged = pa.StructArray.from_arrays(fields, fields=list(inner.type), mask=inner.is_null())
    if descriptor is not None:
        outer = [damaged if f.name == descriptor else column.field(f.name) for f in column.type]
        damaged = pa.StructArray.from_arrays(outer, fields=list(column.type), mask=column.is_null())
    pq.write_table(
        table.set_column(table.schema.get_field_index(action), action, damaged), checkpoint
    )


_DV_TABLE = CONFORMANCE / "golden" / "kernel-basic-dv-with-checkpoint" / "delta"


@pytest.mark.parametrize("joined", [False, True], ids=["replayed", "joined"])
@pytest.mark.parametrize(
    ("source", "action", "descriptor", "field"),
    [
        (_DV_TABLE, "add", "deletionVector", "storageType"),
        (_DV_TABLE, "add", "deletionVector", "cardinality"),
        (CONFORMANCE / "golden" / "checkpoint" / "delta", "add", None, "path"),
        (CONFORMANCE / "golden" / "checkpoint" / "delta", "add", None, "size"),
    ],
    ids=["dv storageType", "dv cardinality", "add path", "add size"],
)
def test_a_checkpoint_action_without_a_required_field_is_refused(
    spark: SparkSession,
    tmp_path: Path,
    joined: bool,
    source: Path,
    action: str,
    descriptor: str | None,
    field: str,
) -> None:
    """A checkpoint action lacking a field the protocol requires is DELTA_CORRUPT_LOG_FILE
    naming the file and the field, as a commit line is, whether the checkpoint is replayed
    with the commits or joined to them. Before, a deletion vector without ``storageType``
    keyed its add as a file without one, which the checkpoint's own remove of the file then
    beat (250 rows for 490); an add without ``path`` was dropped; one without ``cardinality``
    was a raw Python error in the worker reading the vector."""
    table = tmp_path / "t"
    shutil.copytree(source, table)
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    _without_field_in_one_row(checkpoint, action, field, descriptor)
    what = action if descriptor is None else f"{action} action's {descriptor}"
    with checkpoint_files(joined):
        snapshot = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot(10)
        with pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*{what}.* no {field}"):
            snapshot.to_df().count()


def _without_schema_field(checkpoint: Path, action: str, dotted: str) -> None:
    """Rewrite ``checkpoint`` with the field ``dotted`` (``size``, ``deletionVector.storageType``)
    left out of its ``action`` column's type altogether: valid parquet a writer could have
    written without the field."""

    def without(column: pa.Array, parts: list[str]) -> pa.Array:
        assert isinstance(column, pa.StructArray)
        kept = []
        for index, child in enumerate(column.type):
            if child.name != parts[0]:
                kept.append((child, column.field(index)))
            elif len(parts) > 1:
                inner = without(column.field(index), parts[1:])
                kept.append((pa.field(child.name, inner.type), inner))
        return pa.StructArray.from_arrays(
            [values for _, values in kept], fields=[f for f, _ in kept], mask=column.is_null()
        )

    table = pq.read_table(checkpoint)
    damaged = without(table.column(action).combine_chunks(), dotted.split("."))
    index = table.schema.get_field_index(action)
    pq.write_table(
        table.set_column(index, action, damaged).replace_schema_metadata(None), checkpoint
    )


@pytest.mark.parametrize(
    ("action", "field"),
    [
        ("add", "partitionValues"),
        ("add", "size"),
        ("add", "deletionVector.storageType"),
        ("metaData", "partitionColumns"),
    ],
)
def test_a_checkpoint_schema_without_a_required_field_is_read_around_or_refused(
    spark: SparkSession, tmp_path: Path, action: str, field: str
) -> None:
    """A checkpoint whose parquet schema lacks a field the protocol requires is a damaged
    checkpoint: read around with the commits before it (the undamaged state and rows), else
    DELTA_CORRUPT_LOG_FILE naming the file and the field. Before, every row read the field as
    null: a partitioned file without its partition values, sizes summed without the
    checkpoint's, the vector's file dropped (227 rows for 454), the table unpartitioned."""
    table = tmp_path / "t"
    shutil.copytree(_DV_TABLE, table)
    log = table / "_delta_log"
    checkpoint = log / "00000000000000000010.checkpoint.parquet"
    _without_schema_field(checkpoint, action, field)
    pristine = DeltaTable.for_path(spark, str(_DV_TABLE)).snapshot(10)
    snapshot = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot(10)
    assert snapshot.state == pristine.state
    assert snapshot.partition_columns == pristine.partition_columns
    assert snapshot.to_df().count() == pristine.to_df().count()
    for version in range(10):
        (log / f"{version:020d}.json").unlink()
    name = field.rpartition(".")[2]
    with pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*has no {name} field"):
        _ = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot(10).state


@pytest.mark.parametrize("joined", [False, True], ids=["replayed", "joined"])
def test_a_checkpoint_remove_never_ends_an_add_of_the_same_checkpoint(
    spark: SparkSession, tmp_path: Path, joined: bool
) -> None:
    """A checkpoint holding an add and a remove of the same file (no valid checkpoint does)
    keeps the file live, whichever path reads it, as delta-rs and Delta Kernel read it: a
    checkpoint's removes are tombstones only. Before, the replayed path dropped the file
    where the joined one kept it."""
    table = tmp_path / "t"
    source = CONFORMANCE / "golden" / "checkpoint" / "delta"
    shutil.copytree(source, table)
    checkpoint = table / "_delta_log" / "00000000000000000010.checkpoint.parquet"
    actions = pq.read_table(checkpoint)
    first_add = actions.filter(pc.is_valid(actions.column("add"))).slice(0, 1)
    add = first_add.column("add").to_pylist()[0]
    remove = {"path": add["path"], "deletionTimestamp": add["modificationTime"], "dataChange": True}
    as_remove = pa.table(
        {
            name: pa.array([remove if name == "remove" else None], actions.schema.field(name).type)
            for name in actions.column_names
        }
    )
    pq.write_table(pa.concat_tables([actions, as_remove]), checkpoint)
    pristine = DeltaTable.for_path(spark, str(source)).snapshot()
    with checkpoint_files(joined):
        snapshot = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot()
        assert snapshot.state.num_of_files == pristine.state.num_of_files
        assert snapshot.all_files().count() == pristine.state.num_of_files


def test_a_sidecar_named_twice_is_read_once(spark: SparkSession, tmp_path: Path) -> None:
    """A V2 checkpoint naming one sidecar twice holds its actions once: before, each of its
    adds counted twice (delta-rs still counts them so)."""
    table = tmp_path / "t"
    shutil.copytree(V2_PARQUET, table)
    checkpoint = next((table / "_delta_log").glob("*.checkpoint.*.parquet"))
    actions = pq.read_table(checkpoint)
    sidecar_rows = actions.filter(pc.is_valid(actions.column("sidecar")))
    pq.write_table(pa.concat_tables([actions, sidecar_rows]), checkpoint)
    pristine = DeltaTable.for_path(spark, str(V2_PARQUET)).snapshot()
    snapshot = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot()
    assert snapshot.state == pristine.state
    assert snapshot.all_files().count() == pristine.state.num_of_files


@pytest.mark.parametrize(
    ("action", "field", "commits_kept"),
    [("sidecar", "path", True), ("metaData", "id", False)],
    ids=["a sidecar's name", "the metadata without the commits"],
)
def test_a_checkpoint_action_read_for_the_snapshot_that_is_not_utf8_is_refused(
    spark: SparkSession, tmp_path: Path, action: str, field: str, commits_kept: bool
) -> None:
    """A string that is not UTF-8 in a checkpoint action the client itself reads (a sidecar's
    name; the protocol or metadata when no commit can stand in for them) is
    DELTA_CORRUPT_LOG_FILE naming the file and the column, not a UnicodeDecodeError from the
    client's conversion of the rows."""
    table = tmp_path / "t"
    shutil.copytree(V2_PARQUET, table)
    log = table / "_delta_log"
    checkpoint = next(log.glob("*.checkpoint.*.parquet"))
    _with_non_utf8_string(checkpoint, action, field)
    if not commits_kept:
        for version in (0, 1):
            (log / f"{version:020d}.json").unlink()
    before = log_bytes(log)
    refused = pytest.raises(CorruptLogFileError, match=rf"{checkpoint.name}.*{action} column")
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    with refused:
        _ = dt.snapshot().state
    with refused:
        dt.create_checkpoint()
    assert log_bytes(log) == before


def test_a_checkpoint_metadata_that_is_not_utf8_is_read_around_with_the_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    expected = _live_files(DeltaTable.for_path(spark, str(V2_PARQUET)).snapshot())
    table = tmp_path / "t"
    shutil.copytree(V2_PARQUET, table)
    _with_non_utf8_string(
        next((table / "_delta_log").glob("*.checkpoint.*.parquet")), "metaData", "id"
    )
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    assert _live_files(dt.snapshot()) == expected


def _damaged_sidecar(table: Path) -> None:
    sidecar = sorted((table / "_delta_log" / "_sidecars").glob("*.parquet"))[0]
    _overwrite_first_page(sidecar, "add.tags.key_value.key")


def _non_utf8_checkpoint(table: Path) -> None:
    _with_non_utf8_string(table / "_delta_log" / "00000000000000000010.checkpoint.parquet")


KEPT_CHECKPOINT_DAMAGE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "a sidecar's page overwritten": ("golden/v2-checkpoint-parquet", _damaged_sidecar),
    "a string that is not UTF-8": ("golden/checkpoint", _non_utf8_checkpoint),
}


@pytest.mark.parametrize("damage", sorted(KEPT_CHECKPOINT_DAMAGE))
def test_cleanup_keeping_a_checkpoint_whose_values_do_not_decode_deletes_nothing(
    spark: SparkSession, tmp_path: Path, damage: str
) -> None:
    """The kept checkpoint's every value must decode, its sidecars' too (a V2 checkpoint's
    file actions live there; before, only the top-level file was read and the commits that a
    reader needs to read around a damaged sidecar were deleted), and its strings must be
    UTF-8: else DELTA_CORRUPT_LOG_FILE, with nothing deleted."""
    relative, damaged = KEPT_CHECKPOINT_DAMAGE[damage]
    table = tmp_path / "t"
    shutil.copytree(CONFORMANCE / relative / "delta", table)
    damaged(table)
    age_log_files(table / "_delta_log")
    before = log_bytes(table / "_delta_log")
    dt = DeltaTable.for_path(spark, str(table), snapshot_cache=False)
    for dry_run in (True, False):
        with pytest.raises(CorruptLogFileError, match=r"does not rebuild version|UTF-8"):
            dt.cleanup_metadata(dry_run=dry_run)
    assert log_bytes(table / "_delta_log") == before
