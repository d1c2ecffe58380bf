"""A test hook: named points at which a worker body stops until a test lets it go on.

Responsibility: :func:`pause_at` lets the concurrency tests (tests/integration/
test_concurrent_writers.py) interleave the steps of a checkpoint publish or a cleanup, which run
inside one Spark task on the server, with another writer's steps in a chosen order. The task
and the test share nothing but the local file system, so the hand-shake is two files in a
folder the test names: the worker creates ``<folder>/<point>.reached``, waits until the test
has replaced it by ``<folder>/<point>.go``, and removes that (so a point may be met again).

Invariants: with no folder (``None``, the only value outside tests) nothing is touched and no
time is spent; a point whose go-ahead never comes raises after ``timeout_s`` instead of holding
a Spark task slot for ever; point names are plain file names.
"""

from __future__ import annotations

import os
import time

#: How often a paused worker looks for its go-ahead.
POLL_S = 0.005
#: How long a point waits for its go-ahead: longer than the concurrency test waits for an
#: operation to reach its next point (``SETTLE_TIMEOUT_S``, 600 s), since an operation paused
#: early waits while the test waits for the others; a hang then fails there, as a hang, and not
#: here as a paused operation given up on a machine under heavy load.
GO_AHEAD_TIMEOUT_S = 900.0


def pause_at(folder: str | None, point: str, timeout_s: float = GO_AHEAD_TIMEOUT_S) -> None:
    """Announce ``point`` in ``folder`` and wait for the go-ahead (no-op without a folder)."""
    if folder is None:
        return
    if not point or "/" in point:
        raise ValueError(f"bad pause point name {point!r}")
    reached = os.path.join(folder, f"{point}.reached")
    with open(f"{reached}.tmp", "w"):
        pass
    os.replace(f"{reached}.tmp", reached)
    go = os.path.join(folder, f"{point}.go")
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            raise RuntimeError(f"pause point {point} got no go-ahead in {timeout_s} s")
        time.sleep(POLL_S)
    os.remove(go)
