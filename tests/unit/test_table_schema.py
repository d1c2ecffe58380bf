"""The table schema's shape check and parse (``table_schema``): every conformance table's
schemas pass, damaged ones are ``DELTA_CORRUPT_LOG_FILE``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delta_connect_py.errors import CorruptLogFileError, ReadTableWithoutColumnsError
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.table_schema import check_schema, parsed_schema, require_columns
from tests.conftest import CONFORMANCE

GOOD = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "nested",
            "type": {
                "type": "map",
                "keyType": "string",
                "valueType": {"type": "array", "elementType": "integer", "containsNull": True},
                "valueContainsNull": True,
            },
            "nullable": True,
            "metadata": {},
        },
    ],
}


def metadata(schema_string: str | None) -> Metadata:
    return Metadata(id="t", schema_string=schema_string)


def conformance_schema_strings() -> list[str]:
    found = set()
    for commit in sorted(Path(CONFORMANCE).glob("**/_delta_log/*.json")):
        for line in commit.read_text(errors="replace").splitlines():
            if '"metaData"' in line:
                try:
                    action = json.loads(line).get("metaData") or {}
                except ValueError:
                    continue
                if action.get("schemaString"):
                    found.add(action["schemaString"])
    return sorted(found)


def test_every_conformance_schema_passes_and_parses() -> None:
    strings = conformance_schema_strings()
    assert len(strings) > 50
    for schema_string in strings:
        check_schema(metadata(schema_string), "log", "log", 0)
        parsed_schema(metadata(schema_string), "log", "log", 0)


@pytest.mark.parametrize("missing", [None, ""])
def test_a_metadata_without_schema_string_has_the_empty_schema_and_no_rows(
    missing: str | None,
) -> None:
    """As delta-spark's ``Metadata.schema``: the empty struct; reading rows is refused."""
    check_schema(metadata(missing), "log", "log", 0)
    schema = parsed_schema(metadata(missing), "log", "log", 0)
    assert schema.fields == []
    with pytest.raises(ReadTableWithoutColumnsError, match="at version 7"):
        require_columns(schema, "file:/t", 7)
    require_columns(parsed_schema(metadata(json.dumps(GOOD)), "log", "log", 0), "file:/t", 7)


def test_a_good_schema_parses() -> None:
    schema = parsed_schema(metadata(json.dumps(GOOD)), "log", "log", 3)
    assert schema.fieldNames() == ["id", "nested"]


@pytest.mark.parametrize(
    ("damaged", "why"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"type": "struct"}), "no list of fields"),
        (json.dumps([GOOD]), "a struct type is expected"),
        (json.dumps({**GOOD, "fields": [{"nAme": "id", "type": "long"}]}), "has no name"),
        (json.dumps({**GOOD, "fields": [{"name": "id", "tyPe": "long"}]}), "'id' has no type"),
        (
            json.dumps({**GOOD, "fields": [{"name": "a", "type": {"type": "array"}}]}),
            "array type has no elementType",
        ),
        (
            json.dumps({**GOOD, "fields": [{"name": "s", "type": {"type": "struct"}}]}),
            "no list of fields",
        ),
    ],
)
def test_a_schema_without_its_shape_is_a_corrupt_log_file(damaged: str, why: str) -> None:
    with pytest.raises(CorruptLogFileError, match=f"version 7: the table schema.*{why}"):
        check_schema(metadata(damaged), "/t/_delta_log/7.json", "/t/_delta_log", 7)


def test_a_type_unknown_to_pyspark_passes_the_check_and_fails_the_parse() -> None:
    unknown = json.dumps({**GOOD, "fields": [{"name": "g", "type": "dXte", "nullable": True}]})
    check_schema(metadata(unknown), "log", "log", 0)
    with pytest.raises(CorruptLogFileError, match="dXte"):
        parsed_schema(metadata(unknown), "log", "log", 0)
