"""Delta table properties (``metaData.configuration``) with delta-spark's defaults.

Responsibility: read the ``delta.*`` settings this library acts on (retention durations,
checkpoint settings, change data feed, in-commit timestamps, column mapping) and parse Spark's
calendar-interval strings that the duration settings use.

Invariants: an unset property yields delta-spark's default (``DeltaConfig.scala``); a set but
malformed value raises ``ValueError`` (delta-spark fails too) rather than silently using the
default. Durations are milliseconds computed as ``days * 86_400_000 + micros / 1000`` (Java long
division, truncating toward zero); intervals with months or years are rejected. Nothing here
reads the clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from delta_connect_py.protocol.actions import Protocol
from delta_connect_py.protocol.features import protocol_features

DELETED_FILE_RETENTION_DURATION = "delta.deletedFileRetentionDuration"
LOG_RETENTION_DURATION = "delta.logRetentionDuration"
CHECKPOINT_RETENTION_DURATION = "delta.checkpointRetentionDuration"
SET_TRANSACTION_RETENTION_DURATION = "delta.setTransactionRetentionDuration"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
LEGACY_ENABLE_CHANGE_DATA_CAPTURE = "delta.enableChangeDataCapture"
ENABLE_IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
#: Keys of a schema field's metadata under column mapping (not table properties).
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
COLUMN_MAPPING_ID_KEY = "delta.columnMapping.id"

DEFAULT_DELETED_FILE_RETENTION = "interval 1 week"
DEFAULT_LOG_RETENTION = "interval 30 days"
DEFAULT_CHECKPOINT_RETENTION = "interval 2 days"
DEFAULT_CHECKPOINT_INTERVAL = 10

CHECKPOINT_POLICIES = frozenset({"classic", "v2"})
COLUMN_MAPPING_MODES = frozenset({"none", "id", "name"})

_MICROS_PER_UNIT = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
}
_DAYS_PER_UNIT = {"day": 1, "week": 7}
_REJECTED_UNITS = frozenset({"month", "year"})
_TERM = re.compile(r"([+-]?)(\d+)(?:\.(\d{1,9}))?\s*([a-z]+)")
_TERMS = re.compile(r"(?:\s*[+-]?\d+(?:\.\d{1,9})?\s*[a-z]+)+\s*")
_MS_PER_DAY = 86_400_000


def _unit(word: str) -> str:
    """Singular unit name (``days`` -> ``day``)."""
    return word[:-1] if word.endswith("s") else word


def _fraction_micros(fraction: str | None, unit: str, text: str) -> int:
    if fraction is None:
        return 0
    if unit != "second":
        raise ValueError(f"only seconds may have a fractional part in interval {text!r}")
    return int(fraction.ljust(9, "0")) // 1_000  # nanoseconds -> microseconds, truncated


def _split_terms(text: str) -> list[re.Match[str]]:
    body = text.strip().lower()
    if body.startswith("interval"):
        body = body[len("interval") :]
    if not _TERMS.fullmatch(body):
        raise ValueError(f"cannot parse {text!r} as an interval")
    return list(_TERM.finditer(body))


def _truncating_div(value: int, divisor: int) -> int:
    quotient = abs(value) // divisor
    return quotient if value >= 0 else -quotient


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a calendar-interval string such as ``"interval 1 week"``.

    Accepts an optional ``interval`` prefix and one or more ``<number> <unit>`` terms with units
    week, day, hour, minute, second, millisecond, microsecond (singular or plural, any case);
    seconds may carry a fraction. Months and years raise ``ValueError`` as in delta-spark.
    """
    days = 0
    micros = 0
    for match in _split_terms(text):
        sign, whole, fraction, word = match.groups()
        unit = _unit(word)
        factor = -1 if sign == "-" else 1
        if unit in _REJECTED_UNITS:
            raise ValueError(f"intervals with months or years are not supported: {text!r}")
        if unit in _DAYS_PER_UNIT:
            if fraction is not None:
                raise ValueError(f"only seconds may have a fractional part in interval {text!r}")
            days += factor * int(whole) * _DAYS_PER_UNIT[unit]
        elif unit in _MICROS_PER_UNIT:
            amount = int(whole) * _MICROS_PER_UNIT[unit] + _fraction_micros(fraction, unit, text)
            micros += factor * amount
        else:
            raise ValueError(f"unknown interval unit {word!r} in {text!r}")
    return days * _MS_PER_DAY + _truncating_div(micros, 1_000)


def parse_bool(text: str, key: str) -> bool:
    """Scala's ``String.toBoolean``: ``true``/``false`` in any case, anything else fails."""
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{key} must be true or false, got {text!r}")
    return lowered == "true"


def _bool(configuration: Mapping[str, str], key: str, default: bool) -> bool:
    value = configuration.get(key)
    return default if value is None else parse_bool(value, key)


def _interval(configuration: Mapping[str, str], key: str, default: str) -> int:
    return parse_interval_ms(configuration.get(key, default))


def deleted_file_retention_ms(configuration: Mapping[str, str]) -> int:
    """``delta.deletedFileRetentionDuration`` (tombstone retention), default 1 week."""
    return _interval(configuration, DELETED_FILE_RETENTION_DURATION, DEFAULT_DELETED_FILE_RETENTION)


def log_retention_ms(configuration: Mapping[str, str]) -> int:
    """``delta.logRetentionDuration``, default 30 days."""
    return _interval(configuration, LOG_RETENTION_DURATION, DEFAULT_LOG_RETENTION)


def checkpoint_retention_ms(configuration: Mapping[str, str]) -> int:
    """``delta.checkpointRetentionDuration``, default 2 days."""
    return _interval(configuration, CHECKPOINT_RETENTION_DURATION, DEFAULT_CHECKPOINT_RETENTION)


def set_transaction_retention_ms(configuration: Mapping[str, str]) -> int | None:
    """``delta.setTransactionRetentionDuration``; ``None`` (keep every txn) when unset."""
    value = configuration.get(SET_TRANSACTION_RETENTION_DURATION)
    return None if value is None else parse_interval_ms(value)


def checkpoint_interval(configuration: Mapping[str, str]) -> int:
    """``delta.checkpointInterval`` (commits between checkpoints), default 10, must be > 0."""
    value = configuration.get(CHECKPOINT_INTERVAL)
    if value is None:
        return DEFAULT_CHECKPOINT_INTERVAL
    try:
        interval = int(value.strip())
    except ValueError as exc:
        raise ValueError(f"{CHECKPOINT_INTERVAL} must be an integer, got {value!r}") from exc
    if interval <= 0:
        raise ValueError(f"{CHECKPOINT_INTERVAL} must be positive, got {value!r}")
    return interval


def expired_log_cleanup_enabled(configuration: Mapping[str, str]) -> bool:
    """``delta.enableExpiredLogCleanup``, default true."""
    return _bool(configuration, ENABLE_EXPIRED_LOG_CLEANUP, True)


def change_data_feed_enabled(configuration: Mapping[str, str]) -> bool:
    """``delta.enableChangeDataFeed``, else the legacy ``delta.enableChangeDataCapture``."""
    for key in (ENABLE_CHANGE_DATA_FEED, LEGACY_ENABLE_CHANGE_DATA_CAPTURE):
        if key in configuration:
            return parse_bool(configuration[key], key)
    return False


def in_commit_timestamps_enabled(configuration: Mapping[str, str]) -> bool:
    """``delta.enableInCommitTimestamps``, default false."""
    return _bool(configuration, ENABLE_IN_COMMIT_TIMESTAMPS, False)


def ict_enablement(configuration: Mapping[str, str]) -> tuple[int, int] | None:
    """(enablement version, enablement timestamp ms) when both properties are set, else None.

    ``None`` with ICT enabled means ICT was on from the table's creation, so every commit has
    an in-commit timestamp.
    """
    version = configuration.get(ICT_ENABLEMENT_VERSION)
    timestamp = configuration.get(ICT_ENABLEMENT_TIMESTAMP)
    if version is None or timestamp is None:
        return None
    return int(version), int(timestamp)


def checkpoint_policy(configuration: Mapping[str, str]) -> str:
    """``delta.checkpointPolicy``: ``"classic"`` (default) or ``"v2"``."""
    policy = configuration.get(CHECKPOINT_POLICY, "classic").strip().lower()
    if policy not in CHECKPOINT_POLICIES:
        raise ValueError(f"{CHECKPOINT_POLICY} must be classic or v2, got {policy!r}")
    return policy


def write_stats_as_json(configuration: Mapping[str, str]) -> bool:
    """``delta.checkpoint.writeStatsAsJson``, default true."""
    return _bool(configuration, WRITE_STATS_AS_JSON, True)


def write_stats_as_struct(configuration: Mapping[str, str]) -> bool:
    """``delta.checkpoint.writeStatsAsStruct``, default true (delta-spark; PROTOCOL says false)."""
    return _bool(configuration, WRITE_STATS_AS_STRUCT, True)


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    """``delta.columnMapping.mode``: ``"none"`` (default), ``"id"`` or ``"name"``."""
    mode = configuration.get(COLUMN_MAPPING_MODE, "none").strip().lower()
    if mode not in COLUMN_MAPPING_MODES:
        raise ValueError(f"{COLUMN_MAPPING_MODE} must be none, id or name, got {mode!r}")
    return mode


def table_properties(configuration: Mapping[str, str], protocol: Protocol) -> dict[str, str]:
    """The table's properties as DESCRIBE DETAIL / SHOW TBLPROPERTIES show them.

    The configuration, then ``delta.minReaderVersion``, ``delta.minWriterVersion`` and
    ``delta.feature.<name>=supported`` for every reader and writer feature (sorted).
    """
    properties = dict(configuration)
    properties["delta.minReaderVersion"] = str(protocol.min_reader_version)
    properties["delta.minWriterVersion"] = str(protocol.min_writer_version)
    for feature in sorted(protocol_features(protocol)):
        properties[f"delta.feature.{feature}"] = "supported"
    return properties
