"""The embedded default: a local, standalone Spark Connect server process.

Responsibility: start pip's pyspark as a standalone Spark Connect server (``spark-submit`` of
``server_driver.py`` with Spark's Connect plugin, see ``LAUNCH_CONF``) bound to 127.0.0.1 on a
free port, wait until it answers, and stop it when the client exits, also when the client dies
without running its exit handlers (a watchdog process). ``server/start-local.sh`` and the test
suite start the very same server through ``python -m delta_connect_py.embedded``. Its JVM maps
Spark's classes from the installation's class archive once there is one; the first server of
an installation records them for it (``class_archive``: built after that server stopped, in the
background).

Invariants: the server only ever binds the loopback address; it is ready (``start`` returns)
once its port is open and its driver program says it answers requests (``READY_LINE``); its
Python workers run ``worker_python`` (default: this interpreter) through ``PYSPARK_PYTHON``, the
only setting a Connect server's workers follow; a server that fails to start raises
:class:`~delta_connect_py.errors.EmbeddedServerError` with the tail of its log, never hangs.
Nothing here is needed when a remote server is used, and only this module and its driver
program need full pyspark.
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from delta_connect_py import class_archive as archives
from delta_connect_py.errors import EmbeddedServerError

#: The server's driver program: a plain SparkSession whose Connect plugin serves gRPC.
DRIVER_PROGRAM = Path(__file__).with_name("server_driver.py")

#: How the embedded server is launched, beyond the settings the container shares
#: (``SERVER_CONF``). Spark's own ``SparkConnectServer`` main class forces per-session artifact
#: isolation on, and with it every Connect session gets its own class loader (so generated code
#: is compiled again for every session, SPARK-44795) and its own idle Python daemon (~56 MB
#: each, never released: SPARK-54055). Started through the plugin with isolation off, sessions
#: share both: a fresh snapshot of S took 1.6-2.1 s against 2.3-3.4 s, of L 4.8-6.7 s against
#: 6.6-7.1 s (same machine, alternating). What isolation would add, keeping one session's
#: uploaded jars and files from the others, a single-user local server does not need.
LAUNCH_CONF: dict[str, str] = {
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.sql.artifact.isolation.enabled": "false",
    "spark.sql.artifact.isolation.alwaysApplyClassloader": "false",
    # At Spark's default INFO the driver logged ~100 KB a second under the test suite (200 MB
    # in half an hour), all in the server's scratch folder; warnings and errors are what a
    # user of a local server reads. ``--conf spark.log.level=INFO`` brings the rest back.
    "spark.log.level": "WARN",
}

#: Server settings that matter for delta_connect_py's plans (see docs: spark-connect-notes).
SERVER_CONF: dict[str, str] = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # mapInArrow over nested, mostly-null action structs is ~6x slower with the default size.
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.sql.shuffle.partitions": "8",
    # Spark caches compiled query code by its text in 4 segments of a quarter of this each; at
    # the default 100, the ~95 classes of a session's calls on three tables evicted one
    # another (a latency run compiled 145 classes, 2.26 s, against 95, 1.81 s, with 1000).
    # A class is a few KB of metaspace.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # Hadoop's checksumming local file system rejects files whose ".name.crc" sidecar is stale
    # (several upstream test tables ship such sidecars); Delta never relies on those sidecars.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    # ... which is also what Hadoop's FileSystem.getLocal then returns, and the object-store
    # connectors' disk-buffered uploads cast that to LocalFileSystem (ClassCastException on
    # every s3a write, likewise ABFS): buffer their uploads in memory instead.
    "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer",
    "spark.hadoop.fs.azure.data.blocks.buffer": "bytebuffer",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}

START_TIMEOUT_SECONDS = 180.0
#: The line the driver program prints once the server answers requests (``server_driver``'s
#: ``READY_LINE``): its gRPC port opens seconds earlier.
READY_LINE = "delta-connect-py server driver: session state built, ready"
#: The environment variable naming the file the driver program writes its JVM's class path to
#: (``server_driver``'s ``CLASS_PATH_FILE_ENV``).
CLASS_PATH_FILE_ENV = "DELTA_CONNECT_CLASS_PATH_FILE"

#: The watchdog, a separate small process: it waits on a pipe only the client holds open, and
#: when the pipe closes (the client exited however it did: SIGKILL, a killed notebook kernel)
#: it stops the server's process group, which would otherwise keep running with its memory and
#: port, and removes the server's scratch folder. It leaves as soon as the server is gone, so
#: it never signals a reused group id; a server gone while its client lives is the client's to
#: report. A client that forks keeps the server until its children exit too.
_WATCHDOG = """
import os, select, shutil, signal, sys, time
server_group, scratch = int(sys.argv[1]), sys.argv[2]
client_gone = False
try:
    while not select.select([sys.stdin], [], [], 1.0)[0]:
        os.killpg(server_group, 0)
    client_gone = True
    os.killpg(server_group, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        os.killpg(server_group, 0)
        time.sleep(0.2)
    os.killpg(server_group, signal.SIGKILL)
    time.sleep(1)
except ProcessLookupError:
    pass
if client_gone:
    shutil.rmtree(scratch, ignore_errors=True)
"""
MIN_JAVA_VERSION = 17


def find_spark_home() -> Path:
    """The installed full pyspark, or a clear error when only the thin client is installed."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark-client always provides it
        raise EmbeddedServerError(message="pyspark is not installed.") from exc
    home = Path(pyspark.__file__).parent
    if not list((home / "jars").glob("spark-connect_*.jar")):
        raise EmbeddedServerError(
            message=(
                "The embedded Spark Connect server needs full pyspark with its jars, but only "
                "the thin client is installed. Install 'delta-connect-py[local]', or connect to "
                "a running server with connect('sc://host:15002') or SPARK_REMOTE."
            )
        )
    return home


def find_java() -> str:
    """The java binary (JAVA_HOME first), checked to be version 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise EmbeddedServerError(
            message=(
                "The embedded Spark Connect server needs Java 17 or newer, but no java was found "
                "(set JAVA_HOME or put java on PATH), or connect to a remote server instead."
            )
        )
    output = subprocess.run(
        [candidate, "-version"], capture_output=True, text=True, check=False
    ).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):
        major = int(match.group(2))
    if major < MIN_JAVA_VERSION:
        raise EmbeddedServerError(
            message=f"The embedded Spark Connect server needs Java 17 or newer; {candidate} is "
            f"version {major or 'unknown'}."
        )
    return candidate


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _port_in_use(port: int) -> str:
    return (
        f"Port {port} on 127.0.0.1 is already in use, so the embedded Spark Connect server "
        f"cannot listen there. If a Spark Connect server runs there, connect to it with "
        f"connect('sc://127.0.0.1:{port}'); else choose another port (--port)."
    )


def fixed_heap_options(driver_memory: str) -> str:
    """JVM options that commit the whole heap at start (``-Xms`` = ``-Xmx``).

    G1 otherwise keeps the heap near its live set and runs a concurrent cycle every few
    snapshots. Warm servers, L snapshot alternating (2026-11-24, main at 7cda7d7): 2.17-2.35 s
    against 2.26-2.95 s for the default heap sizing. The pages are touched only as the heap is
    used, but a server that has done some work holds about the heap plus 1.5 GB (5.3 GB with
    4g).
    """
    return f"-Xms{driver_memory}"


@dataclass
class EmbeddedServer:
    """A Spark Connect server child process on 127.0.0.1."""

    port: int = 0
    worker_python: str = sys.executable
    driver_memory: str = os.environ.get("DELTA_CONNECT_DRIVER_MEMORY", "4g")
    extra_conf: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None
    #: Stops the server when this process dies without running ``stop`` (see ``_WATCHDOG``).
    watchdog: subprocess.Popen[bytes] | None = None
    #: The installation's class archive (see ``class_archive``), set by ``start``; None when
    #: turned off.
    class_archive: archives.ClassArchive | None = None
    #: The class archive option the server's JVM was started with, if any.
    class_archive_option: str | None = None
    #: The java binary the server runs, set by ``start``.
    java: str | None = None

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def scratch_dir(self) -> Path | None:
        """The server's own temporary folder: its log, its class path file, Spark's local
        directory (shuffle and spill files) and the JVM's temporary files, all gone with the
        folder when the server stops."""
        return None if self.log_path is None else self.log_path.parent

    def local_dir_environment(self) -> dict[str, str]:
        """``SPARK_LOCAL_DIRS`` in the scratch folder, unless the caller chose a local dir."""
        # Spark's default local directory is the system's temporary folder, where a server
        # killed before its shutdown hook leaves its block manager folders for good. The
        # variable, not ``spark.local.dir``: Spark warns of any such setting in every log.
        chosen = "spark.local.dir" in self.extra_conf or "SPARK_LOCAL_DIRS" in os.environ
        if self.scratch_dir is None or chosen:
            return {}
        return {"SPARK_LOCAL_DIRS": str(self.scratch_dir / "spark-local")}

    @property
    def _jvm_temp_dir(self) -> Path | None:
        # The JVM's own temporary files (Spark Connect's artifact folders) likewise.
        return None if self.scratch_dir is None else self.scratch_dir / "tmp"

    def _temp_dir_option(self) -> str | None:
        return None if self._jvm_temp_dir is None else f"-Djava.io.tmpdir={self._jvm_temp_dir}"

    def command(self, spark_home: Path) -> list[str]:
        conf = {
            **SERVER_CONF,
            **LAUNCH_CONF,
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.defaultJavaOptions": " ".join(
                [
                    fixed_heap_options(self.driver_memory),
                    *filter(None, [self.class_archive_option, self._temp_dir_option()]),
                ]
            ),
            **self.extra_conf,
        }
        args = [str(spark_home / "bin" / "spark-submit")]
        args += ["--name", "delta-connect-py", "--driver-memory", self.driver_memory]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return [*args, str(DRIVER_PROGRAM)]

    def start(self) -> EmbeddedServer:
        spark_home = find_spark_home()
        java = self.java = find_java()
        if not self.port:
            self.port = free_port()
        elif _port_open(self.port):
            raise EmbeddedServerError(message=_port_in_use(self.port))
        self.class_archive = archives.class_archive(
            java, spark_home, self.extra_conf.get("spark.driver.extraClassPath", "")
        )
        self.class_archive_option = (
            None if self.class_archive is None else self.class_archive.java_option()
        )
        log_dir = Path(tempfile.mkdtemp(prefix="delta-connect-server-"))
        self.log_path = log_dir / "server.log"
        assert self._jvm_temp_dir is not None
        self._jvm_temp_dir.mkdir()
        env = {
            **os.environ,
            **self.local_dir_environment(),
            "SPARK_HOME": str(spark_home),
            "JAVA_HOME": str(Path(java).resolve().parent.parent),
            "PYSPARK_PYTHON": self.worker_python,
            # The driver program needs full pyspark, which this interpreter has (find_spark_home).
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            CLASS_PATH_FILE_ENV: str(_class_path_file(log_dir)),
        }
        env.pop("SPARK_REMOTE", None)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(spark_home),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=log_dir,
                start_new_session=True,
            )
        self.watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self.process.pid), str(log_dir)],
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        atexit.register(self.stop)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                tail = self.log_tail()
                if "java.net.BindException" in tail:  # taken since the check in ``start``
                    raise EmbeddedServerError(message=_port_in_use(self.port))
                raise EmbeddedServerError(
                    message=f"The embedded Spark Connect server exited with code "
                    f"{self.process.returncode} while starting. Log tail:\n{tail}"
                )
            if self._driver_ready() and _port_open(self.port):
                return
            time.sleep(0.1)
        tail = self.log_tail()  # before ``stop`` removes the log
        self.stop()
        raise EmbeddedServerError(
            message=f"The embedded Spark Connect server did not open port {self.port} within "
            f"{START_TIMEOUT_SECONDS:.0f} s. Log tail:\n{tail}"
        )

    def _driver_ready(self) -> bool:
        """Whether the driver program printed :data:`READY_LINE` to the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return False
        return READY_LINE.encode() in self.log_path.read_bytes()

    def serve(self, label: str) -> int:
        """Start, announce readiness, and run in the foreground until the server exits or
        this process gets SIGTERM; the server is stopped either way."""
        self.start()
        print(f"{label} server ready at {self.remote} (log: {self.log_path})", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            assert self.process is not None
            return self.process.wait()
        finally:
            self.stop()

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server; once it exited by itself, build the class archive from the classes
        it recorded, if it did (in the background, see ``class_archive``). The scratch folder
        goes too, unless the server had already failed on its own: then its log stays for the
        user to read."""
        watchdog, self.watchdog = self.watchdog, None
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait(timeout=10)
        process, self.process = self.process, None
        failed_on_its_own = process is not None and process.poll() not in (None, 0)
        exited = stop_process_group(process, grace_seconds=30)
        self._build_class_archive(process, exited)
        if process is not None and not failed_on_its_own and self.scratch_dir is not None:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def _build_class_archive(self, process: subprocess.Popen[bytes] | None, exited: bool) -> None:
        archive, self.class_archive = self.class_archive, None
        if archive is None or process is None:
            return
        class_path = self._written_class_path()
        if exited and class_path and self.java:
            archives.start_build(archive, self.java, class_path)
        else:
            archive.discard_class_list()

    def _written_class_path(self) -> str | None:
        """The driver JVM's class path, as its driver program wrote it (None if it did not)."""
        if self.log_path is None:
            return None
        try:
            return _class_path_file(self.log_path.parent).read_text() or None
        except OSError:
            return None


def _class_path_file(log_dir: Path) -> Path:
    return log_dir / "class-path"


def stop_process_group(process: subprocess.Popen[bytes] | None, grace_seconds: float) -> bool:
    """SIGTERM ``process``'s process group, SIGKILL it if still running after
    ``grace_seconds``; nothing for a process that is None or already gone. Whether it exited
    without being killed."""
    if process is None or process.poll() is not None:
        return True
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return False
    return True


#: Replaces ``SERVER_CONF``'s ``spark.master`` for ``python -m delta_connect_py.embedded`` (and
#: so ``server/start-local.sh``): ``local[*,4]`` retries a failed task up to 4 times, as a
#: cluster does (plain ``local[*]`` never retries), to test the library under task retries.
MASTER_ENV = "DELTA_CONNECT_SPARK_MASTER"


def _conf_pair(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    """Run the embedded server in the foreground (used by server/start-local.sh and
    server/with-cluster.sh)."""
    parser = argparse.ArgumentParser(description="Run a standalone Spark Connect server.")
    parser.add_argument("--port", type=int, default=15002)
    parser.add_argument("--worker-python", default=os.environ.get("PYSPARK_PYTHON", sys.executable))
    parser.add_argument(
        "--conf",
        type=_conf_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting over the server's defaults (repeatable)",
    )
    args = parser.parse_args(argv)
    extra_conf = {"spark.master": os.environ[MASTER_ENV]} if os.environ.get(MASTER_ENV) else {}
    extra_conf.update(dict(args.conf))
    server = EmbeddedServer(port=args.port, worker_python=args.worker_python, extra_conf=extra_conf)
    if extra_conf.get("spark.master"):
        print(f"Spark Connect: spark.master={extra_conf['spark.master']}", flush=True)
    return server.serve("Spark Connect")


if __name__ == "__main__":
    sys.exit(main())
