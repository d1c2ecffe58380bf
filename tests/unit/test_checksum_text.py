"""The version checksum's protocol and metadata parsed on the client from the listing's text.

Only a checksum whose one line holds a well-typed protocol and metadata is taken; anything else
is left to Spark's JSON reader (``_from_checksum``), as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delta_connect_py.plans.protocol_metadata import _from_checksum_text
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.filenames import parse_log_file

CHECKSUM = parse_log_file("file:/t/_delta_log/00000000000000000003.crc", 100, 0)
PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "clustering"],
}
METADATA = {
    "id": "abc",
    "format": {"provider": "parquet", "options": {}},
    "schemaString": '{"type":"struct","fields":[]}',
    "partitionColumns": [],
    "configuration": {"delta.enableDeletionVectors": "true"},
    "createdTime": 1694758257000,
}


def _text(**fields: Any) -> str:
    checksum = {"tableSizeBytes": 1, "numFiles": 1, "protocol": PROTOCOL, "metadata": METADATA}
    checksum.update(fields)
    return json.dumps(checksum)


def test_a_well_typed_checksum_gives_protocol_metadata_and_ict() -> None:
    assert CHECKSUM is not None
    pm = _from_checksum_text(_text(inCommitTimestampOpt=42) + "\n", CHECKSUM)
    assert pm is not None
    assert pm.protocol == Protocol.from_action(PROTOCOL)
    assert pm.metadata == Metadata.from_action(METADATA)
    assert pm.in_commit_timestamp == 42
    assert pm.source == CHECKSUM.path


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1, 2]",
        _text() + "\n" + _text(),  # two lines: Spark would read two rows
        _text(protocol=None),
        _text(metadata=None),
        _text(protocol={**PROTOCOL, "minReaderVersion": "3"}),
        _text(protocol={**PROTOCOL, "minReaderVersion": True}),
        _text(protocol={"minWriterVersion": 2}),
        _text(metadata={**METADATA, "id": 5}),
        _text(metadata={**METADATA, "configuration": {"a": 1}}),
        _text(metadata={**METADATA, "partitionColumns": "x"}),
        _text(metadata={**METADATA, "format": {"provider": 1}}),
        _text(inCommitTimestampOpt="5"),
    ],
)
def test_anything_else_is_left_to_spark(text: str) -> None:
    assert CHECKSUM is not None
    assert _from_checksum_text(text, CHECKSUM) is None
