"""Log records for the library's long Spark jobs.

Responsibility: :func:`logged_job`, which logs when a long job starts (a state reconstruction,
a checkpoint write, a cleanup, a change data feed read) and when it ends or fails, with its
duration, on the ``delta_connect_py`` logger hierarchy (each module logs as
``logging.getLogger(__name__)``).

Invariants: records only: nothing is printed, and no handler is installed (the application
decides, as ``logging`` expects of a library); the standard library only, so any layer may log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: The library's logger; every module's logger is a child of it.
LOGGER_NAME = "delta_connect_py"


@contextmanager
def logged_job(logger: logging.Logger, what: str, **details: object) -> Iterator[None]:
    """Log ``what`` (with ``details`` as ``key=value``) at INFO when the block starts and when
    it ends, with its duration; a failure is logged at INFO too and re-raised."""
    described = what + "".join(f" {key}={value}" for key, value in details.items())
    logger.info("%s: started", described)
    started = time.monotonic()
    try:
        yield
    except BaseException:
        logger.info("%s: failed after %.2f s", described, time.monotonic() - started)
        raise
    logger.info("%s: done in %.2f s", described, time.monotonic() - started)
