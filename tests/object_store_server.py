"""An S3-compatible server on loopback (moto's server mode) and a Spark Connect server that
reads it through Hadoop's s3a connector: the object-store tests' environment.

Responsibility: start ``moto_server`` from its own venv (``.venv-moto``, see
``server/moto-requirements.txt``) on a free 127.0.0.1 port, upload local folders into it with
that venv's boto3, and build the Spark settings of a server whose s3a connector (jars from
``server/fetch-s3a-jars.sh``) reaches it.

Invariants: every address is 127.0.0.1; credentials exist ONLY in the Spark conf
(``spark.hadoop.fs.s3a.*``) and in the boto3 uploader's arguments, never in an environment:
:func:`scrubbed_environment` removes every ``AWS_*`` variable (keeping
``AWS_EC2_METADATA_DISABLED=true`` so no SDK probes an instance metadata service), and the
processes started here get that environment. Everything started is stopped by ``stop``.

By hand (foreground; Ctrl-C stops both)::

    .venv/bin/python -m tests.object_store_server
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from delta_connect_py.embedded import EmbeddedServer, free_port, stop_process_group
from tests.cluster_placement import cluster_conf, wait_for_executors

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

    from delta_connect_py import CheckpointResult

ROOT = Path(__file__).resolve().parents[1]
S3A_JARS_DIR = Path(os.environ.get("S3A_JARS_DIR", ROOT / ".s3a-jars"))
MOTO_VENV = Path(os.environ.get("MOTO_VENV", ROOT / ".venv-moto"))
BUCKET = "delta"
#: moto accepts any key pair; these exist only in the Spark conf and the uploader's arguments.
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"
START_TIMEOUT_SECONDS = 60.0


def s3a_jars(jars_dir: Path = S3A_JARS_DIR) -> list[Path]:
    """hadoop-aws and the AWS SDK bundle (empty when the folder is missing or incomplete)."""
    jars = sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []
    names = [jar.name for jar in jars]
    if not any(n.startswith("hadoop-aws-") for n in names):
        return []
    if not any(n.startswith("bundle-") for n in names):
        return []
    return jars


def moto_server_binary(venv: Path = MOTO_VENV) -> Path | None:
    binary = venv / "bin" / "moto_server"
    return binary if binary.exists() else None


def scrubbed_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without any AWS credentials or settings."""
    env = {k: v for k, v in (os.environ if base is None else base).items()}
    for key in list(env):
        if key.startswith("AWS_"):
            del env[key]
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def s3a_conf(endpoint: str, jars: list[Path]) -> dict[str, str]:
    """Spark settings of a server reading ``s3a://`` from ``endpoint`` (moto, path style,
    plain HTTP), with the credentials given only here."""
    return {
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        "spark.hadoop.fs.s3a.endpoint.region": REGION,
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
        "spark.hadoop.fs.s3a.aws.credentials.provider": (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        ),
        # Fail fast rather than retry for minutes when something is wrong with the endpoint.
        "spark.hadoop.fs.s3a.attempts.maximum": "2",
        "spark.hadoop.fs.s3a.retry.limit": "2",
    }


def worker_storage_options(endpoint: str) -> dict[str, str]:
    """delta-rs style ``storage_options`` for the same endpoint (workers, delta-rs)."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }


_UPLOADER = """
import json, os, sys, boto3
args = json.load(sys.stdin)
s3 = boto3.client("s3", endpoint_url=args["endpoint"], region_name=args["region"],
                  aws_access_key_id=args["key"], aws_secret_access_key=args["secret"])
existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
if args["bucket"] not in existing:
    s3.create_bucket(Bucket=args["bucket"])
count = 0
for prefix, local in args["folders"].items():
    for root, _, files in os.walk(local):
        for name in files:
            full = os.path.join(root, name)
            key = prefix + "/" + os.path.relpath(full, local)
            s3.upload_file(full, args["bucket"], key)
            count += 1
print(count)
"""


_Emulator = TypeVar("_Emulator", bound="LoopbackEmulator")


@dataclass
class LoopbackEmulator:
    """A store emulator's process on 127.0.0.1:<free port>, its output in ``log_path``, started
    with an environment free of ``AWS_*``; ready once ``probe_path`` answers over HTTP."""

    binary: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(default_factory=lambda: Path(tempfile.mkdtemp()) / "emulator.log")
    probe_path = "/"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self: _Emulator) -> _Emulator:
        self.port = self.port or free_port()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=scrubbed_environment(),
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.binary.name} exited: {self.requests_log()[-2000:]}")
            try:
                urllib.request.urlopen(self.endpoint + self.probe_path, timeout=1).close()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{self.binary.name} did not answer on {self.endpoint}")

    def upload(self, folders: Mapping[str, Path]) -> object:
        """Upload each local folder under the key prefix it is mapped to."""
        raise NotImplementedError

    def requests_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        process, self.process = self.process, None
        stop_process_group(process, grace_seconds=10)


@dataclass
class MotoServer(LoopbackEmulator):
    """``moto_server``, its requests logged to ``log_path``."""

    probe_path = "/moto-api/"

    def command(self) -> list[str]:
        return [str(self.binary), "-H", "127.0.0.1", "-p", str(self.port)]

    def upload(self, folders: Mapping[str, Path], bucket: str = BUCKET) -> int:
        """Upload each local folder under the key prefix it is mapped to; the object count."""
        python = self.binary.parent / "python"
        request = {
            "endpoint": self.endpoint,
            "region": REGION,
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "bucket": bucket,
            "folders": {prefix: str(local) for prefix, local in folders.items()},
        }
        result = subprocess.run(
            [str(python), "-c", _UPLOADER],
            input=json.dumps(request).encode(),
            capture_output=True,
            env=scrubbed_environment(),
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"upload to moto failed: {result.stderr.decode()[-2000:]}")
        return int(result.stdout)


def delete_covered_log_files(
    store: FileSystem, log_key: str, log_names: Iterable[str], result: CheckpointResult
) -> None:
    """Delete from ``store`` every commit and checkpoint under ``log_key`` (the log folder's
    key, ``/``-terminated) up to ``result``'s version but ``result``'s own parts, so only that
    checkpoint and later commits can answer (``log_names`` relative to ``log_key``)."""
    ours = {path.rsplit("/", 1)[-1] for path in result.paths}
    for entry in log_names:
        base = entry.rsplit("/", 1)[-1]
        if entry.startswith("_") or base in ours or not base[:20].isdigit():
            continue
        if int(base[:20]) <= result.version:
            store.delete_file(log_key + entry)


def s3a_spark_server(endpoint: str, worker_python: str, jars: list[Path]) -> EmbeddedServer:
    """A started Spark Connect server reading ``s3a://`` from ``endpoint``."""
    return store_spark_server(worker_python, s3a_conf(endpoint, jars))


def store_spark_server(worker_python: str, store_conf: Mapping[str, str]) -> EmbeddedServer:
    """A started Spark Connect server with an object store's settings, started with an
    environment free of ``AWS_*`` (its Python workers inherit it); on the standalone cluster
    when ``tests.cluster_placement`` names one, with every executor granted."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(scrubbed_environment(saved))
    try:
        server = EmbeddedServer(
            worker_python=worker_python,
            driver_memory=os.environ.get("DELTA_CONNECT_DRIVER_MEMORY", "2g"),
            extra_conf={**store_conf, **cluster_conf(worker_python)},
        ).start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        assert server.log_path is not None
        wait_for_executors(server.log_path)
    except BaseException:
        server.stop()
        raise
    return server


def started_with(emulator: _Emulator, folders: Mapping[str, Path]) -> Iterator[_Emulator]:
    """For a session fixture: ``emulator`` started with ``folders`` uploaded, stopped after."""
    emulator.start()
    try:
        emulator.upload(folders)
        yield emulator
    finally:
        emulator.stop()


def serve_by_hand(emulator: LoopbackEmulator, start_server: Callable[[str], EmbeddedServer]) -> int:
    """Run ``emulator`` and the server ``start_server`` gives for its endpoint until Ctrl-C."""
    emulator.start()
    try:
        server = start_server(emulator.endpoint)
        try:
            print(f"{emulator.binary.name}: {emulator.endpoint}; Spark Connect: {server.remote}")
            # Blocked, so that sigwait receives them instead of their default actions, which
            # would leave the emulator (a session of its own) running.
            stop_signals = {signal.SIGINT, signal.SIGTERM}
            signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
            signal.sigwait(stop_signals)
        finally:
            server.stop()
    finally:
        emulator.stop()
    return 0


def main() -> int:
    jars = s3a_jars()
    binary = moto_server_binary()
    if not jars or binary is None:
        print("run server/fetch-s3a-jars.sh and make moto-venv first", file=sys.stderr)
        return 1
    worker = str(ROOT / ".venv-worker" / "bin" / "python")
    return serve_by_hand(
        MotoServer(binary), lambda endpoint: s3a_spark_server(endpoint, worker, jars)
    )


if __name__ == "__main__":
    sys.exit(main())
