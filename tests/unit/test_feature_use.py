"""Features a table's metadata turns on, and the refusal of a protocol that does not list them
(delta-spark's ``assertTableFeaturesMatchMetadata``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delta_connect_py.errors import DeltaError, FeaturesProtocolMetadataMismatchError
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.feature_use import check_features_listed, features_in_use


def _field(name: str, data_type: Any, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "type": data_type, "nullable": True, "metadata": metadata or {}}


def _metadata(
    configuration: dict[str, str] | None = None, fields: list[dict[str, Any]] | None = None
) -> Metadata:
    schema = {"type": "struct", "fields": fields or [_field("id", "long")]}
    return Metadata(id="t", schema_string=json.dumps(schema), configuration=configuration or {})


@pytest.mark.parametrize(
    ("configuration", "feature"),
    [
        ({"delta.appendOnly": "true"}, "appendOnly"),
        ({"delta.enableDeletionVectors": "TRUE"}, "deletionVectors"),
        ({"delta.enableChangeDataFeed": "true"}, "changeDataFeed"),
        ({"delta.enableChangeDataCapture": "true"}, "changeDataFeed"),
        ({"delta.columnMapping.mode": "name"}, "columnMapping"),
        ({"delta.columnMapping.mode": "id"}, "columnMapping"),
        ({"delta.enableRowTracking": "true"}, "rowTracking"),
        ({"delta.checkpointPolicy": "v2"}, "v2Checkpoint"),
        ({"delta.enableInCommitTimestamps": "true"}, "inCommitTimestamp"),
        ({"delta.enableTypeWidening": "true"}, "typeWidening"),
        ({"delta.enableIcebergCompatV2": "true"}, "icebergCompatV2"),
        ({"delta.constraints.positive": "id > 0"}, "checkConstraints"),
    ],
)
def test_a_table_property_turns_its_feature_on(configuration: dict[str, str], feature: str) -> None:
    assert features_in_use(_metadata(configuration)) == {feature}


@pytest.mark.parametrize(
    "configuration",
    [
        {},
        {"delta.appendOnly": "false"},
        {"delta.enableDeletionVectors": "yes"},  # not a boolean: not turned on here
        {"delta.columnMapping.mode": "none"},
        {"delta.columnMapping.mode": "sideways"},
        {"delta.checkpointPolicy": "classic"},
        {"delta.enableChangeDataFeed": "false", "delta.enableChangeDataCapture": "true"},
        {"delta.somethingElse": "true"},
    ],
)
def test_other_properties_turn_nothing_on(configuration: dict[str, str]) -> None:
    assert features_in_use(_metadata(configuration)) == set()


def test_the_schema_turns_features_on_by_types_and_field_metadata() -> None:
    nested = {
        "type": "struct",
        "fields": [_field("when", {"type": "array", "elementType": "timestamp_ntz"})],
    }
    fields = [
        _field("n", nested),
        _field("v", {"type": "map", "keyType": "string", "valueType": "variant"}),
        _field("g", "long", {"delta.generationExpression": "id + 1"}),
        _field(
            "i",
            "long",
            {
                "delta.identity.start": 1,
                "delta.identity.step": 1,
                "delta.identity.allowExplicitInsert": False,
            },
        ),
        _field("s", {"type": "struct", "fields": [_field("x", "int", {"delta.invariants": "{}"})]}),
    ]
    assert features_in_use(_metadata(fields=fields)) == {
        "timestampNtz",
        "variantType",
        "generatedColumns",
        "identityColumns",
        "invariants",
    }


def test_an_invariant_inside_an_array_or_map_turns_nothing_on() -> None:
    element = {"type": "struct", "fields": [_field("x", "int", {"delta.invariants": "{}"})]}
    fields = [
        _field("a", {"type": "array", "elementType": element, "containsNull": True}),
        _field("m", {"type": "map", "keyType": "string", "valueType": element}),
    ]
    assert features_in_use(_metadata(fields=fields)) == set()


def test_generated_and_identity_columns_count_only_at_the_top_level_and_whole() -> None:
    fields = [
        _field(
            "s",
            {
                "type": "struct",
                "fields": [_field("g", "long", {"delta.generationExpression": "1"})],
            },
        ),
        _field("i", "long", {"delta.identity.start": 1}),  # not an identity column without a step
    ]
    assert features_in_use(_metadata(fields=fields)) == set()


@pytest.mark.parametrize("schema_string", [None, "{not json", "[1, 2]"])
def test_a_metadata_without_a_schema_turns_on_only_its_properties(
    schema_string: str | None,
) -> None:
    metadata = Metadata(
        id="t", schema_string=schema_string, configuration={"delta.appendOnly": "true"}
    )
    assert features_in_use(metadata) == {"appendOnly"}


def test_a_table_features_protocol_must_list_what_the_metadata_turns_on() -> None:
    protocol = Protocol(3, 7, ("deletionVectors",), ("appendOnly", "deletionVectors", "invariants"))
    metadata = _metadata(
        {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
    )
    with pytest.raises(FeaturesProtocolMetadataMismatchError) as info:
        check_features_listed(protocol, metadata, "/data/t", 4)
    error = info.value
    assert isinstance(error, DeltaError)
    assert error.getErrorClass() == "DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH"
    assert error.getMessageParameters() == {
        "path": "/data/t",
        "version": "4",
        "features": "columnMapping",
    }
    assert "/data/t" in str(error) and "version 4" in str(error)


def test_several_missing_features_are_named_sorted() -> None:
    metadata = _metadata({"delta.enableRowTracking": "true", "delta.appendOnly": "true"})
    with pytest.raises(FeaturesProtocolMetadataMismatchError) as info:
        check_features_listed(Protocol(1, 7, None, ()), metadata, "/t", 0)
    assert info.value.getMessageParameters()["features"] == "appendOnly, rowTracking"


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(3, 7, ("columnMapping",), ("columnMapping",)),
        Protocol(3, 7, (), ("columnMapping-preview",)),  # a preview name counts as its feature
        Protocol(2, 5),  # legacy protocols are not checked (delta-spark neither)
        Protocol(1, 2),
    ],
)
def test_a_listed_feature_or_a_legacy_protocol_passes(protocol: Protocol) -> None:
    check_features_listed(protocol, _metadata({"delta.columnMapping.mode": "name"}), "/t", 1)


def test_reader_features_alone_do_not_list_a_feature() -> None:
    # delta-spark compares with the writer features, where every reader-writer feature is listed.
    protocol = Protocol(3, 7, ("columnMapping",), ())
    with pytest.raises(FeaturesProtocolMetadataMismatchError):
        check_features_listed(protocol, _metadata({"delta.columnMapping.mode": "id"}), "/t", 1)
