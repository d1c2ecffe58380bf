"""Which path a snapshot takes over its checkpoint, chosen by a test.

A small checkpoint (no sidecars, at most ``plans.replay.MAX_REPLAYED_CHECKPOINT_BYTES``) has its
file actions replayed with the commits; a larger one has them joined to the replay at query
time. The test tables are small, so tests of the join path force it with
:func:`checkpoint_files`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any
from unittest import mock

from delta_connect_py.plans import replay


def checkpoint_files(joined: bool) -> AbstractContextManager[Any]:
    """While active, a checkpoint's file actions are joined at query time (``joined``: a large
    checkpoint's path, whatever its size) or, when small, replayed with the commits."""
    limit = -1 if joined else replay.MAX_REPLAYED_CHECKPOINT_BYTES
    return mock.patch.object(replay, "MAX_REPLAYED_CHECKPOINT_BYTES", limit)
