"""A Google Cloud Storage emulator on loopback (fake-gcs-server) and a Spark Connect server that
reads it through Google's GCS connector for Hadoop: the GCS tests' environment.

Responsibility: start ``fake-gcs-server`` (built by ``server/install-fake-gcs.sh`` into
``.fake-gcs/``) over plain HTTP on a free 127.0.0.1 port with one empty bucket, upload local
folders into it with pyarrow's GCS client, and build the Spark settings of a server whose
connector (the shaded jar from ``server/fetch-gcs-jars.sh``) reaches it, plus the options with
which the workers and delta-rs reach it.

Invariants: every address is 127.0.0.1; nobody authenticates (the emulator accepts anonymous
requests; the connector is told ``fs.gs.auth.type=UNAUTHENTICATED``), so no process started
here can reach Google's own endpoints by accident of a credential; everything started is
stopped by ``stop``.

By hand (foreground; Ctrl-C stops both)::

    .venv/bin/python -m tests.gcs_server
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyarrow import fs

from delta_connect_py.embedded import EmbeddedServer
from tests.object_store_server import LoopbackEmulator, serve_by_hand, store_spark_server

ROOT = Path(__file__).resolve().parents[1]
FAKE_GCS_DIR = Path(os.environ.get("FAKE_GCS_DIR", ROOT / ".fake-gcs"))
GCS_JARS_DIR = Path(os.environ.get("GCS_JARS_DIR", ROOT / ".gcs-jars"))
BUCKET = "delta"
CONNECTOR_PACKAGE = "com.google.cloud.hadoop.fs.gcs"
PROJECT = "delta-connect-tests"


def fake_gcs_binary(folder: Path = FAKE_GCS_DIR) -> Path | None:
    binary = folder / "fake-gcs-server"
    return binary if binary.exists() else None


def gcs_jars(jars_dir: Path = GCS_JARS_DIR) -> list[Path]:
    """The GCS connector's shaded jar (empty when missing)."""
    return sorted(jars_dir.glob("gcs-connector-*-shaded.jar")) if jars_dir.is_dir() else []


def gcs_conf(endpoint: str, jars: list[Path]) -> dict[str, str]:
    """Spark settings of a server reading ``gs://`` from the emulator at ``endpoint``."""
    return {
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.hadoop.fs.gs.impl": f"{CONNECTOR_PACKAGE}.GoogleHadoopFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.gs.impl": f"{CONNECTOR_PACKAGE}.GoogleHadoopFS",
        "spark.hadoop.fs.gs.storage.root.url": endpoint + "/",
        "spark.hadoop.fs.gs.auth.type": "UNAUTHENTICATED",
        "spark.hadoop.fs.gs.project.id": PROJECT,
        # The connector 3.1.x on pyspark 4.1's Hadoop 3.4.2: Parquet's vectored reads call a
        # Hadoop method the connector was not built against (NoSuchMethodError on every read
        # of a data file). docs/object-stores.md tells users the same.
        "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
    }


def worker_storage_options(endpoint: str) -> dict[str, str]:
    """``storage_options`` with which the server's Python workers (pyarrow) reach the emulator."""
    return {"GOOGLE_ENDPOINT_URL": endpoint, "GOOGLE_ANONYMOUS": "true"}


def delta_rs_storage_options(endpoint: str) -> dict[str, str]:
    """delta-rs reaches an emulator through a service account key naming its base URL."""
    key = {
        "gcs_base_url": endpoint,
        "disable_oauth": True,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    }
    return {"google_service_account_key": json.dumps(key)}


@dataclass
class FakeGcsServer(LoopbackEmulator):
    """``fake-gcs-server`` in memory, serving the one bucket ``BUCKET`` (empty at start)."""

    probe_path = "/storage/v1/b"
    data_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp()))

    def command(self) -> list[str]:
        (self.data_dir / BUCKET).mkdir(parents=True, exist_ok=True)
        address = f"127.0.0.1:{self.port}"
        return [
            str(self.binary),
            *("-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port)),
            *("-backend", "memory", "-data", str(self.data_dir)),
            *("-public-host", address, "-external-url", self.endpoint, "-log-level", "warn"),
        ]

    def store(self) -> fs.GcsFileSystem:
        """The test's own view of the emulator."""
        return fs.GcsFileSystem(
            anonymous=True, endpoint_override=f"127.0.0.1:{self.port}", scheme="http"
        )

    def upload(self, folders: Mapping[str, Path]) -> None:
        """Upload each local folder under the object prefix it is mapped to in ``BUCKET``."""
        store = self.store()
        for prefix, local in folders.items():
            fs.copy_files(str(local), f"{BUCKET}/{prefix}", destination_filesystem=store)


def gcs_spark_server(endpoint: str, worker_python: str, jars: list[Path]) -> EmbeddedServer:
    """A started Spark Connect server reading ``gs://`` from the emulator at ``endpoint``."""
    return store_spark_server(worker_python, gcs_conf(endpoint, jars))


def main() -> int:
    jars = gcs_jars()
    binary = fake_gcs_binary()
    if not jars or binary is None:
        print("run server/install-fake-gcs.sh and server/fetch-gcs-jars.sh", file=sys.stderr)
        return 1
    worker = str(ROOT / ".venv-worker" / "bin" / "python")
    return serve_by_hand(
        FakeGcsServer(binary), lambda endpoint: gcs_spark_server(endpoint, worker, jars)
    )


if __name__ == "__main__":
    sys.exit(main())
