"""Progress of Spark jobs on the command line's terminal.

Responsibility: :func:`spark_progress_shown` registers on a Spark Connect session a progress
handler (pyspark 4's ``SparkSession.registerProgressHandler``, called with the server's stage
and task counts of each running operation) that renders every running operation as a progress
bar with ``rich``, on stderr, and removes it afterwards.

Invariants: progress is shown only when the stream is a terminal; nothing is ever written to
stdout, so a command's output stays parseable; the handler is removed and the display stopped
whatever the block raises.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from pyspark.sql.connect.shell.progress import ProgressHandler, StageInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger(__name__)


class JobProgress(ProgressHandler):
    """A progress bar per running Spark operation: completed tasks of all its stages."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=stream),
            transient=True,
        )
        self._bars: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: How many updates the handler received (for tests and logs).
        self.updates = 0

    def __call__(
        self,
        stages: Iterable[StageInfo] | None,
        inflight_tasks: int,
        operation_id: str | None,
        done: bool,
    ) -> None:
        try:
            self._update(list(stages or ()), inflight_tasks, operation_id or "", done)
        except Exception:  # a display's failure must never fail the user's job
            _log.debug("progress display failed", exc_info=True)

    def _update(self, stages: list[StageInfo], inflight_tasks: int, key: str, done: bool) -> None:
        total = sum(stage.num_tasks for stage in stages)
        completed = sum(stage.num_completed_tasks for stage in stages)
        with self._lock:
            self.updates += 1
            bar = self._bars.get(key)
            if done:
                if bar is not None:
                    self.progress.remove_task(bar)
                    del self._bars[key]
                return
            description = f"Spark job: {len(stages)} stages, {inflight_tasks} tasks running"
            if bar is None:
                self._bars[key] = self.progress.add_task(description, total=total or None)
            else:
                self.progress.update(
                    bar, description=description, total=total or None, completed=completed
                )


@contextmanager
def spark_progress_shown(spark: SparkSession, stream: TextIO) -> Iterator[JobProgress | None]:
    """Within the block, ``spark``'s jobs show their progress on ``stream`` when it is a
    terminal; yields the handler, or None when nothing is shown."""
    if not stream.isatty():
        yield None
        return
    handler = JobProgress(stream)
    spark.registerProgressHandler(handler)
    handler.progress.start()
    try:
        yield handler
    finally:
        spark.removeProgressHandler(handler)
        handler.progress.stop()
