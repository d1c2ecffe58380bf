"""Carrying a DeltaError from a server-side Python worker back to the client.

Responsibility: a worker that detects bad input raises :class:`WorkerFailure`, whose message
embeds the error class and parameters between markers; the client finds them in the Spark error
text and raises the same :class:`~delta_connect_py.errors.DeltaError` subclass. A worker task
with side effects returns an expected refusal as data instead (:func:`encode_error` in a result
row, :func:`decode_error` on the client): Spark retries a task that raises (4 attempts on a
cluster), and a retry would meet the file system the first attempt changed.

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


def encode_error(error: DeltaError) -> str:
    """``error`` as JSON text (its class and parameters), for :func:`decode_error`."""
    return json.dumps({"error_class": error.error_class, "parameters": error.message_parameters})


class WorkerFailure(RuntimeError):
    """Raised inside a worker; its text carries a DeltaError to the client."""

    def __init__(self, error: DeltaError) -> None:
        super().__init__(f"{_START}{encode_error(error)}{_END}")


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
    return decode_error(match.group(1))


def decode_error(text: str) -> DeltaError:
    """The DeltaError :func:`encode_error` wrote as ``text``."""
    payload = json.loads(text)
    by_class = {cls.error_class: cls for cls in _subclasses(DeltaError)}
    error_type = by_class.get(payload["error_class"])
    if error_type is None:
        return DeltaError(message=f"[{payload['error_class']}] {payload['parameters']}")
    return error_type(**payload["parameters"])
