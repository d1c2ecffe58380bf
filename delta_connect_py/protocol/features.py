"""Which tables this library can read: protocol versions and reader table features.

Responsibility: decide from a table's ``protocol`` action whether delta_connect_py may read it,
and name what is missing when not; list the features a protocol names.

Invariants: reader versions 1-3 are readable; above 3 raises
:class:`~delta_connect_py.errors.InvalidProtocolVersionError`. At reader version 3 every listed
reader feature must be in :data:`SUPPORTED_READER_FEATURES`, else
:class:`~delta_connect_py.errors.UnsupportedFeaturesForReadError` names the unsupported ones
(sorted, comma separated). Below version 3 a ``readerFeatures`` list is not in force and is
tolerated. The library's own writes (checkpoints, log cleanup) also need a readable table, a
writer version of at most 7 and, at writer version 7, every listed writer feature in
:data:`SUPPORTED_WRITER_FEATURES` (else
:class:`~delta_connect_py.errors.UnsupportedFeaturesForWriteError`), since the protocol forbids
writing a table with a writer feature one does not implement.
"""

from __future__ import annotations

from delta_connect_py.errors import (
    InvalidProtocolVersionError,
    UnsupportedFeaturesForReadError,
    UnsupportedFeaturesForWriteError,
)
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
#: Writer features whose requirements on the log our writes honor: those that constrain only
#: data files or commits, and those whose actions and fields a checkpoint carries over as they
#: are (deletion vectors, row tracking, domain metadata, clustering) or that the writers here
#: implement (``v2Checkpoint``, ``checkpointProtection``). Not ``collations``,
#: ``coordinatedCommits-preview`` and any feature unknown here.
SUPPORTED_WRITER_FEATURES = SUPPORTED_READER_FEATURES | frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "allowColumnDefaults",
        "changeDataFeed",
        "identityColumns",
        "rowTracking",
        "domainMetadata",
        "icebergCompatV1",
        "icebergCompatV2",
        "clustering",
        "inCommitTimestamp",
        "checkpointProtection",
    }
)
#: The features under which a column's type may have been widened since files were written.
TYPE_WIDENING_FEATURES = frozenset({"typeWidening", "typeWidening-preview"})
MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7
TABLE_FEATURES_READER_VERSION = 3
TABLE_FEATURES_WRITER_VERSION = 7


def protocol_features(protocol: Protocol) -> set[str]:
    """The reader and writer features ``protocol`` lists."""
    return set(protocol.reader_features or ()) | set(protocol.writer_features or ())


def unsupported_reader_features(protocol: Protocol) -> list[str]:
    """The table's reader features we do not implement, sorted (empty below reader v3)."""
    if protocol.min_reader_version < TABLE_FEATURES_READER_VERSION:
        return []
    return sorted(set(protocol.reader_features or ()) - SUPPORTED_READER_FEATURES)


def unsupported_writer_features(protocol: Protocol) -> list[str]:
    """The table's writer features our writes do not honor, sorted (empty below writer v7)."""
    if protocol.min_writer_version < TABLE_FEATURES_WRITER_VERSION:
        return []
    return sorted(set(protocol.writer_features or ()) - SUPPORTED_WRITER_FEATURES)


def _invalid_version(protocol: Protocol, path: str, version: int) -> InvalidProtocolVersionError:
    return InvalidProtocolVersionError(
        path=path,
        version=version,
        reader_required=protocol.min_reader_version,
        writer_required=protocol.min_writer_version,
        supported_readers=", ".join(str(v) for v in range(1, MAX_READER_VERSION + 1)),
        supported_writers=", ".join(str(v) for v in range(1, MAX_WRITER_VERSION + 1)),
    )


def check_readable(protocol: Protocol, path: str, version: int) -> None:
    """Raise if delta_connect_py cannot read ``path`` at ``version``, where ``protocol`` is in
    force (delta-spark's ``protocolRead``)."""
    _refuse_unless_supported(
        protocol,
        path,
        version,
        version_supported=protocol.min_reader_version <= MAX_READER_VERSION,
        unsupported=unsupported_reader_features(protocol),
        error=UnsupportedFeaturesForReadError,
    )


def check_writable(protocol: Protocol, path: str, version: int) -> None:
    """Raise unless delta_connect_py may write checkpoints of ``path`` at ``version`` and clean
    up its log, where ``protocol`` is in force (delta-spark's ``protocolWrite``)."""
    check_readable(protocol, path, version)
    _refuse_unless_supported(
        protocol,
        path,
        version,
        version_supported=protocol.min_writer_version <= MAX_WRITER_VERSION,
        unsupported=unsupported_writer_features(protocol),
        error=UnsupportedFeaturesForWriteError,
    )


def _refuse_unless_supported(
    protocol: Protocol,
    path: str,
    version: int,
    *,
    version_supported: bool,
    unsupported: list[str],
    error: type[UnsupportedFeaturesForReadError] | type[UnsupportedFeaturesForWriteError],
) -> None:
    if not version_supported:
        raise _invalid_version(protocol, path, version)
    if unsupported:
        raise error(path=path, version=version, features=", ".join(unsupported))
