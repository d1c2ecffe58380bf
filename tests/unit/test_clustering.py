"""Clustering columns by logical name, as delta-spark's DESCRIBE DETAIL lists them."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from delta_connect_py.clustering import clustering_columns, supports_clustering
from delta_connect_py.protocol.actions import Protocol

_PHYSICAL = "delta.columnMapping.physicalName"


def _domain(paths: Any, *, removed: bool = False, domain: str = "delta.clustering") -> dict:
    configuration = json.dumps({"clusteringColumns": paths})
    return {"domain": domain, "configuration": configuration, "removed": removed}


def _field(name: str, data_type: Any, physical: str | None = None) -> StructField:
    return StructField(name, data_type, metadata={_PHYSICAL: physical} if physical else {})


MAPPED = StructType(
    [
        _field("id", IntegerType(), "col-1"),
        _field("my col", StringType(), "col-2"),
        _field(
            "s",
            StructType([_field("a", IntegerType(), "col-4"), _field("b.c", StringType(), "col-5")]),
            "col-3",
        ),
        _field("2", StringType(), "col-6"),
    ]
)


def test_only_a_protocol_with_the_clustering_feature_is_clustered() -> None:
    assert supports_clustering(Protocol(3, 7, ("deletionVectors",), ("clustering",)))
    assert not supports_clustering(Protocol(1, 7, None, ("liquid", "domainMetadata")))
    assert not supports_clustering(Protocol(1, 4))


def test_physical_paths_become_logical_names_quoted_like_a_field_reference() -> None:
    domains = [
        _domain([["col-1"], ["col-2"], ["col-3", "col-4"], ["col-3", "col-5"], ["col-6"]]),
        {"domain": "delta.rowTracking", "configuration": "{}", "removed": False},
    ]
    assert clustering_columns(domains, MAPPED) == ["id", "`my col`", "s.a", "s.`b.c`", "`2`"]


def test_without_physical_names_fields_resolve_by_name_ignoring_case() -> None:
    schema = StructType([StructField("Event_Date", StringType()), StructField("x`y", StringType())])
    assert clustering_columns([_domain([["event_date"], ["X`Y"]])], schema) == [
        "Event_Date",
        "`x``y`",
    ]


def test_a_column_the_schema_lacks_keeps_its_physical_parts() -> None:
    assert clustering_columns([_domain([["col-3", "gone"], ["nowhere"]])], MAPPED) == [
        "s.gone",
        "nowhere",
    ]


def test_no_live_clustering_domain_or_an_unreadable_one_lists_nothing() -> None:
    assert clustering_columns([], MAPPED) == []
    assert clustering_columns([_domain([["col-1"]], removed=True)], MAPPED) == []
    assert clustering_columns([_domain([["col-1"]], domain="delta.liquid")], MAPPED) == []
    unreadable = {"domain": "delta.clustering", "configuration": "not json", "removed": False}
    assert clustering_columns([unreadable], MAPPED) == []
    assert clustering_columns([_domain("col-1")], MAPPED) == []
