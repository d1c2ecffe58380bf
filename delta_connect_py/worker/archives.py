"""Python worker set-up that keeps small jobs small: worker processes reused, archives not re-read,
long-lived objects left out of the garbage collections between tasks.

Responsibility: ``in_worker(body)``, a mapInArrow body that first makes the zip importers of the
archives Spark puts on the worker's ``PYTHONPATH`` (``pyspark.zip``, ``py4j-*.zip``, the
spark-core jar) keep their directory caches and moves the objects of the modules imported so far
out of the cyclic garbage collector's sight (``freeze_imported_objects``), then runs ``body`` on
its input in the Arrow types it is written for (``worker.arrow_types``), then reads whatever
input ``body`` left unread.

Why: PySpark's worker calls ``importlib.invalidate_caches()`` before every task, and on Python 3.11
every zip importer then re-reads its whole archive directory: one importer per archive and one
per package imported from it, about 0.15-0.3 s per task on our machines, most of the time of a
small job, and a snapshot runs dozens of tasks.
And a worker whose task left input unread is not reused: the next task pays a fresh process's
imports (about 0.5 s). A reused worker runs a full ``gc.collect()`` after every task, which walks
every object of pyarrow, pandas and pyspark (15-45 ms a task, about a third of the Python
workers' CPU in a small table's fresh state on a 2-core server); frozen (``gc.freeze``), those
objects are no longer walked.

Invariants: only importers of archives named in the worker's ``PYTHONPATH`` (and of packages
inside them) are replaced, each by an importer of the same archive and prefix (the files of a
running server's Spark installation do not change); replacing is idempotent, runs at the start
of every task and changes nothing else; objects are frozen only when the process has imported
modules since it last froze them (its first task, and a task after one that imported more), so
the few objects of a running task frozen with them, never collected if they end in a reference
cycle, are bounded per process, not per task; ``body``'s input values reach it unchanged (only large
Arrow types made regular) and its results are passed through untouched.
"""

from __future__ import annotations

import gc
import os
import sys
import zipimport
from collections.abc import Callable, Iterable, Iterator
from functools import partial

import pyarrow as pa

from delta_connect_py.worker.arrow_types import with_regular_types


class _UnchangingArchiveImporter(zipimport.zipimporter):
    """A zip importer whose archive is known not to change while the process runs."""

    def invalidate_caches(self) -> None:
        pass


def keep_spark_archive_caches() -> None:
    """Replace the importers of Spark's archives and of the packages inside them (idempotent).

    Every package imported from an archive (``pyspark.zip/pyspark/sql``, ...) has an importer of
    its own, and each re-reads the whole archive when caches are invalidated: a dozen re-reads
    of ``pyspark.zip`` and the spark-core jar per task, not three. Importers for packages first
    imported during a task are replaced when the next task starts.
    """
    spark_archives = set(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    for path, finder in list(sys.path_importer_cache.items()):
        if type(finder) is zipimport.zipimporter and finder.archive in spark_archives:
            sys.path_importer_cache[path] = _UnchangingArchiveImporter(path)


#: Where a worker process remembers how many modules it had imported when it last froze its
#: objects: this module reaches the workers by value (a fresh copy per task), ``sys`` persists.
_FROZEN_MODULES_ATTRIBUTE = "_delta_connect_py_frozen_modules"


def freeze_imported_objects() -> None:
    """``gc.freeze()`` when modules were imported since the last freeze in this process.

    Freezing moves every object the collector tracks to a permanent generation that
    collections skip; reference counting still frees them. Modules stay for the process's
    life, so nearly all of what is frozen would never have been garbage.
    """
    imported = len(sys.modules)
    if getattr(sys, _FROZEN_MODULES_ATTRIBUTE, 0) >= imported:
        return
    gc.freeze()
    setattr(sys, _FROZEN_MODULES_ATTRIBUTE, imported)


_Body = Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def _run(body: _Body, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    keep_spark_archive_caches()
    freeze_imported_objects()
    remaining = iter(batches)
    yield from body(with_regular_types(remaining))
    # PySpark reuses a worker process only if its task read all of its input; a fresh one
    # costs a second or so of imports (pyarrow, pandas) in the next task.
    for _ in remaining:
        pass


def in_worker(body: _Body) -> _Body:
    """``body`` as a mapInArrow function that first sets up the worker process (see module)."""
    return partial(_run, body)
