"""The embedded server's driver program, run by ``spark-submit`` (see ``embedded``).

Responsibility: create the SparkContext, whose Spark Connect plugin (``spark.plugins``, set by
the launcher with the rest of the server's settings) starts the gRPC service, then wait until
SIGTERM or SIGINT and stop Spark cleanly.

Invariants: it imports nothing from delta_connect_py, so it runs in any interpreter with full
pyspark; every setting comes from the ``spark-submit`` command line, none from here.
"""

from __future__ import annotations

import signal
import threading

from pyspark.sql import SparkSession


def main() -> None:
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    spark = SparkSession.builder.getOrCreate()
    try:
        stop.wait()
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
