"""Python worker set-up that keeps small jobs small: worker processes reused, archives not re-read.

Responsibility: ``in_worker(body)``, a mapInArrow body that first makes the zip importers of the
archives Spark puts on the worker's ``PYTHONPATH`` (``pyspark.zip``, ``py4j-*.zip``, the
spark-core jar) keep their directory caches, then runs ``body``, then reads whatever input
``body`` left unread.

Why: PySpark's worker calls ``importlib.invalidate_caches()`` before every task, and on Python 3.11
a zip importer then re-reads its whole archive directory; for these three archives that is about
0.14 s per task on our machines, most of the time of a small job, and a snapshot runs several.
And a worker whose task left input unread is not reused: the next task pays a fresh process's
imports (about 0.5 s).

Invariants: only importers of archives named in the worker's ``PYTHONPATH`` are replaced, each by
an importer of the same archive (the files of a running server's Spark installation do not
change); the replacement happens once per worker process and changes nothing else; ``body``'s
results are passed through untouched.
"""

from __future__ import annotations

import os
import sys
import zipimport
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import TypeVar

_Batch = TypeVar("_Batch")


class _UnchangingArchiveImporter(zipimport.zipimporter):
    """A zip importer whose archive is known not to change while the process runs."""

    def invalidate_caches(self) -> None:
        pass


def keep_spark_archive_caches() -> None:
    """Replace the importers of Spark's archives on ``sys.path`` (idempotent)."""
    spark_archives = set(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    for path, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter and path in spark_archives:
            sys.path_importer_cache[path] = _UnchangingArchiveImporter(path)


def _run(
    body: Callable[[Iterable[_Batch]], Iterator[_Batch]], batches: Iterable[_Batch]
) -> Iterator[_Batch]:
    keep_spark_archive_caches()
    remaining = iter(batches)
    yield from body(remaining)
    # PySpark reuses a worker process only if its task read all of its input; a fresh one
    # costs a second or so of imports (pyarrow, pandas) in the next task.
    for _ in remaining:
        pass


def in_worker(
    body: Callable[[Iterable[_Batch]], Iterator[_Batch]],
) -> Callable[[Iterable[_Batch]], Iterator[_Batch]]:
    """``body`` as a mapInArrow function that first sets up the worker process (see module)."""
    return partial(_run, body)
