"""Table rows as DataFrames: conformance tables against their expected contents, deletion
vectors, column mapping, partition values, pruning / data skipping, delta-rs as the oracle.

Row order is ignored: rows are compared as sorted lists of canonical values (maps as sorted
items, timestamps as naive UTC, NaN as a marker).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_connect_py import DeltaTable
from delta_connect_py.data import select_files
from delta_connect_py.errors import (
    DeletionVectorInvalidError,
    FileReferencedNotFoundError,
    InvalidArgumentError,
    ReadTableWithoutColumnsError,
)
from delta_connect_py.plans.spark import session_conf
from tests.conftest import CONFORMANCE
from tests.dv_encoding import portable_array, z85_encode
from tests.parquet_renaming import rewrite_with_renamed_columns

#: golden tables whose expected/ holds Spark-written parquet of the latest contents.
GOLDEN_WITH_EXPECTED = sorted(
    path.parent.name for path in (CONFORMANCE / "golden").glob("*/expected")
)
#: (case, version or None for latest) for every DAT expected table_content.parquet.
DAT_VERSIONS = sorted(
    (path.parent.parent.parent.name, path.parent.name)
    for path in (CONFORMANCE / "dat").glob("*/expected/*/table_content.parquet")
)


def canonical(value: Any) -> Any:
    """A hashable, order-free, comparable form of one Arrow Python value."""
    if isinstance(value, dict):
        return ("struct", tuple(sorted((k, canonical(v)) for k, v in value.items())))
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return ("map", tuple(sorted((repr(canonical(k)), canonical(v)) for k, v in value)))
        return ("list", tuple(canonical(v) for v in value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def canonical_rows(table: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    rows = table.select(columns).to_pylist()
    return sorted((tuple(canonical(row[c]) for c in columns) for row in rows), key=repr)


def assert_same_rows(actual: pa.Table, expected: pa.Table, *, subset: bool = False) -> None:
    """Same rows; ``subset``: ``expected`` may hold only some of the columns."""
    if subset:
        assert set(expected.column_names) <= set(actual.column_names)
    else:
        assert sorted(actual.column_names) == sorted(expected.column_names)
    columns = expected.column_names
    assert actual.num_rows == expected.num_rows
    assert canonical_rows(actual, columns) == canonical_rows(expected, columns)


def read_expected(directory: Path) -> pa.Table:
    files = sorted(directory.glob("*.parquet"))
    tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(tables, promote_options="permissive")


def to_arrow(df: Any) -> pa.Table:
    return df.toArrow()


#: Columns whose expected values contradict the table's own data files (checked by reading the
#: raw parquet with pyarrow: every ``array_of_structs`` value is ``[{ab: i}, {ab: i}]`` with ``ab``
#: int32, while expected/ says ``[{ab: i}, null]`` with int64). Not compared.
EXPECTED_DISAGREES_WITH_DATA = {
    "table-with-columnmapping-mode-id": ("array_of_structs",),
    "table-with-columnmapping-mode-name": ("array_of_structs",),
}


@pytest.mark.parametrize("name", GOLDEN_WITH_EXPECTED)
def test_golden_table_reads_its_expected_contents(
    spark: Any, conformance_table: Any, name: str
) -> None:
    root = conformance_table(f"golden/{name}/delta")
    table = DeltaTable.for_path(spark, str(root))
    # Like delta-spark, timestamp partition values without a zone are read in the session time
    # zone; this table was written (and its expected data produced) in America/Los_Angeles.
    zone = "America/Los_Angeles" if name == "data-reader-partition-values" else "UTC"
    with session_conf(spark, {"spark.sql.session.timeZone": zone}):
        actual = to_arrow(table.snapshot().to_df())
    # kernel-rs's expected data for the column mapping tables leaves out a few nested columns.
    subset = name.startswith("table-with-columnmapping-mode-")
    expected = read_expected(CONFORMANCE / "golden" / name / "expected")
    expected = expected.drop_columns(
        [c for c in EXPECTED_DISAGREES_WITH_DATA.get(name, ()) if c in expected.column_names]
    )
    assert_same_rows(actual, expected, subset=subset)


@pytest.mark.parametrize(("case", "version"), DAT_VERSIONS)
def test_dat_case_reads_expected_contents_at_every_version(
    spark: Any, conformance_table: Any, case: str, version: str
) -> None:
    root = conformance_table(f"dat/{case}/delta")
    expected_dir = CONFORMANCE / "dat" / case / "expected" / version
    metadata = json.loads((expected_dir / "table_version_metadata.json").read_text())
    table = DeltaTable.for_path(spark, str(root))
    snapshot = table.snapshot(None if version == "latest" else metadata["version"])
    assert snapshot.version == metadata["version"]
    actual = to_arrow(snapshot.to_df())
    assert_same_rows(actual, pq.read_table(expected_dir / "table_content.parquet"))


# Conformance tables without expected data: exact counts where upstream or delta-rs's DV-aware
# scan (INDEX.md "SELECT count(*)") states them. Fake-data-file tables are skipped on purpose:
SKIPPED_FAKE_DATA = {
    "golden/checkpoint": "1-byte fake data files (log replay fixture)",
    "delta-rs/err-logs-table_a": "log-only, no data files",
    "golden/spark-table-with-dv-small": "test-only DV file prefix: DVs not resolvable",
}
COUNTS = {
    "delta-rs/table_with_deletion_logs": 98,
    "kernel/table-with-dv-small": 8,
    "golden/kernel-basic-dv-with-checkpoint": 454,
    "kernel/with-short-dv": 7,
    "golden/hive__deltatbl-special-chars-in-partition-column": 10,
    "golden/kernel-timestamp-partition-col-ISO8601": 2,
    "golden/spark-delta-0.1.0": 3,
    "delta-rs/table_with_column_mapping": 5,
    "delta-rs/delta-0.8.0-special-partition": 2,
    "delta-rs/delta-2.2.0-partitioned-types": 3,
    "kernel/timestamp-partitioned-table": 1,
    "kernel/external-table-different-nullability": 7,
    "delta-rs/checkpoint-v2-table": 44,
    "delta-rs/delta-0.8-empty": 0,
}


@pytest.mark.parametrize("relative", sorted(COUNTS))
def test_row_counts_match_dv_aware_readers(
    spark: Any, conformance_table: Any, relative: str
) -> None:
    root = conformance_table(f"{relative}/delta")
    expected = COUNTS[relative]
    table = DeltaTable.for_path(spark, str(root))
    assert table.snapshot().to_df().count() == expected


def test_a_dv_path_that_is_not_absolute_is_an_invalid_deletion_vector(
    spark: Any, conformance_table: Any
) -> None:
    """delta-spark's template table: its ``p`` DV path keeps the test's placeholder
    (``file:{{FOLDER_WITH_SPECIAL_CHAR}}/...``), a relative path after the scheme. It gave
    Spark's raw ``URISyntaxException``; a Delta error names the data file and the path."""
    root = conformance_table("golden/spark-table-with-dv-special-char/delta")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    with pytest.raises(DeletionVectorInvalidError, match="FOLDER_WITH_SPECIAL_CHAR") as raised:
        snapshot.to_df().count()
    assert "not an absolute path URI" in str(raised.value)


@pytest.mark.parametrize(
    "relative", ["golden/corrupted-last-checkpoint", "golden/update-deleted-directory"]
)
def test_a_table_without_schema_string_has_no_columns_and_no_rows_to_read(
    spark: Any, conformance_table: Any, relative: str
) -> None:
    """delta-spark's own test tables whose metaData has no schemaString: delta-spark gives the
    empty schema and refuses to read rows (``DELTA_READ_TABLE_WITHOUT_COLUMNS``, measured on
    its Connect server); the state and a checkpoint are read and written as for any table."""
    root = conformance_table(f"{relative}/delta")
    table = DeltaTable.for_path(spark, str(root))
    snapshot = table.snapshot()
    assert snapshot.schema.fields == []
    with pytest.raises(ReadTableWithoutColumnsError, match=f"version {snapshot.version}"):
        snapshot.to_df()
    files = snapshot.state.num_of_files
    assert table.create_checkpoint().num_of_add_files == files


@pytest.mark.cluster
def test_dv_partitioned_with_checkpoint_counts_35_not_37(
    spark: Any, conformance_table: Any
) -> None:
    root = conformance_table("golden/dv-partitioned-with-checkpoint/delta")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    assert snapshot.to_df().count() == 35
    assert sum(f.deletion_vector is not None for f in select_files(snapshot)) > 0


@pytest.mark.worker_errors
def test_missing_data_file_raises_a_delta_error_naming_it(
    spark: Any, conformance_table: Any
) -> None:
    root = conformance_table("golden/time-travel-start-start20-start40/delta")
    victim = sorted(root.glob("*.parquet"))[0]
    victim.unlink()
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(FileReferencedNotFoundError) as raised:
        table.snapshot().to_df()
    assert victim.name in str(raised.value)
    assert raised.value.getErrorClass() == "DELTA_FILE_NOT_FOUND_DETAILED"


@pytest.mark.worker_errors
def test_a_missing_data_file_whose_path_holds_spaces_is_named_whole(
    spark: Any, conformance_table: Any
) -> None:
    """delta-spark writes a timestamp partition's directory with a space in it: the error names
    the whole path, not its part before the space."""
    root = conformance_table("golden/data-reader-partition-values/delta")
    victim = next(f for f in sorted(root.rglob("*.parquet")) if " " in str(f.relative_to(root)))
    victim.unlink()
    with pytest.raises(FileReferencedNotFoundError) as raised:
        DeltaTable.for_path(spark, str(root)).snapshot().to_df().collect()
    assert str(victim.relative_to(root)) in str(raised.value)


def test_columns_and_filter_select_rows(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/dv-partitioned-with-checkpoint/delta")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    everything = to_arrow(snapshot.to_df()).to_pylist()
    some = snapshot.to_df(columns=["col1"], filter=[("part", "=", 0), ("col1", ">", 2)])
    assert some.columns == ["col1"]
    wanted = sorted(r["col1"] for r in everything if r["part"] == 0 and r["col1"] > 2)
    assert sorted(r["col1"] for r in to_arrow(some).to_pylist()) == wanted
    mapped = conformance_table("golden/dv-with-columnmapping/delta")  # physical partition keys
    mapped_snapshot = DeltaTable.for_path(spark, str(mapped)).snapshot()
    assert (
        0
        < len(select_files(mapped_snapshot, [("part", "=", 0)]))
        < len(select_files(mapped_snapshot))
    )


# ---------------------------------------------------------------------------------------------
# delta-rs written tables: to_df equals delta-rs's own read of the same version.


def _write_random_table(path: Path, seed: int, partitioned: bool) -> None:
    import random

    rng = random.Random(seed)
    for batch in range(3):
        n = rng.randint(5, 40)
        data = pa.table(
            {
                "id": pa.array([batch * 1000 + i for i in range(n)], pa.int64()),
                "part": pa.array([rng.choice(["a", "b", "c d", "e%f"]) for _ in range(n)]),
                "value": pa.array([rng.random() if rng.random() > 0.1 else None for _ in range(n)]),
                "day": pa.array(
                    [dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 9)) for _ in range(n)]
                ),
            }
        )
        write_deltalake(
            str(path),
            data,
            mode="append",
            partition_by=["part"] if partitioned else None,
        )
    RsDeltaTable(str(path)).delete(f"id % {rng.randint(2, 5)} = 0")
    RsDeltaTable(str(path)).delete("part = 'b'" if partitioned else "id > 2030")


def _rs_rows(path: Path, version: int) -> pa.Table:
    from deltalake import QueryBuilder

    table = RsDeltaTable(str(path), version=version)
    return pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())


@pytest.mark.cluster
@pytest.mark.parametrize("partitioned", [False, True])
def test_delta_rs_tables_read_like_delta_rs(spark: Any, tmp_path: Path, partitioned: bool) -> None:
    path = tmp_path / "rs"
    _write_random_table(path, seed=7 + partitioned, partitioned=partitioned)
    table = DeltaTable.for_path(spark, str(path))
    for version in (2, table.latest_version()):
        actual = to_arrow(table.snapshot(version).to_df())
        expected = _rs_rows(path, version)
        assert_same_rows(actual, expected)


# ---------------------------------------------------------------------------------------------
# Pruning and skipping: fewer files, never a different result.


@pytest.fixture(scope="module")
def skipping_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("skipping") / "t"
    for part in range(4):
        for first in (part * 100, part * 100 + 50):
            ids = range(first, first + 50)
            # A nested column: stats keyed info -> score; every 10th struct null.
            info = [None if i % 10 == 3 else {"score": 2 * i, "tag": f"t{i % 7}"} for i in ids]
            data = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "part": pa.array([part] * 50, pa.int32()),
                    "name": pa.array([f"n{part}{i % 50:02d}" for i in ids]),
                    "info": pa.array(
                        info, pa.struct([("score", pa.int64()), ("tag", pa.string())])
                    ),
                }
            )
            write_deltalake(str(path), data, mode="append", partition_by=["part"])
    return path


def test_partition_pruning_reads_fewer_files(spark: Any, skipping_table: Path) -> None:
    snapshot = DeltaTable.for_path(spark, str(skipping_table)).snapshot()
    assert len(select_files(snapshot)) == 8
    assert len(select_files(snapshot, [("part", "=", 2)])) == 2
    assert len(select_files(snapshot, [("part", "in", [0, 3])])) == 4
    assert len(select_files(snapshot, [("part", ">", 10)])) == 0
    assert snapshot.to_df(filter=[("part", "=", 2)]).count() == 100


def test_data_skipping_reads_fewer_files(spark: Any, skipping_table: Path) -> None:
    snapshot = DeltaTable.for_path(spark, str(skipping_table)).snapshot()
    chosen = select_files(snapshot, [("id", ">=", 120), ("id", "<", 140)])
    assert len(chosen) == 1
    assert snapshot.to_df(filter=[("id", ">=", 120), ("id", "<", 140)]).count() == 20
    assert len(select_files(snapshot, [("name", "=", "n301")])) == 2


def test_data_skipping_on_a_nested_field(spark: Any, skipping_table: Path) -> None:
    snapshot = DeltaTable.for_path(spark, str(skipping_table)).snapshot()
    in_range = [("info.score", ">=", 240), ("info.score", "<", 280)]
    assert len(select_files(snapshot, in_range)) == 1
    rows = snapshot.to_df(columns=["id"], filter=in_range).collect()
    assert sorted(r["id"] for r in rows) == [i for i in range(120, 140) if i % 10 != 3]
    assert len(select_files(snapshot, [("info.score", ">", 10_000)])) == 0
    assert len(select_files(snapshot, [("info.tag", "=", "t3")])) == 8  # in every file
    with pytest.raises(InvalidArgumentError, match=r"filter=\['info.nope'\]"):
        snapshot.to_df(filter=[("info.nope", "=", 1)])


def test_strings_for_boolean_date_and_timestamp_columns_are_cast_before_any_read(
    spark: Any, tmp_path: Path
) -> None:
    """Spark casts a string compared with such a column when the rows are read: one it cannot
    cast failed the caller's collect with a JVM trace (or, without ANSI, matched nothing). Each
    is now cast up front, in the session's time zone, and a bad one is refused at once."""
    utc = dt.timezone.utc
    days = [dt.date(2024, 1, d) for d in (1, 2, 3)]
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "flag": [True, False, True],
            "day": pa.array(days, pa.date32()),
            "at": pa.array(
                [dt.datetime(2024, 1, d, 12, tzinfo=utc) for d in (1, 2, 3)],
                pa.timestamp("us", tz="UTC"),
            ),
            "local": pa.array([dt.datetime(2024, 1, d, 12) for d in (1, 2, 3)], pa.timestamp("us")),
        }
    )
    write_deltalake(str(tmp_path / "t"), rows)
    snapshot = DeltaTable.for_path(spark, str(tmp_path / "t")).snapshot()

    def ids(filter: Any) -> set[int]:
        return {row["id"] for row in snapshot.to_df(["id"], filter).collect()}

    with session_conf(spark, {"spark.sql.session.timeZone": "UTC"}):
        assert ids([("flag", "=", "true")]) == {1, 3}
        assert ids([("flag", "=", " No ")]) == {2}
        assert ids([("day", "in", ["2024-01-01", "2024-01-03"])]) == {1, 3}
        assert ids([("at", ">", "2024-01-02 12:00:00")]) == {3}
        assert ids([("local", "<", "2024-01-02")]) == {1}
        for bad in [
            ("flag", "=", "maybe"),
            ("day", "in", ["2024-01-01", "the first"]),
            ("at", "<", "garbage"),
            ("local", "=", "31/12/2024"),
        ]:
            with pytest.raises(InvalidArgumentError) as raised:
                snapshot.to_df(filter=[bad])
            assert repr(bad[0]) in raised.value.message_parameters["expected"]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_nested_filter_on_a_column_mapped_table(
    spark: Any, conformance_table: Any, mode: str
) -> None:
    """Nested stats are keyed by each level's physical name; the filter by logical names."""
    root = conformance_table(f"golden/table-with-columnmapping-mode-{mode}/delta")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    everything = [r["nested_struct"] for r in snapshot.to_df(columns=["nested_struct"]).collect()]
    assert len(select_files(snapshot)) == 2
    for op, value, files in [("<", 1, 1), (">=", 1, 2), ("=", 4, 1), (">", 9, 0)]:
        column_filter = [("nested_struct.ac.aca", op, value)]
        assert len(select_files(snapshot, column_filter)) == files
        rows = snapshot.to_df(columns=["nested_struct"], filter=column_filter).collect()
        compare = {"<": int.__lt__, ">=": int.__ge__, "=": int.__eq__, ">": int.__gt__}[op]
        expected = [s for s in everything if s is not None and compare(s.ac.aca, value)]
        assert sorted(r["nested_struct"] for r in rows) == sorted(expected)


def test_id_mode_matches_parquet_columns_by_field_id(spark: Any, conformance_table: Any) -> None:
    """Column mapping mode id: the protocol resolves columns by parquet field id, not by name.
    The data files are rewritten with every column and struct field renamed, as an older file
    of a table converted from Iceberg may be; the rows must not change."""
    root = conformance_table("golden/table-with-columnmapping-mode-id/delta")
    before = to_arrow(DeltaTable.for_path(spark, str(root)).snapshot().to_df())
    for path in sorted(root.glob("*.parquet")):
        old_names = rewrite_with_renamed_columns(path)
        assert not old_names & set(pq.read_schema(path).names)  # no name left to match by
    after = to_arrow(DeltaTable.for_path(spark, str(root)).snapshot().to_df())
    # Every column has values: a column read by name from the renamed files would be all null.
    assert all(before.column(c).null_count < before.num_rows for c in before.column_names)
    assert_same_rows(after, before)


def test_an_or_of_filters_reads_the_files_of_either(spark: Any, skipping_table: Path) -> None:
    snapshot = DeltaTable.for_path(spark, str(skipping_table)).snapshot()

    def paths(filter: Any) -> set[str]:
        return {data_file.path for data_file in select_files(snapshot, filter)}

    in_part = [("part", "=", 2)]
    in_range = [("id", ">=", 120), ("id", "<", 140)]
    either = paths([in_part, in_range])
    assert either == paths(in_part) | paths(in_range) and len(either) < 8
    everything = snapshot.to_df(columns=["id", "part"]).collect()
    expected = sorted(r["id"] for r in everything if r["part"] == 2 or 120 <= r["id"] < 140)
    rows = snapshot.to_df(columns=["id"], filter=[in_part, in_range]).collect()
    assert sorted(r["id"] for r in rows) == expected and len(expected) > 100


_FILTERS = st.lists(
    st.one_of(
        st.tuples(
            st.just("id"),
            st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
            st.integers(-10, 410),
        ),
        st.tuples(st.just("part"), st.sampled_from(["=", "<", ">=", "!="]), st.integers(-1, 4)),
        st.tuples(
            st.just("part"),
            st.sampled_from(["in", "not in"]),
            st.lists(st.integers(-1, 4), min_size=1, max_size=3),
        ),
        st.tuples(
            st.just("name"),
            st.sampled_from(["=", "<", ">"]),
            st.sampled_from(["n0", "n101", "n249", "n3", "z"]),
        ),
        st.tuples(
            st.just("info.score"),
            st.sampled_from(["=", "!=", "<", ">=", "in"]),
            st.integers(-10, 810) | st.lists(st.integers(0, 800), min_size=1, max_size=3),
        ).filter(lambda p: (p[1] == "in") == isinstance(p[2], list)),
    ),
    min_size=1,
    max_size=2,
)


def test_pruning_never_changes_the_result(spark: Any, skipping_table: Path) -> None:
    snapshot = DeltaTable.for_path(spark, str(skipping_table)).snapshot()
    everything = to_arrow(snapshot.to_df()).to_pylist()
    ops: dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "in": lambda a, b: a in b,
        "not in": lambda a, b: a not in b,
    }

    def value(row: dict[str, Any], column: str) -> Any:
        for name in column.split("."):
            row = None if row is None else row[name]
        return row

    def passes(row: dict[str, Any], conjunction: list[tuple[str, str, Any]]) -> bool:
        # SQL: a comparison with null is not true, so a row whose value is null never passes.
        return all(
            value(row, c) is not None and ops[op](value(row, c), v) for c, op, v in conjunction
        )

    @settings(max_examples=16, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_FILTERS | st.lists(_FILTERS, min_size=2, max_size=3))
    def check(filter: Any) -> None:
        """A list of predicates (AND), or a list of such lists (OR of the ANDs)."""
        disjunction = filter if isinstance(filter[0], list) else [filter]
        expected = sorted(r["id"] for r in everything if any(passes(r, c) for c in disjunction))
        got = sorted(
            r["id"] for r in to_arrow(snapshot.to_df(columns=["id"], filter=filter)).to_pylist()
        )
        assert got == expected
        assert len(select_files(snapshot, filter)) <= 8

    check()


def test_file_listing_is_absolute_and_escaped(spark: Any, tmp_path: Path) -> None:
    written = tmp_path / "plain"
    write_deltalake(str(written), pa.table({"a": [1, 2], "p": ["x y", "z%w"]}), partition_by=["p"])
    path = written.rename(tmp_path / "with space [x] {y}")  # glob characters in the root
    snapshot = DeltaTable.for_path(spark, str(path)).snapshot()
    files = select_files(snapshot)
    assert all(os.path.exists(f.location.removeprefix("file:")) for f in files)
    assert to_arrow(snapshot.to_df()).num_rows == 2
    shutil.rmtree(path)


def test_cli_show_and_files(spark_remote: str, capsys: pytest.CaptureFixture[str]) -> None:
    from delta_connect_py.cli import main

    table = str(CONFORMANCE / "delta-rs/table_with_deletion_logs/delta")
    assert main(["--remote", spark_remote, "show", table, "--limit", "5"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 20 and len(shown["rows"]) == 5
    assert main(["--remote", spark_remote, "files", table]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert len(files) == 1 and files[0]["deletionVector"] is not None


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    lines = "\n".join(json.dumps(action) for action in actions)
    (root / "_delta_log" / f"{version:020d}.json").write_text(lines + "\n")


def _values(snapshot: Any) -> list[int]:
    return sorted(r["value"] for r in to_arrow(snapshot.to_df()).to_pylist())


@pytest.mark.worker_errors
def test_inline_relative_and_absolute_deletion_vectors(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "dv table"
    shutil.copytree(CONFORMANCE / "kernel/table-with-dv-small/delta", root)
    add = json.loads((root / "_delta_log" / f"{1:020d}.json").read_text().splitlines()[2])["add"]
    relative_dv = add["deletionVector"]
    payload = portable_array([0, 1, 4, 5])
    inline = {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(payload),
        "sizeInBytes": len(payload),
        "cardinality": 4,
    }
    dv_file = next(root.glob("deletion_vector_*.bin"))
    absolute = {**relative_dv, "storageType": "p", "pathOrInlineDv": dv_file.as_uri()}
    remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}
    _commit(
        root,
        2,
        [
            {"remove": {**remove, "deletionVector": relative_dv}},
            {"add": {**add, "deletionVector": inline}},
        ],
    )
    _commit(
        root,
        3,
        [
            {"remove": {**remove, "deletionVector": inline}},
            {"add": {**add, "deletionVector": absolute}},
        ],
    )
    table = DeltaTable.for_path(spark, str(root))
    assert _values(table.snapshot(0)) == list(range(10))
    assert _values(table.snapshot(1)) == list(range(1, 9))  # relative (u)
    assert _values(table.snapshot(2)) == [2, 3, 6, 7, 8, 9]  # inline (i)
    assert _values(table.snapshot(3)) == list(range(1, 9))  # absolute (p), path URI-encoded
    broken = shutil.copytree(root, tmp_path / "broken")
    next(broken.glob("deletion_vector_*.bin")).unlink()
    with pytest.raises(FileReferencedNotFoundError, match="deletion_vector_"):
        DeltaTable.for_path(spark, str(broken)).snapshot(1).to_df()


@pytest.mark.worker_errors
def test_a_damaged_deletion_vector_file_is_invalid(spark: Any, conformance_table: Any) -> None:
    """DV bytes that do not decode fail the read with ``DELTA_DELETION_VECTOR_INVALID`` naming
    the DV file (raised in the server's Python worker, also when Spark retries the task)."""
    root = conformance_table("golden/dv-partitioned-with-checkpoint/delta")
    for vector in root.glob("deletion_vector_*.bin"):
        vector.write_bytes(b"\x00" * vector.stat().st_size)
    with pytest.raises(DeletionVectorInvalidError, match="deletion_vector_") as raised:
        DeltaTable.for_path(spark, str(root)).snapshot().to_df().collect()
    assert raised.value.getErrorClass() == "DELTA_DELETION_VECTOR_INVALID"


@pytest.mark.worker_errors
def test_a_damaged_deletion_vector_file_is_invalid_for_the_change_data_feed(
    spark: Any, conformance_table: Any
) -> None:
    """The change data feed's rows of a file with a damaged deletion vector: the same
    ``DELTA_DELETION_VECTOR_INVALID`` when the feed is asked for, not a raw Spark error from
    the caller's ``collect()``."""
    root = conformance_table("kernel/cdf-table-with-cdc-and-dvs/delta")
    vectors = sorted(root.glob("deletion_vector_*.bin"))
    assert vectors
    for vector in vectors:
        damaged = bytearray(vector.read_bytes())
        damaged[21] ^= 0x50  # inside the bitmap: its checksum no longer matches
        vector.write_bytes(bytes(damaged))
    with pytest.raises(DeletionVectorInvalidError, match="deletion_vector_"):
        DeltaTable.for_path(spark, str(root)).load_cdf(0)


def test_type_widening_and_iso_timestamp_partitions(spark: Any, conformance_table: Any) -> None:
    widened = DeltaTable.for_path(spark, str(conformance_table("golden/type-widening/delta")))
    df = widened.snapshot().to_df()
    types = dict(df.dtypes)
    assert types["byte_long"] == "bigint" and types["int_double"] == "double"
    assert types["date_timestamp_ntz"] == "timestamp_ntz"
    rows = {r["byte_long"]: r for r in to_arrow(df).to_pylist()}
    assert rows[1]["decimal_decimal_greater_scale"] == Decimal("67.89000")
    assert rows[1]["date_timestamp_ntz"] == dt.datetime(2024, 9, 9)
    iso = conformance_table("golden/kernel-timestamp-partition-col-ISO8601/delta")
    for row in to_arrow(DeltaTable.for_path(spark, str(iso)).snapshot().to_df()).to_pylist():
        expected = dt.datetime.fromisoformat(row["str"]).replace(tzinfo=dt.timezone.utc)
        assert row["ts"] == expected


def test_not_null_fields_nested_or_not_are_read(spark: Any, tmp_path: Path) -> None:
    """delta-spark writes ``STRUCT<a: INT NOT NULL>`` and ``BIGINT NOT NULL`` into the schema;
    Spark reads files as nullable and cannot cast a nullable nested field to a ``NOT NULL`` one:
    the rows and the change data feed come back, every column nullable."""
    inner = pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())])
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", inner, nullable=False),
            pa.field("l", pa.list_(pa.field("item", inner, nullable=False))),
        ]
    )
    row = {"id": 1, "s": {"a": 2, "b": "x"}, "l": [{"a": 3, "b": None}]}
    root = tmp_path / "t"
    write_deltalake(
        str(root),
        pa.Table.from_pylist([row], schema=schema),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    logged = json.loads(RsDeltaTable(str(root)).schema().to_json())
    assert [f["nullable"] for f in logged["fields"]] == [False, False, True]
    table = DeltaTable.for_path(spark, str(root))
    rows = table.snapshot().to_df().collect()
    assert [r.asDict(recursive=True) for r in rows] == [row]
    changes = table.load_cdf(0).select("id", "s", "l", "_change_type").collect()
    assert [r.asDict(recursive=True) for r in changes] == [{**row, "_change_type": "insert"}]
