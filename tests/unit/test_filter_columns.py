"""Which fields a ``to_df`` filter's column names (``data.resolve_filter_column``; pure)."""

from __future__ import annotations

from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from delta_connect_py.data import resolve_filter_column

INNER = StructType([StructField("city", StringType()), StructField("zip", LongType())])
SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("address", StructType([StructField("home", INNER)])),
        StructField("a.b", LongType()),
        StructField("a", StructType([StructField("b", StringType())])),
        StructField("tags", ArrayType(INNER)),
    ]
)


def names(name: str) -> list[str] | None:
    path = resolve_filter_column(SCHEMA, name)
    return None if path is None else [field.name for field in path]


def test_top_level_and_nested_struct_fields() -> None:
    assert names("id") == ["id"]
    assert names("address") == ["address"]
    assert names("address.home.city") == ["address", "home", "city"]
    assert resolve_filter_column(SCHEMA, "address.home.zip")[-1].dataType == LongType()  # type: ignore[index]


def test_a_top_level_name_with_a_dot_wins_over_the_path() -> None:
    assert names("a.b") == ["a.b"]
    assert names("a") == ["a"]


def test_unknown_fields_and_paths_through_non_structs() -> None:
    assert names("address.home.street") is None
    assert names("id.x") is None
    assert names("tags.city") is None  # arrays hold no stats and no single value
    assert names("") is None
    assert names("address.") is None
