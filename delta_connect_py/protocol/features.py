"""Which tables this library can read: protocol versions and reader table features.

Responsibility: decide from a table's ``protocol`` action whether delta_connect_py may read it,
and name what is missing when not; list the features a protocol names.

Invariants: reader versions 1-3 are readable; above 3 raises
:class:`~delta_connect_py.errors.InvalidProtocolVersionError`. At reader version 3 every listed
reader feature must be in :data:`SUPPORTED_READER_FEATURES`, else
:class:`~delta_connect_py.errors.UnsupportedFeaturesForReadError` names the unsupported ones
(sorted, comma separated). Below version 3 a ``readerFeatures`` list is not in force and is
tolerated.
"""

from __future__ import annotations

from delta_connect_py.errors import InvalidProtocolVersionError, UnsupportedFeaturesForReadError
from delta_connect_py.protocol.actions import Protocol

SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
    }
)
MAX_READER_VERSION = 3
TABLE_FEATURES_READER_VERSION = 3


def protocol_features(protocol: Protocol) -> set[str]:
    """The reader and writer features ``protocol`` lists."""
    return set(protocol.reader_features or ()) | set(protocol.writer_features or ())


def unsupported_reader_features(protocol: Protocol) -> list[str]:
    """The table's reader features we do not implement, sorted (empty below reader v3)."""
    if protocol.min_reader_version < TABLE_FEATURES_READER_VERSION:
        return []
    return sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)


def check_readable(protocol: Protocol, path: str, version: int) -> None:
    """Raise if delta_connect_py cannot read ``path`` at ``version``, where ``protocol`` is in
    force (delta-spark's ``protocolRead``)."""
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise InvalidProtocolVersionError(
            path=path,
            version=version,
            reader_required=protocol.min_reader_version,
            writer_required=protocol.min_writer_version,
            supported_readers=", ".join(str(v) for v in range(1, MAX_READER_VERSION + 1)),
        )
    unsupported = unsupported_reader_features(protocol)
    if unsupported:
        raise UnsupportedFeaturesForReadError(
            path=path, version=version, features=", ".join(unsupported)
        )
