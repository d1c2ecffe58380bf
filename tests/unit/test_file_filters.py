"""Filter parsing, partition pruning and stats-based skipping decisions (pure)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from delta_connect_py.protocol.file_filters import (
    ColumnStats,
    Predicate,
    column_stats,
    parse_filter,
    parse_partition_value,
    partition_may_match,
    stats_may_match,
)


def test_parse_filter_forms() -> None:
    assert parse_filter(None) == parse_filter([]) == ()
    assert parse_filter(("a", "==", 1)) == ((Predicate("a", "=", 1),),)
    assert parse_filter([("a", "IN", [1, 2])]) == ((Predicate("a", "in", (1, 2)),),)
    # A predicate may be a list too; its first element is the column name.
    assert parse_filter([["a", "in", [1, 2]], ("b", "<", 3)]) == (
        (Predicate("a", "in", (1, 2)), Predicate("b", "<", 3)),
    )
    bad: tuple[object, ...]
    for bad in [("a", "~", 1), ("a", "=", None), ("a", "in", []), ("a", "in", "xy"), ("a", 1)]:
        with pytest.raises(ValueError):
            parse_filter([bad])
        with pytest.raises(ValueError):
            parse_filter([[("b", "=", 1)], [bad]])


def test_parse_filter_disjunctive_normal_form() -> None:
    """A list of lists of predicates is an OR of ANDs, as pyarrow's ``filters``."""
    assert parse_filter([[("a", "=", 1), ("b", ">", 2)], [("c", "!=", "x")]]) == (
        (Predicate("a", "=", 1), Predicate("b", ">", 2)),
        (Predicate("c", "!=", "x"),),
    )
    # Predicates beside lists of predicates, or an empty conjunction, are ambiguous.
    for bad in [[[("a", "=", 1)], ("b", "=", 2)], [[("a", "=", 1)], []]]:
        with pytest.raises(ValueError, match="not both"):
            parse_filter(bad)


def test_partition_values_parse_exactly_or_not_at_all() -> None:
    assert parse_partition_value(None, "integer") == (True, None)
    assert parse_partition_value("", "string") == (True, None)
    assert parse_partition_value("2024-01-02", "date") == (True, dt.date(2024, 1, 2))
    assert parse_partition_value("1.50", "decimal") == (True, Decimal("1.50"))
    assert parse_partition_value("1_0", "integer")[0] is False
    assert parse_partition_value("2024-01-01 00:00:00", "timestamp")[0] is False


def test_partition_pruning() -> None:
    eq = Predicate("p", "=", 3)
    assert partition_may_match(eq, "3", "integer")
    assert not partition_may_match(eq, "4", "integer")
    assert not partition_may_match(eq, None, "integer")  # null = 3 is not true
    assert not partition_may_match(Predicate("p", "!=", 3), None, "integer")
    assert partition_may_match(Predicate("p", "=", "3"), "4", "integer")  # type mismatch: keep
    assert partition_may_match(Predicate("p", "=", 1.0), "4", "double")  # floats: keep
    assert not partition_may_match(Predicate("p", "not in", ("a", "b")), "a", "string")


def test_stats_skipping() -> None:
    stats = ColumnStats(num_records=10, null_count=0, min_value=5, max_value=9)
    assert not stats_may_match(Predicate("c", "<", 5), stats, "long")
    assert stats_may_match(Predicate("c", "<=", 5), stats, "long")
    assert not stats_may_match(Predicate("c", ">", 9), stats, "long")
    assert not stats_may_match(Predicate("c", "in", (1, 10)), stats, "long")
    assert stats_may_match(Predicate("c", "in", (1, 7)), stats, "long")
    assert stats_may_match(Predicate("c", "!=", 7), stats, "long")
    all_null = ColumnStats(num_records=3, null_count=3, min_value=None, max_value=None)
    assert not stats_may_match(Predicate("c", "=", 1), all_null, "long")
    unknown = ColumnStats(num_records=None, null_count=None, min_value=None, max_value=None)
    assert stats_may_match(Predicate("c", "=", 1), unknown, "long")


def test_column_stats_of_top_level_and_nested_columns() -> None:
    stats = {
        "numRecords": 4,
        "minValues": {"a": 1, "s": {"x": 2, "t": {"y": "b"}}},
        "maxValues": {"a": 3, "s": {"x": 8, "t": {"y": "q"}}},
        "nullCount": {"a": 0, "s": {"x": 1, "t": {"y": 4}}},
    }
    assert column_stats(stats, ["a"]) == ColumnStats(4, 0, 1, 3)
    assert column_stats(stats, ["s", "x"]) == ColumnStats(4, 1, 2, 8)
    assert column_stats(stats, ["s", "t", "y"]) == ColumnStats(4, 4, "b", "q")
    # A struct's own entry, a path through a leaf and a missing field: nothing known.
    unknown = ColumnStats(4, None, None, None)
    assert column_stats(stats, ["s", "t"]).min_value == {"y": "b"}
    assert column_stats(stats, ["a", "x"]) == unknown
    assert column_stats(stats, ["s", "z"]) == unknown
    assert column_stats(None, ["a"]) == ColumnStats(None, None, None, None)


def test_truncated_string_maximum_is_not_trusted() -> None:
    long_max = "m" * 32
    stats = ColumnStats(num_records=2, null_count=0, min_value="a", max_value=long_max)
    assert stats_may_match(Predicate("s", ">", "m" * 40), stats, "string")
    short = ColumnStats(num_records=2, null_count=0, min_value="a", max_value="b")
    assert not stats_may_match(Predicate("s", ">", "c"), short, "string")


def test_timestamps_are_never_skipped() -> None:
    stats = ColumnStats(1, 0, "2024-01-01T00:00:00.000Z", "2024-01-01T00:00:00.000Z")
    when = dt.datetime(2030, 1, 1)
    assert stats_may_match(Predicate("t", ">", when), stats, "timestamp")
