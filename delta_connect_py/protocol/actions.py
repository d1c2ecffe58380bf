"""Delta log actions: their Arrow schema and the plain values users see.

Responsibility: the single source of truth for the shape of log actions (PROTOCOL.md "Actions"),
as pyarrow types. The client turns these into Spark types, the server-side replay checks its
output against them, and the reference replay builds them too.

Invariants: field names keep the protocol's spelling (``partitionValues``, ``modificationTime``);
every field is nullable (checkpoints and old writers omit fields); integer widths follow
delta-spark (``size`` is int64, ``minReaderVersion`` is int32, DV ``offset`` is int32). Values
exposed to users (:class:`Protocol`, :class:`Metadata`) are frozen dataclasses with snake_case
attributes. Only the standard library and pyarrow are imported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

STRING_MAP = pa.map_(pa.string(), pa.string())

DELETION_VECTOR = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)

ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
    ]
)

REMOVE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("stats", pa.string()),
        ("tags", STRING_MAP),
        ("deletionVector", DELETION_VECTOR),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)

METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)

PROTOCOL = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)

TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])

DOMAIN_METADATA = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)

CDC = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", STRING_MAP),
        ("size", pa.int64()),
        ("dataChange", pa.bool_()),
        ("tags", STRING_MAP),
    ]
)

COMMIT_INFO = pa.struct(
    [
        ("timestamp", pa.int64()),
        ("inCommitTimestamp", pa.int64()),
        ("operation", pa.string()),
        ("operationParameters", STRING_MAP),
        ("operationMetrics", STRING_MAP),
        ("readVersion", pa.int64()),
        ("isolationLevel", pa.string()),
        ("isBlindAppend", pa.bool_()),
        ("engineInfo", pa.string()),
        ("userMetadata", pa.string()),
        ("txnId", pa.string()),
    ]
)

CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])

SIDECAR = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", STRING_MAP),
    ]
)

#: The reconstructed state, one action per row, as a classic checkpoint holds it.
STATE_SCHEMA = pa.schema(
    [
        ("txn", TXN),
        ("add", ADD),
        ("remove", REMOVE),
        ("metaData", METADATA),
        ("protocol", PROTOCOL),
        ("domainMetadata", DOMAIN_METADATA),
    ]
)

#: Every action a commit file may hold, as read from JSON.
COMMIT_SCHEMA = pa.schema(
    [
        *STATE_SCHEMA,
        ("cdc", CDC),
        ("commitInfo", COMMIT_INFO),
        ("checkpointMetadata", CHECKPOINT_METADATA),
        ("sidecar", SIDECAR),
    ]
)

#: Columns the loaders add to every action row before replay.
VERSION_COLUMN = "version"
FILE_COLUMN = "_file"
PATH_KEY_COLUMN = "_path_key"

#: What the server-side replay receives: the state actions plus where each row came from.
REPLAY_INPUT_SCHEMA = pa.schema(
    [
        *STATE_SCHEMA,
        (VERSION_COLUMN, pa.int64()),
        (FILE_COLUMN, pa.string()),
        (PATH_KEY_COLUMN, pa.string()),
    ]
)

#: Fields an action must have (non-null), per the protocol's action definitions. Left out on
#: purpose: ``metaData.schemaString`` (delta-spark's own test tables write metaData without
#: it) and fields the protocol marks optional.
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "add": ("path", "size", "modificationTime", "dataChange", "partitionValues"),
    "remove": ("path", "dataChange"),
    "cdc": ("path", "size", "dataChange", "partitionValues"),
    "metaData": ("id", "format", "partitionColumns"),
    "protocol": ("minReaderVersion", "minWriterVersion"),
    "txn": ("appId", "version"),
    "domainMetadata": ("domain", "configuration", "removed"),
}

#: Fields a deletion vector descriptor must have (non-null) where an add or a remove has one;
#: ``offset`` is optional (an inline vector has none).
DELETION_VECTOR_REQUIRED_FIELDS = ("storageType", "pathOrInlineDv", "sizeInBytes", "cardinality")
#: Actions that may carry a deletion vector descriptor.
WITH_DELETION_VECTORS = ("add", "remove")

#: Every required field as (action, the action's field holding it or None, field): the
#: actions' own, then their deletion vector descriptors'.
REQUIRED_FIELD_PATHS: tuple[tuple[str, str | None, str], ...] = (
    *((action, None, name) for action, names in REQUIRED_FIELDS.items() for name in names),
    *(
        (action, "deletionVector", name)
        for action in WITH_DELETION_VECTORS
        for name in DELETION_VECTOR_REQUIRED_FIELDS
    ),
)


def _string_list(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _string_map(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return {str(k): v for k, v in value}  # Arrow maps arrive as lists of pairs


@dataclass(frozen=True)
class Protocol:
    """The table's ``protocol`` action."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> Protocol:
        return cls(
            min_reader_version=int(action["minReaderVersion"]),
            min_writer_version=int(action["minWriterVersion"]),
            reader_features=_string_list(action.get("readerFeatures")),
            writer_features=_string_list(action.get("writerFeatures")),
        )

    def to_action(self) -> dict[str, Any]:
        return {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
            "readerFeatures": None if self.reader_features is None else list(self.reader_features),
            "writerFeatures": None if self.writer_features is None else list(self.writer_features),
        }


@dataclass(frozen=True)
class Format:
    provider: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metadata:
    """The table's ``metaData`` action."""

    id: str
    schema_string: str | None
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format: Format = field(default_factory=Format)
    created_time: int | None = None

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> Metadata:
        fmt = action.get("format") or {}
        return cls(
            id=action["id"],
            schema_string=action.get("schemaString"),
            partition_columns=tuple(action.get("partitionColumns") or ()),
            configuration=_string_map(action.get("configuration")),
            name=action.get("name"),
            description=action.get("description"),
            format=Format(
                provider=fmt.get("provider") or "parquet",
                options=_string_map(fmt.get("options")),
            ),
            created_time=action.get("createdTime"),
        )

    @property
    def schema_json(self) -> dict[str, Any]:
        """The table schema as the parsed ``schemaString`` JSON (Spark's StructType JSON)."""
        return dict(json.loads(self.schema_string)) if self.schema_string else {}

    def to_action(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "format": {"provider": self.format.provider, "options": dict(self.format.options)},
            "schemaString": self.schema_string,
            "partitionColumns": list(self.partition_columns),
            "configuration": dict(self.configuration),
            "createdTime": self.created_time,
        }
