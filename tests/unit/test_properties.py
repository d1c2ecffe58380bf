"""Table properties, defaults and interval parsing (notes 1.5)."""

from __future__ import annotations

import pytest

from delta_connect_py.protocol import properties as p
from delta_connect_py.protocol.actions import Protocol

DAY = 86_400_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 1 week", 7 * DAY),
        ("1 week", 7 * DAY),
        ("interval 30 days", 30 * DAY),
        ("interval 2 weeks", 14 * DAY),
        ("interval 1 day", DAY),
        ("interval 2 hours 30 minutes", 9_000_000),
        ("interval 0 seconds", 0),
        ("INTERVAL 1 HOUR", 3_600_000),
        ("Interval 5 Minutes", 300_000),
        ("interval 1 second", 1_000),
        ("interval 1.5 seconds", 1_500),
        ("interval 250 milliseconds", 250),
        ("interval 1 millisecond 999 microseconds", 1),
        ("interval 1999 microseconds", 1),
        ("interval 1 day 1 hour", DAY + 3_600_000),
        ("  interval   2   days  ", 2 * DAY),
        ("interval -1 day", -DAY),
    ],
)
def test_parse_interval_ms(text: str, ms: int) -> None:
    assert p.parse_interval_ms(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        "interval 1 month",
        "interval 2 years",
        "1 year 1 day",
        "",
        "interval",
        "interval 1",
        "interval week",
        "interval 1 fortnight",
        "interval 1.5 days",
        "forever",
    ],
)
def test_parse_interval_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        p.parse_interval_ms(text)


def test_defaults() -> None:
    assert p.deleted_file_retention_ms({}) == 7 * DAY
    assert p.log_retention_ms({}) == 30 * DAY
    assert p.checkpoint_retention_ms({}) == 2 * DAY
    assert p.set_transaction_retention_ms({}) is None
    assert p.checkpoint_interval({}) == 10
    assert p.expired_log_cleanup_enabled({}) is True
    assert p.change_data_feed_enabled({}) is False
    assert p.in_commit_timestamps_enabled({}) is False
    assert p.ict_enablement({}) is None
    assert p.checkpoint_policy({}) == "classic"
    assert p.write_stats_as_json({}) is True
    assert p.write_stats_as_struct({}) is True
    assert p.column_mapping_mode({}) == "none"


def test_set_values() -> None:
    conf = {
        "delta.deletedFileRetentionDuration": "interval 1 day",
        "delta.logRetentionDuration": "interval 2 days",
        "delta.checkpointRetentionDuration": "interval 3 hours",
        "delta.setTransactionRetentionDuration": "interval 4 days",
        "delta.checkpointInterval": "5",
        "delta.enableExpiredLogCleanup": "FALSE",
        "delta.enableChangeDataFeed": "true",
        "delta.enableInCommitTimestamps": "True",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": "1700000000000",
        "delta.checkpointPolicy": "v2",
        "delta.checkpoint.writeStatsAsJson": "false",
        "delta.checkpoint.writeStatsAsStruct": "false",
        "delta.columnMapping.mode": "name",
    }
    assert p.deleted_file_retention_ms(conf) == DAY
    assert p.log_retention_ms(conf) == 2 * DAY
    assert p.checkpoint_retention_ms(conf) == 3 * 3_600_000
    assert p.set_transaction_retention_ms(conf) == 4 * DAY
    assert p.checkpoint_interval(conf) == 5
    assert p.expired_log_cleanup_enabled(conf) is False
    assert p.change_data_feed_enabled(conf) is True
    assert p.in_commit_timestamps_enabled(conf) is True
    assert p.ict_enablement(conf) == (3, 1_700_000_000_000)
    assert p.checkpoint_policy(conf) == "v2"
    assert p.write_stats_as_json(conf) is False
    assert p.write_stats_as_struct(conf) is False
    assert p.column_mapping_mode(conf) == "name"


def test_change_data_feed_legacy_key() -> None:
    assert p.change_data_feed_enabled({"delta.enableChangeDataCapture": "true"}) is True
    both = {"delta.enableChangeDataFeed": "false", "delta.enableChangeDataCapture": "true"}
    assert p.change_data_feed_enabled(both) is False


def test_ict_enablement_needs_both() -> None:
    assert p.ict_enablement({"delta.inCommitTimestampEnablementVersion": "3"}) is None


@pytest.mark.parametrize(
    ("func", "key", "value"),
    [
        (p.checkpoint_interval, "delta.checkpointInterval", "ten"),
        (p.checkpoint_interval, "delta.checkpointInterval", "0"),
        (p.expired_log_cleanup_enabled, "delta.enableExpiredLogCleanup", "yes"),
        (p.change_data_feed_enabled, "delta.enableChangeDataFeed", "1"),
        (p.checkpoint_policy, "delta.checkpointPolicy", "v3"),
        (p.column_mapping_mode, "delta.columnMapping.mode", "path"),
        (p.log_retention_ms, "delta.logRetentionDuration", "interval 1 month"),
    ],
)
def test_malformed_values_raise(func: object, key: str, value: str) -> None:
    assert callable(func)
    with pytest.raises(ValueError):
        func({key: value})


def test_table_properties() -> None:
    protocol = Protocol(3, 7, ("deletionVectors",), ("deletionVectors", "appendOnly"))
    props = p.table_properties({"delta.appendOnly": "true"}, protocol)
    assert props == {
        "delta.appendOnly": "true",
        "delta.minReaderVersion": "3",
        "delta.minWriterVersion": "7",
        "delta.feature.appendOnly": "supported",
        "delta.feature.deletionVectors": "supported",
    }
    assert p.table_properties({}, Protocol(1, 2)) == {
        "delta.minReaderVersion": "1",
        "delta.minWriterVersion": "2",
    }
