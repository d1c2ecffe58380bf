"""Reader protocol checks (notes 1.8)."""

from __future__ import annotations

import pytest

from delta_connect_py.errors import InvalidProtocolVersionError, UnsupportedFeaturesForReadError
from delta_connect_py.protocol.actions import Protocol
from delta_connect_py.protocol.features import SUPPORTED_READER_FEATURES, check_readable


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 2),
        Protocol(2, 5),
        Protocol(3, 7, tuple(sorted(SUPPORTED_READER_FEATURES)), ("appendOnly",)),
        Protocol(3, 7, (), ()),
        Protocol(3, 7, None, None),
        Protocol(1, 7, ("catalogManaged",), ("catalogManaged",)),  # not in force below v3
    ],
)
def test_readable(protocol: Protocol) -> None:
    check_readable(protocol, "/t", 3)


def test_reader_version_too_high() -> None:
    with pytest.raises(InvalidProtocolVersionError) as info:
        check_readable(Protocol(4, 7), "/t", 12)
    assert info.value.getErrorClass() == "DELTA_INVALID_PROTOCOL_VERSION"
    params = info.value.getMessageParameters()
    assert params["reader_required"] == "4" and params["writer_required"] == "7"
    assert params["path"] == "/t" and params["version"] == "12"
    assert 'table "/t" at version 12 requires reader version 4' in str(info.value)


def test_unsupported_features_named_sorted() -> None:
    protocol = Protocol(3, 7, ("variantShredding", "deletionVectors", "catalogManaged"), None)
    with pytest.raises(UnsupportedFeaturesForReadError) as info:
        check_readable(protocol, "s3://b/t", 0)
    assert info.value.getMessageParameters()["features"] == "catalogManaged, variantShredding"
    assert str(info.value).startswith("[DELTA_UNSUPPORTED_FEATURES_FOR_READ]")
