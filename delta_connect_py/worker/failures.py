"""Carrying a DeltaError from a server-side Python worker back to the client.

Responsibility: a worker that detects bad input raises :class:`WorkerFailure`, whose message
embeds the error class and parameters between markers; the client finds them in the Spark error
text and raises the same :class:`~delta_connect_py.errors.DeltaError` subclass.

Invariants: the encoding is plain JSON between fixed markers, so it survives Spark's error
wrapping (which may prefix, truncate tracebacks or repeat the message); unknown classes decode to
the root ``DeltaError``.
"""

from __future__ import annotations

import json
import re

from delta_connect_py.errors import DeltaError

_START = "<<DELTA_CONNECT_FAILURE "
_END = " DELTA_CONNECT_FAILURE>>"
_PATTERN = re.compile(re.escape(_START) + r"(\{.*?\})" + re.escape(_END), re.DOTALL)


class WorkerFailure(RuntimeError):
    """Raised inside a worker; its text carries a DeltaError to the client."""

    def __init__(self, error: DeltaError) -> None:
        payload = json.dumps(
            {"error_class": error.error_class, "parameters": error.message_parameters}
        )
        super().__init__(f"{_START}{payload}{_END}")


def _subclasses(cls: type[DeltaError]) -> list[type[DeltaError]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found


def decode_worker_failure(text: str) -> DeltaError | None:
    """The DeltaError a worker encoded into ``text``, or None if there is none."""
    match = _PATTERN.search(text)
    if match is None:
        return None
    payload = json.loads(match.group(1))
    by_class = {cls.error_class: cls for cls in _subclasses(DeltaError)}
    error_type = by_class.get(payload["error_class"])
    if error_type is None:
        return DeltaError(message=f"[{payload['error_class']}] {payload['parameters']}")
    return error_type(**payload["parameters"])
