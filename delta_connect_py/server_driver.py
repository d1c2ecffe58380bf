"""The embedded server's driver program, run by ``spark-submit`` (see ``embedded``).

Responsibility: create the SparkContext, whose Spark Connect plugin (``spark.plugins``, set by
the launcher with the rest of the server's settings) starts the gRPC service, build the SQL
session state Connect sessions are made from, write its JVM's class path to the file
``$DELTA_CONNECT_CLASS_PATH_FILE`` names, if any (a class archive is built over it, see
``class_archive``), print :data:`READY_LINE`, then wait until SIGTERM or SIGINT and stop Spark
cleanly.

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

import os
import signal
import threading

from pyspark.sql import SparkSession

#: Printed (on its own line, to stdout: the server's log) once the server answers requests;
#: ``embedded.READY_LINE`` is the same text.
READY_LINE = "delta-connect-py server driver: session state built, ready"
#: Names the file the driver JVM's ``java.class.path`` is written to (``embedded`` sets it).
CLASS_PATH_FILE_ENV = "DELTA_CONNECT_CLASS_PATH_FILE"


def main() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    spark = SparkSession.builder.getOrCreate()
    # The shared state and a session state (its catalog, analyzer and parser: the classes every
    # Connect session's first request loads) are built lazily; build them before saying ready.
    spark._jsparkSession.sessionState().conf()
    class_path_file = os.environ.get(CLASS_PATH_FILE_ENV)
    if class_path_file:
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # a classic session's context has its JVM gateway
        with open(class_path_file, "w") as file:
            file.write(jvm.java.lang.System.getProperty("java.class.path"))
    print(READY_LINE, flush=True)
    try:
        stop.wait()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
