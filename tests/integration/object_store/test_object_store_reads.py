"""Reading conformance tables on s3a (moto) equals reading the same tables on local disk.

The server has the s3a credentials only in its Spark conf and its Python workers have none (no
``storage_options`` here, no ``AWS_*`` anywhere): every read must go through Spark's data
sources, and nothing may warn (an unreachable ``_last_checkpoint`` hint is not a warning).
Timestamps that come from file modification times (``history``, ``_commit_timestamp`` without
in-commit timestamps) differ by nature (upload time on S3, checkout time locally) and are left
out of those comparisons; in-commit timestamps are compared.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import pytest

from delta_connect_py import DeltaTable
from tests.conftest import sorted_rows
from tests.integration.object_store.conftest import TABLES, cluster_params, local_uri, s3a_uri

pytestmark = pytest.mark.object_store

DV_TABLES = ["dvsmall", "dvpart", "dvlogs"]
CDF_TABLES = {"cdf": False, "cdfict": True}  # name -> has in-commit timestamps


@contextmanager
def _no_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.DEBUG):
        yield
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [message for message in warned if "s3a://" in message]


def _tables(spark: Any, name: str) -> tuple[DeltaTable, DeltaTable]:
    return DeltaTable.for_path(spark, s3a_uri(name)), DeltaTable.for_path(spark, local_uri(name))


@pytest.mark.parametrize("name", cluster_params(sorted(TABLES), {"multipart", "escaped"}))
def test_snapshot_equals_local(spark: Any, name: str, caplog: pytest.LogCaptureFixture) -> None:
    with _no_warnings(caplog):
        remote_table, local_table = _tables(spark, name)
        remote, local = remote_table.snapshot(), local_table.snapshot()
        assert remote.version == local.version
        assert remote.protocol == local.protocol
        assert remote.metadata == local.metadata
        assert remote.state == local.state
        assert remote.transactions == local.transactions
        keys = ("path", "size", "partitionValues", "deletionVector")
        assert sorted_rows(remote.all_files().select(*keys)) == sorted_rows(
            local.all_files().select(*keys)
        )
        assert sorted_rows(remote.to_df()) == sorted_rows(local.to_df())
        history = ("version", "operation")
        assert sorted_rows(remote_table.history().select(*history)) == sorted_rows(
            local_table.history().select(*history)
        )


def test_hint_the_workers_cannot_reach_is_skipped_quietly(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """ckpt has a valid _last_checkpoint; the credential-less workers cannot read it, so the
    listing finds the checkpoint, with a debug line and no warning."""
    with _no_warnings(caplog):
        table = DeltaTable.for_path(spark, s3a_uri("ckpt"))
        listing = table.list_log()
        assert listing.last_checkpoint is None
        assert table.log_segment(listing=listing).checkpoint is not None
    assert any("not read by the workers" in r.getMessage() for r in caplog.records)


def test_hint_is_read_with_storage_options(spark: Any, storage_options: dict[str, str]) -> None:
    with_options = DeltaTable.for_path(spark, s3a_uri("ckpt"), storage_options=storage_options)
    local = DeltaTable.for_path(spark, local_uri("ckpt"))
    assert with_options.list_log().last_checkpoint == local.list_log().last_checkpoint


@pytest.mark.parametrize("name", cluster_params(DV_TABLES, {"dvpart"}))
def test_deletion_vectors_read_by_spark(spark: Any, name: str) -> None:
    """Rows named by DV files on s3a are really removed: fewer rows than the files hold."""
    remote = DeltaTable.for_path(spark, s3a_uri(name)).snapshot()
    files = remote.all_files().collect()
    assert any(row["deletionVector"] is not None for row in files)
    in_files = spark.read.parquet(*[f"{s3a_uri(name)}/{unquote(r['path'])}" for r in files])
    local = DeltaTable.for_path(spark, local_uri(name)).snapshot()
    assert remote.to_df().count() == local.to_df().count() < in_files.count()


@pytest.mark.parametrize("name", cluster_params(sorted(CDF_TABLES), {"cdfict"}))
def test_change_data_feed_equals_local(
    spark: Any, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    drop = () if CDF_TABLES[name] else ("_commit_timestamp",)
    with _no_warnings(caplog):
        remote, local = _tables(spark, name)
        assert sorted_rows(remote.load_cdf(0), drop) == sorted_rows(local.load_cdf(0), drop)
        streamed = [
            row
            for _, batch in remote.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0.1)
            for row in sorted_rows(batch, drop)
        ]
        assert sorted(streamed, key=repr) == sorted_rows(local.load_cdf(0), drop)
