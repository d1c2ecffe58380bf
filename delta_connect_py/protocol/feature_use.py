"""Table features a table's metadata puts in use, and whether its protocol lists them.

Responsibility: delta-spark's ``assertTableFeaturesMatchMetadata``, which every snapshot it
builds runs next to ``protocolRead``: on a table-features protocol (reader version 3 or writer
version 7), a feature that the ``metaData`` action turns on (a table property such as
``delta.columnMapping.mode=name`` or ``delta.enableDeletionVectors=true``, or a schema that
uses it, such as a ``timestamp_ntz`` column) must be listed in the protocol's
``writerFeatures``; otherwise the table is refused with
``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH``. Another writer can leave such a table (delta-rs
1.6 writes ``delta.columnMapping.mode=name`` without the ``columnMapping`` feature and its data
files under logical names): reading it as the metadata says would give wrong rows (every column
null), and ignoring the metadata would read what delta-spark refuses.

Invariants: legacy protocols (reader below 3 and writer below 7) are never refused here, as in
delta-spark. Only features whose metadata triggers are known here count (an unknown feature's
property is ignored); a listed ``-preview`` or ``-dev`` name counts as its feature. A property
that is set but not a boolean counts as not turned on (the readers of that property raise their
own error). Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from delta_connect_py.errors import FeaturesProtocolMetadataMismatchError
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.features import (
    TABLE_FEATURES_READER_VERSION,
    TABLE_FEATURES_WRITER_VERSION,
)

#: Table properties that turn a feature on when ``true`` (delta-spark's ``DeltaConfigs``).
_FEATURE_SWITCHES: dict[str, str] = {
    "delta.appendOnly": "appendOnly",
    "delta.enableDeletionVectors": "deletionVectors",
    "delta.enableRowTracking": "rowTracking",
    "delta.enableIcebergCompatV1": "icebergCompatV1",
    "delta.enableIcebergCompatV2": "icebergCompatV2",
    props.ENABLE_IN_COMMIT_TIMESTAMPS: "inCommitTimestamp",
    "delta.enableTypeWidening": "typeWidening",
}
_CHECK_CONSTRAINT_PREFIX = "delta.constraints."
#: Field metadata keys: an invariant (on any field, in nested structs too), and a generated or an
#: identity column (top-level fields, as delta-spark looks for them).
_INVARIANTS_KEY = "delta.invariants"
_GENERATION_EXPRESSION_KEY = "delta.generationExpression"
_IDENTITY_KEYS = (
    "delta.identity.start",
    "delta.identity.step",
    "delta.identity.allowExplicitInsert",
)
#: Types whose use anywhere in the schema turns their feature on.
_TYPE_FEATURES = {"timestamp_ntz": "timestampNtz", "variant": "variantType"}
_NAME_SUFFIXES = ("-preview", "-dev")
_Value = TypeVar("_Value")


def features_in_use(metadata: Metadata) -> set[str]:
    """The table features ``metadata`` turns on (delta-spark's features automatically enabled
    by metadata whose ``metadataRequiresFeatureToBeEnabled`` holds)."""
    configuration = metadata.configuration
    in_use = {feature for key, feature in _FEATURE_SWITCHES.items() if _is_true(configuration, key)}
    if _setting_or(props.change_data_feed_enabled, configuration, False):
        in_use.add("changeDataFeed")
    if _setting_or(props.column_mapping_mode, configuration, "none") != "none":
        in_use.add("columnMapping")
    if _setting_or(props.checkpoint_policy, configuration, "classic") == "v2":
        in_use.add("v2Checkpoint")
    if any(key.lower().startswith(_CHECK_CONSTRAINT_PREFIX) for key in configuration):
        in_use.add("checkConstraints")
    return in_use | _schema_features(_schema_json(metadata))


def check_features_listed(protocol: Protocol, metadata: Metadata, path: str, version: int) -> None:
    """``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH`` when ``metadata`` turns on a feature that
    ``protocol``, a table-features protocol, does not list among its writer features."""
    if (
        protocol.min_reader_version < TABLE_FEATURES_READER_VERSION
        and protocol.min_writer_version < TABLE_FEATURES_WRITER_VERSION
    ):
        return
    listed = {_feature_name(name) for name in protocol.writer_features or ()}
    missing = sorted(features_in_use(metadata) - listed)
    if missing:
        raise FeaturesProtocolMetadataMismatchError(
            path=path, version=version, features=", ".join(missing)
        )


def _schema_json(metadata: Metadata) -> Mapping[str, Any]:
    """The schema's JSON; empty when it is not JSON (``table_schema.check_schema`` refuses such
    a schema where it matters, naming the file)."""
    try:
        schema = metadata.schema_json
    except (ValueError, TypeError):
        return {}
    return schema if isinstance(schema, Mapping) else {}


def _feature_name(listed: str) -> str:
    for suffix in _NAME_SUFFIXES:
        if listed.endswith(suffix):
            return listed[: -len(suffix)]
    return listed


def _is_true(configuration: Mapping[str, str], key: str) -> bool:
    value = configuration.get(key)
    return value is not None and value.strip().lower() == "true"


def _setting_or(
    read: Callable[[Mapping[str, str]], _Value], configuration: Mapping[str, str], default: _Value
) -> _Value:
    """``read(configuration)``, or ``default`` when the property is malformed."""
    try:
        return read(configuration)
    except ValueError:
        return default


def _schema_features(schema: Mapping[str, Any]) -> set[str]:
    """Features the schema (Spark's StructType JSON) turns on by its types and field metadata."""
    in_use: set[str] = set()
    top_level = schema.get("fields") or []
    for field in top_level:
        metadata = _field_metadata(field)
        if _GENERATION_EXPRESSION_KEY in metadata:
            in_use.add("generatedColumns")
        if all(key in metadata for key in _IDENTITY_KEYS):
            in_use.add("identityColumns")
    for field in _all_fields(schema):
        if _INVARIANTS_KEY in _field_metadata(field):
            in_use.add("invariants")
    for type_name in type_names(schema):
        if type_name in _TYPE_FEATURES:
            in_use.add(_TYPE_FEATURES[type_name])
    return in_use


def _field_metadata(field: Any) -> Mapping[str, Any]:
    metadata = field.get("metadata") if isinstance(field, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else {}


def _children(data_type: Any) -> Iterator[Any]:
    """The types directly inside a struct, array or map type (JSON form)."""
    if not isinstance(data_type, Mapping):
        return
    for field in data_type.get("fields") or []:
        if isinstance(field, Mapping):
            yield field.get("type")
    for key in ("elementType", "keyType", "valueType"):
        if key in data_type:
            yield data_type[key]


def _all_fields(data_type: Any) -> Iterator[Mapping[str, Any]]:
    """Every struct field, nested structs' too; not those inside arrays and maps (delta-spark
    looks for invariants so, without complex types)."""
    if not isinstance(data_type, Mapping):
        return
    for field in data_type.get("fields") or []:
        if isinstance(field, Mapping):
            yield field
            yield from _all_fields(field.get("type"))


def type_names(data_type: Any) -> Iterator[str]:
    """Every primitive type name at any depth of a type in its JSON form."""
    if isinstance(data_type, str):
        yield data_type
    for child in _children(data_type):
        yield from type_names(child)
