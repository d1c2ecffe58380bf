"""Where a test's own Spark Connect server runs: in local mode, or on the standalone cluster
that ``server/with-cluster.sh`` started with ``DELTA_CONNECT_CLUSTER_SERVER=0``.

Responsibility: from ``DELTA_CONNECT_CLUSTER_MASTER`` (the master's URL) and
``DELTA_CONNECT_CLUSTER_WORKERS``, the Spark settings that put a server's executors on that
cluster (one 1-core, 1 GB executor per worker, Python workers from the given interpreter), and
the wait until every worker has granted the server an executor.

Invariant: a server placed on the cluster is used only once all its executors are granted, so a
test that passes has really run its tasks in executor JVMs of their own; without the variable
nothing changes (the server stays in local mode).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MASTER_VARIABLE = "DELTA_CONNECT_CLUSTER_MASTER"
WORKERS_VARIABLE = "DELTA_CONNECT_CLUSTER_WORKERS"
GRANT_LINE = "Granted executor ID"
GRANT_TIMEOUT_SECONDS = 120.0


def cluster_master() -> str | None:
    """The standalone master this run's servers go to, or None for local mode."""
    return os.environ.get(MASTER_VARIABLE) or None


def cluster_workers() -> int:
    return int(os.environ.get(WORKERS_VARIABLE, "2"))


def cluster_conf(worker_python: str) -> dict[str, str]:
    """Spark settings of a server on the cluster (empty in local mode)."""
    master = cluster_master()
    if master is None:
        return {}
    return {
        "spark.master": master,
        "spark.executor.memory": "1g",
        "spark.executor.cores": "1",
        "spark.cores.max": str(cluster_workers()),
        "spark.pyspark.python": worker_python,
        "spark.executorEnv.PYSPARK_PYTHON": worker_python,
        # The grants are INFO lines; the embedded server logs warnings only by default.
        "spark.log.level": "INFO",
    }


def granted_executors(server_log: Path) -> int:
    if not server_log.exists():
        return 0
    return server_log.read_text(errors="replace").count(GRANT_LINE)


def wait_for_executors(server_log: Path, timeout_seconds: float = GRANT_TIMEOUT_SECONDS) -> None:
    """Return once every worker granted the server of ``server_log`` an executor (at once in
    local mode); raise with the log's tail when they do not in time."""
    if cluster_master() is None:
        return
    wanted = cluster_workers()
    deadline = time.monotonic() + timeout_seconds
    while granted_executors(server_log) < wanted:
        if time.monotonic() > deadline:
            tail = "\n".join(server_log.read_text(errors="replace").splitlines()[-40:])
            raise RuntimeError(
                f"fewer than {wanted} executors granted on {cluster_master()} within "
                f"{timeout_seconds:.0f} s; server log {server_log}:\n{tail}"
            )
        time.sleep(0.5)
