"""A Spark Connect server with real delta-spark: the tests' oracle, independent of our client.

Responsibility: start pip pyspark's Spark Connect server (the same ``spark-submit`` command as
``delta_connect_py.embedded``) with the jars that ``server/fetch-delta-jars.sh`` put in
``.delta-jars/`` on ``--jars``, Delta's SQL extension and catalog, and the Delta Connect plugins
when the delta-connect-server jar is there. Nothing of delta_connect_py runs on it: tests talk to
it with a plain ``pyspark.sql.SparkSession.builder.remote(...)`` session.

Run it by hand (foreground, Ctrl-C stops it)::

    .venv/bin/python -m tests.delta_spark_server [--port 15041]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

from delta_connect_py.embedded import SERVER_CONF, EmbeddedServer

ROOT = Path(__file__).resolve().parents[1]
JARS_DIR = Path(os.environ.get("DELTA_JARS_DIR", ROOT / ".delta-jars"))
DEFAULT_PORT = 15041

DELTA_CONF: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Tests age log files with os.utime and clean up at once; allow short retentions.
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    # Small test tables on a small machine: delta-spark's state reconstruction defaults to 50
    # partitions, MERGE/UPDATE shuffles to 8 (SERVER_CONF); 2 keeps each command a few seconds.
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.shuffle.partitions": "2",
}
#: Only for the tests' tiny tables (not the bench): delta-spark's commands on a cold JVM spend
#: most of their time compiling, not computing. Interpreted expressions, no whole-stage codegen,
#: no AQE re-planning, C1-only JIT and the serial GC cut writing the test tables ~3x (162 s to
#: 50 s on the loaded 2-core machine) and the server start by a few seconds.
FAST_START_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.extraJavaOptions": (
        f"{SERVER_CONF['spark.driver.extraJavaOptions']} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    ),
}
DELTA_CONNECT_CONF: dict[str, str] = {
    "spark.connect.extensions.relation.classes": (
        "org.apache.spark.sql.connect.delta.DeltaRelationPlugin"
    ),
    "spark.connect.extensions.command.classes": (
        "org.apache.spark.sql.connect.delta.DeltaCommandPlugin"
    ),
}


def delta_jars(jars_dir: Path = JARS_DIR) -> list[Path]:
    """The jars to put on the server's class path (empty when the folder is missing)."""
    return sorted(jars_dir.glob("*.jar")) if jars_dir.is_dir() else []


def has_delta_connect(jars: list[Path]) -> bool:
    return any(jar.name.startswith("delta-connect-server") for jar in jars)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _worker_python() -> str:
    candidate = ROOT / ".venv-worker" / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


@dataclass
class DeltaSparkServer(EmbeddedServer):
    """The embedded server's process handling, plus ``--jars`` and the Delta settings."""

    jars: list[Path] = field(default_factory=delta_jars)

    def command(self, spark_home: Path) -> list[str]:
        args = super().command(spark_home)  # ends with the driver program
        return [*args[:-1], "--jars", ",".join(str(jar) for jar in self.jars), args[-1]]


def delta_spark_server(
    port: int | None = None, jars_dir: Path = JARS_DIR, *, fast_start: bool = True
) -> DeltaSparkServer:
    """A not yet started oracle server: port ``port``, else $DELTA_SPARK_PORT, else 15041 when
    free, else any free port. ``fast_start``: with :data:`FAST_START_CONF` (tests); without it,
    Spark's defaults (the bench)."""
    jars = delta_jars(jars_dir)
    if not any(jar.name.startswith("delta-spark_") for jar in jars):
        raise FileNotFoundError(
            f"no delta-spark jar in {jars_dir}: run server/fetch-delta-jars.sh first"
        )
    if port is None:
        port = int(os.environ.get("DELTA_SPARK_PORT", "0")) or (
            DEFAULT_PORT if _port_free(DEFAULT_PORT) else 0
        )
    conf = dict(DELTA_CONF)
    if fast_start:
        conf.update(FAST_START_CONF)
    if has_delta_connect(jars):
        conf.update(DELTA_CONNECT_CONF)
    return DeltaSparkServer(
        port=port,
        worker_python=_worker_python(),
        driver_memory=os.environ.get("DELTA_SPARK_DRIVER_MEMORY", "2g"),
        extra_conf=conf,
        jars=jars,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a Spark Connect server with delta-spark.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    return delta_spark_server(args.port).serve("delta-spark Connect")


if __name__ == "__main__":
    sys.exit(main())
