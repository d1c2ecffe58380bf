"""Reader and writer protocol checks (notes 1.8)."""

from __future__ import annotations

import pytest

from delta_connect_py.errors import (
    InvalidProtocolVersionError,
    UnsupportedFeaturesForReadError,
    UnsupportedFeaturesForWriteError,
)
from delta_connect_py.protocol.actions import Protocol
from delta_connect_py.protocol.features import (
    SUPPORTED_READER_FEATURES,
    SUPPORTED_WRITER_FEATURES,
    check_readable,
    check_writable,
)


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


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 2),
        Protocol(1, 6),
        Protocol(3, 7, tuple(sorted(SUPPORTED_READER_FEATURES)), tuple(SUPPORTED_WRITER_FEATURES)),
        Protocol(1, 7, None, ("appendOnly", "rowTracking", "domainMetadata")),
        Protocol(1, 6, None, ("collations",)),  # not in force below v7
    ],
)
def test_writable(protocol: Protocol) -> None:
    check_writable(protocol, "/t", 3)


def test_unknown_writer_features_refuse_writes_but_not_reads() -> None:
    protocol = Protocol(1, 7, None, ("appendOnly", "collations", "coordinatedCommits-preview"))
    check_readable(protocol, "/t", 2)
    with pytest.raises(UnsupportedFeaturesForWriteError) as info:
        check_writable(protocol, "/t", 2)
    params = info.value.getMessageParameters()
    assert params["features"] == "collations, coordinatedCommits-preview"
    assert params["version"] == "2"
    assert str(info.value).startswith("[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE]")


def test_writes_need_a_readable_table_and_a_known_writer_version() -> None:
    with pytest.raises(UnsupportedFeaturesForReadError):
        check_writable(Protocol(3, 7, ("catalogManaged",), ("catalogManaged",)), "/t", 0)
    with pytest.raises(InvalidProtocolVersionError) as info:
        check_writable(Protocol(1, 8), "/t", 0)
    assert "writer versions 1, 2, 3, 4, 5, 6, 7" in str(info.value)
