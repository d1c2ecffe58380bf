"""Reading conformance tables on s3a (moto) equals reading the same tables on local disk.

The server has the s3a credentials only in its Spark conf, its workers none: every read here
must go through Spark's data sources, and nothing may warn or retry.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from delta_connect_py import DeltaTable
from tests.integration.object_store.conftest import TABLES, local_uri, s3a_uri

pytestmark = pytest.mark.object_store


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in df.collect()), key=repr)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_snapshot_equals_local(spark: Any, name: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        remote = DeltaTable.for_path(spark, s3a_uri(name)).snapshot()
        local = DeltaTable.for_path(spark, local_uri(name)).snapshot()
        assert remote.version == local.version
        assert remote.protocol == local.protocol
        assert remote.metadata == local.metadata
        assert remote.state == local.state
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
