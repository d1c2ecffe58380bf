"""Fixtures for the object-store tests: moto (an S3-compatible server) on a free loopback port,
one Spark Connect server reading it through s3a, and the conformance tables uploaded once.

The Spark server has the s3a credentials ONLY in its Spark conf (``spark.hadoop.fs.s3a.*``); no
process started here has any ``AWS_*`` variable in its environment (see
``tests.object_store_server``), so the server's Python workers have no credentials of their
own: what they must do on the store (checkpoint publish, cleanup) gets them from
``storage_options``. The same server reads the local copies the results are compared with.

Skipped when the s3a jars (``server/fetch-s3a-jars.sh``) or moto's venv (``make moto-venv``)
are missing, unless OBJECT_STORE_REQUIRED is set (``make test-object-store``, CI): then that
fails the tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CONFORMANCE, require, serve, worker_python
from tests.object_store_server import (
    BUCKET,
    MotoServer,
    moto_server_binary,
    s3a_jars,
    s3a_spark_server,
    started_with,
    worker_storage_options,
)

#: Uploaded once per run: bucket prefix -> conformance table (the folder holding _delta_log).
TABLES: dict[str, str] = {
    "ckpt": "golden/basic-with-inserts-deletes-checkpoint/delta",
    "multipart": "golden/multi-part-checkpoint/delta",
    "dvsmall": "kernel/table-with-dv-small/delta",
    "dvpart": "golden/dv-partitioned-with-checkpoint/delta",
    "dvlogs": "delta-rs/table_with_deletion_logs/delta",
    "v2sidecars": "kernel/v2-checkpoints-json-with-sidecars/delta",
    "v2parquet": "golden/v2-checkpoint-parquet/delta",
    "cdf": "kernel/cdf-table/delta",
    "cdfict": "delta-rs/cdc_ict_table/delta",
    "escaped": "golden/data-reader-escaped-chars/delta",
    "emptyhint": "golden/corrupted-last-checkpoint-kernel/delta",
}


@pytest.fixture(scope="session", autouse=True)
def _object_store_prerequisites() -> None:
    missing = []
    if not s3a_jars():
        missing.append("the s3a jars (run server/fetch-s3a-jars.sh)")
    if moto_server_binary() is None:
        missing.append("moto's venv (run make moto-venv)")
    if not CONFORMANCE.exists():
        missing.append(f"the conformance tables ({CONFORMANCE})")
    require(missing, "object-store", "OBJECT_STORE_REQUIRED")


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    binary = moto_server_binary()
    assert binary is not None
    tables = {prefix: CONFORMANCE / local for prefix, local in TABLES.items()}
    yield from started_with(MotoServer(binary), tables)


@pytest.fixture(scope="session")
def spark_remote(moto: MotoServer) -> Iterator[str]:
    """Overrides the suite's server: one with the s3a connector, no AWS_* anywhere."""
    yield from serve(s3a_spark_server(moto.endpoint, worker_python(), s3a_jars()))


@pytest.fixture(scope="session")
def storage_options(moto: MotoServer) -> dict[str, str]:
    """Credentials for the workers' own file operations and for delta-rs."""
    return worker_storage_options(moto.endpoint)


def cluster_params(names: list[str], on_cluster: set[str]) -> list[Any]:
    """``names`` as parameters, those in ``on_cluster`` marked ``cluster``: the subset that
    ``make test-cluster-object-store`` also runs with the server on a standalone cluster."""
    assert on_cluster <= set(names), on_cluster - set(names)
    return [pytest.param(n, marks=pytest.mark.cluster) if n in on_cluster else n for n in names]


def s3a_uri(name: str) -> str:
    return f"s3a://{BUCKET}/{name}"


def local_uri(name: str) -> str:
    return str(CONFORMANCE / TABLES[name])


@pytest.fixture
def s3_copy(moto: MotoServer) -> Callable[[str], str]:
    """Upload a fresh copy of a conformance table (relative path) and return its s3a URI,
    for the tests that write."""

    def upload(relative: str) -> str:
        prefix = f"copies/{uuid.uuid4().hex[:12]}"
        moto.upload({prefix: CONFORMANCE / relative})
        return s3a_uri(prefix)

    return upload


@pytest.fixture
def local_copy(conformance_table: Callable[[str], Path]) -> Callable[[str], str]:
    return lambda relative: str(conformance_table(relative))
