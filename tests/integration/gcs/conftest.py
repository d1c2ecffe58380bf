"""Fixtures for the GCS tests: fake-gcs-server on a free loopback port, one Spark Connect server
reading it through the GCS connector, and the conformance tables uploaded once.

Nobody authenticates: the emulator takes anonymous requests, the connector is told so, the
server's Python workers get the emulator's address only from ``storage_options``, and delta-rs
reads the same objects through a service account key naming the emulator's base URL.

Skipped when fake-gcs-server (``server/install-fake-gcs.sh``) or the connector
(``server/fetch-gcs-jars.sh``) is missing, unless GCS_REQUIRED is set (``make test-gcs``, CI):
then that fails the tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import CONFORMANCE, require, serve, worker_python
from tests.gcs_server import (
    BUCKET,
    FakeGcsServer,
    delta_rs_storage_options,
    fake_gcs_binary,
    gcs_jars,
    gcs_spark_server,
    worker_storage_options,
)
from tests.object_store_server import started_with

#: Uploaded once per run: object prefix -> conformance table (the folder holding _delta_log).
TABLES: dict[str, str] = {
    "ckpt": "golden/basic-with-inserts-deletes-checkpoint/delta",
    "multipart": "golden/multi-part-checkpoint/delta",
    "dvpart": "golden/dv-partitioned-with-checkpoint/delta",
    "v2sidecars": "kernel/v2-checkpoints-json-with-sidecars/delta",
    "escaped": "golden/data-reader-escaped-chars/delta",
    "cdfict": "delta-rs/cdc_ict_table/delta",
}


@pytest.fixture(scope="session", autouse=True)
def _gcs_prerequisites() -> None:
    missing = []
    if fake_gcs_binary() is None:
        missing.append("fake-gcs-server (run server/install-fake-gcs.sh)")
    if not gcs_jars():
        missing.append("the GCS connector (run server/fetch-gcs-jars.sh)")
    if not CONFORMANCE.exists():
        missing.append(f"the conformance tables ({CONFORMANCE})")
    require(missing, "GCS", "GCS_REQUIRED")


@pytest.fixture(scope="session")
def emulator() -> Iterator[FakeGcsServer]:
    binary = fake_gcs_binary()
    assert binary is not None
    tables = {prefix: CONFORMANCE / local for prefix, local in TABLES.items()}
    yield from started_with(FakeGcsServer(binary), tables)


@pytest.fixture(scope="session")
def spark_remote(emulator: FakeGcsServer) -> Iterator[str]:
    """Overrides the suite's server: one with the GCS connector."""
    yield from serve(gcs_spark_server(emulator.endpoint, worker_python(), gcs_jars()))


@pytest.fixture(scope="session")
def storage_options(emulator: FakeGcsServer) -> dict[str, str]:
    """The emulator's address for the server's Python workers."""
    return worker_storage_options(emulator.endpoint)


@pytest.fixture(scope="session")
def rs_options(emulator: FakeGcsServer) -> dict[str, str]:
    """The emulator's address for delta-rs."""
    return delta_rs_storage_options(emulator.endpoint)


def gs_uri(name: str) -> str:
    return f"gs://{BUCKET}/{name}"


def local_uri(name: str) -> str:
    return str(CONFORMANCE / TABLES[name])


@pytest.fixture
def gs_copy(emulator: FakeGcsServer) -> Callable[[str], str]:
    """Upload a fresh copy of an uploaded table and return its gs URI, for the tests that
    write."""

    def upload(name: str) -> str:
        prefix = f"copies/{uuid.uuid4().hex[:12]}"
        emulator.upload({prefix: CONFORMANCE / TABLES[name]})
        return gs_uri(prefix)

    return upload
