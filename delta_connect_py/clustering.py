"""A clustered table's clustering columns, as delta-spark's ``DESCRIBE DETAIL`` names them.

Responsibility: :func:`clustering_columns`: for a protocol that supports the ``clustering``
writer feature (:func:`supports_clustering`), the logical names of the columns its
``delta.clustering`` domain metadata lists (``{"clusteringColumns": [["physical", "path"],
...]}``), in that order; nothing otherwise (delta-spark's
``ClusteringColumnInfo.extractLogicalNames``).

Invariants: physical names resolve through the schema case-insensitively, as delta-spark's
column resolver does (``delta.columnMapping.physicalName`` where the schema keeps it, else the
field's name: the snapshot's schema drops that metadata without column mapping); a nested
column is its parts joined by ``.``, each part backquoted unless it is letters, digits and
underscores (Spark's ``FieldReference`` text). A listed column the schema lacks keeps its
physical parts, where delta-spark would fail. A ``delta.clustering`` configuration that is not
this JSON names no columns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql.types import DataType, StructField, StructType

from delta_connect_py.data import physical_name
from delta_connect_py.protocol.actions import Protocol
from delta_connect_py.protocol.features import protocol_features

CLUSTERING_FEATURE = "clustering"
CLUSTERING_DOMAIN = "delta.clustering"
_PLAIN_PART = re.compile(r"[A-Za-z0-9_]+")


def supports_clustering(protocol: Protocol) -> bool:
    """Whether ``protocol`` lists the ``clustering`` feature (only then are columns listed)."""
    return CLUSTERING_FEATURE in protocol_features(protocol)


def clustering_columns(
    domain_metadata: Iterable[Mapping[str, Any]], schema: StructType
) -> list[str]:
    """The logical names of the columns the live ``delta.clustering`` domain lists."""
    return [_logical_name(schema, path) for path in _physical_paths(domain_metadata)]


def _physical_paths(domain_metadata: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    for domain in domain_metadata:
        if domain.get("domain") != CLUSTERING_DOMAIN or domain.get("removed"):
            continue
        try:
            columns = json.loads(domain.get("configuration") or "{}").get("clusteringColumns")
        except (ValueError, AttributeError):
            return []
        if not isinstance(columns, list):
            return []
        return [[str(part) for part in path] for path in columns if isinstance(path, list) and path]
    return []


def _logical_name(schema: StructType, physical_path: Sequence[str]) -> str:
    parts: list[str] = []
    current: DataType = schema
    for physical in physical_path:
        field = _field_by_physical_name(current, physical)
        if field is None:
            return _field_reference([*parts, *physical_path[len(parts) :]])
        parts.append(field.name)
        current = field.dataType
    return _field_reference(parts)


def _field_by_physical_name(data_type: DataType, physical: str) -> StructField | None:
    if not isinstance(data_type, StructType):
        return None
    wanted = physical.lower()
    for field in data_type.fields:
        if physical_name(field).lower() == wanted:
            return field
    return None


def _field_reference(parts: Sequence[str]) -> str:
    return ".".join(_quoted_if_needed(part) for part in parts)


def _quoted_if_needed(part: str) -> str:
    if _PLAIN_PART.fullmatch(part) and not part.isdigit():
        return part
    return "`" + part.replace("`", "``") + "`"
