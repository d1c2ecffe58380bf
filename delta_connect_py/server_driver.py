"""The embedded server's driver program, run by ``spark-submit`` (see ``embedded``).

Responsibility: create the SparkContext, whose Spark Connect plugin (``spark.plugins``, set by
the launcher with the rest of the server's settings) starts the gRPC service, build the SQL
session state Connect sessions are made from, print :data:`READY_LINE`, then wait until SIGTERM
or SIGINT and stop Spark cleanly.

Why the line: the plugin opens the gRPC port early in the SparkContext's start, seconds before
the server can answer; a request sent then waits for the rest of the start (5-10 s on a loaded
2-core machine, 2026-11-26). The launcher (``embedded.EmbeddedServer``) calls the server ready
only once the port is open and this line was printed, so that "ready" means a first request is
answered in a fraction of a second.

Invariants: it imports nothing from delta_connect_py, so it runs in any interpreter with full
pyspark; every setting comes from the ``spark-submit`` command line, none from here; it runs no
Spark job.
"""

from __future__ import annotations

import signal
import threading

from pyspark.sql import SparkSession

#: Printed (on its own line, to stdout: the server's log) once the server answers requests;
#: ``embedded.READY_LINE`` is the same text.
READY_LINE = "delta-connect-py server driver: session state built, ready"


def main() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    spark = SparkSession.builder.getOrCreate()
    # The shared state and a session state (its catalog, analyzer and parser: the classes every
    # Connect session's first request loads) are built lazily; build them before saying ready.
    spark._jsparkSession.sessionState().conf()
    print(READY_LINE, flush=True)
    try:
        stop.wait()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
