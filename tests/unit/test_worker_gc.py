"""``worker.archives.freeze_imported_objects``: a reused worker's objects frozen once per batch
of imports, so the collection PySpark runs after every task skips them, and a task's own
objects are not frozen task after task."""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: Run in a fresh interpreter: freezing is process-wide and would outlive a test in pytest's.
_PROGRAM = textwrap.dedent(
    """
    import gc
    from delta_connect_py.worker.archives import freeze_imported_objects

    assert gc.get_freeze_count() == 0
    freeze_imported_objects()
    first = gc.get_freeze_count()
    # A task's objects, no new module: nothing more is frozen.
    task_objects = [[index] for index in range(1000)]
    freeze_imported_objects()
    unchanged = gc.get_freeze_count()
    # A task that imported a module: its objects are frozen at the next task's start.
    import wave  # noqa: F401  (not imported by the package)
    freeze_imported_objects()
    after_import = gc.get_freeze_count()
    # What is frozen is no longer walked by a full collection.
    gc.collect()
    print(first, unchanged, after_import, len(gc.get_objects(generation=2)))
    """
)


def test_objects_are_frozen_once_per_batch_of_imports() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, check=True
    )
    first, unchanged, after_import, walked = map(int, result.stdout.split())
    assert first > 1000
    assert unchanged == first
    assert after_import > first + 1000  # the task's lists and the new module's objects
    assert walked < first
