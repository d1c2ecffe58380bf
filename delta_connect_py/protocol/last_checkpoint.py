"""The ``_last_checkpoint`` hint file: parsing, validation and writing.

Responsibility: turn the text of ``_delta_log/_last_checkpoint`` into a :class:`LastCheckpoint`
(or reject it as corrupt), compute PROTOCOL.md's JSON checksum, and serialise a hint the way
delta-spark writes it.

Invariants: any text that is not one JSON object with an integer ``version`` and ``size``, that
repeats a key anywhere, that has an ill-typed known field, or whose ``checksum`` (when present)
does not match the canonical form raises :class:`CorruptLastCheckpointError`; callers treat that
as "no hint" and list the log. Unknown keys are ignored. The checksum is the MD5 of the
canonical form: every leaf becomes ``path=value``, path segments are URL-encoded quoted names or
bare array indices joined by ``+``, string values are quoted and URL-encoded (only
``A-Za-z0-9-._~`` left bare, ``%XX`` upper case), numbers keep their JSON literal text,
``true``/``false``/``null`` are literal, pairs are sorted by the UTF-8 bytes of the path and
joined by ``,``; the top-level ``checksum`` key is left out. Serialised hints start with
``version``, ``size`` and (when set) ``parts`` because old readers split-read those keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

_T = TypeVar("_T")


class CorruptLastCheckpointError(ValueError):
    """The ``_last_checkpoint`` text cannot be trusted; fall back to listing the log."""


@dataclass(frozen=True)
class LastCheckpoint:
    """The fields of ``_last_checkpoint`` this library uses (delta-spark's LastCheckpointInfo)."""

    version: int
    size: int
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    checkpoint_schema: dict[str, Any] | None = None
    tags: dict[str, str] | None = None
    checksum: str | None = None
    v2_checkpoint: dict[str, Any] | None = None


class _JsonFloat(float):
    """A JSON number with a fraction or exponent that remembers its literal text."""

    literal: str

    def __new__(cls, literal: str) -> _JsonFloat:
        number = super().__new__(cls, literal)
        number.literal = literal
        return number


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise CorruptLastCheckpointError(f"duplicate key {key!r} in _last_checkpoint")
        result[key] = value
    return result


def _load_object(text: str) -> dict[str, Any]:
    if not text.strip():
        raise CorruptLastCheckpointError("_last_checkpoint is empty")
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicates, parse_float=_JsonFloat)
    except json.JSONDecodeError as exc:
        raise CorruptLastCheckpointError(f"_last_checkpoint is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise CorruptLastCheckpointError("_last_checkpoint is not a JSON object")
    return value


def _url_encode(text: str) -> str:
    return quote(text, safe="", encoding="utf-8", errors="strict")


def _canonical_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return f'"{_url_encode(value)}"'
    if isinstance(value, _JsonFloat):
        return value.literal
    if isinstance(value, int | float):
        return repr(value)
    raise TypeError(f"cannot canonicalise a {type(value).__name__} in checksum input")


def _canonical_pairs(value: Any, path: str, out: list[tuple[str, str]]) -> None:
    """Append ``(path, canonical value)`` for every leaf under ``value``."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            segment = f'"{_url_encode(str(key))}"'
            _canonical_pairs(child, f"{path}+{segment}" if path else segment, out)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for index, child in enumerate(value):
            _canonical_pairs(child, f"{path}+{index}" if path else str(index), out)
    else:
        out.append((path, _canonical_scalar(value)))


def canonical_form(obj: Mapping[str, Any]) -> str:
    """PROTOCOL.md's canonical form of a JSON object, without its top-level ``checksum``."""
    pairs: list[tuple[str, str]] = []
    _canonical_pairs({k: v for k, v in obj.items() if k != "checksum"}, "", pairs)
    pairs.sort(key=lambda pair: pair[0].encode("utf-8"))
    return ",".join(f"{path}={value}" for path, value in pairs)


def checksum_of(obj: Mapping[str, Any]) -> str:
    """The MD5 hex digest of :func:`canonical_form` (``_last_checkpoint``'s ``checksum``)."""
    return hashlib.md5(canonical_form(obj).encode("utf-8"), usedforsecurity=False).hexdigest()


def _required_int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptLastCheckpointError(f"_last_checkpoint {key!r} must be an integer: {value!r}")
    return value


def _optional(obj: Mapping[str, Any], key: str, kind: type[_T]) -> _T | None:
    value = obj.get(key)
    if value is None:
        return None
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise CorruptLastCheckpointError(
            f"_last_checkpoint {key!r} must be a {kind.__name__}: {value!r}"
        )
    return value


def _string_map(obj: Mapping[str, Any], key: str) -> dict[str, str] | None:
    value = _optional(obj, key, dict)
    if value is None:
        return None
    if not all(isinstance(v, str) for v in value.values()):
        raise CorruptLastCheckpointError(f"_last_checkpoint {key!r} must map strings to strings")
    return {str(k): str(v) for k, v in value.items()}


def _verify_checksum(obj: Mapping[str, Any]) -> str | None:
    stored = _optional(obj, "checksum", str)
    if stored is not None and stored != checksum_of(obj):
        raise CorruptLastCheckpointError(
            f"_last_checkpoint checksum {stored} does not match its content ({checksum_of(obj)})"
        )
    return stored


def parse_last_checkpoint(text: str) -> LastCheckpoint:
    """Parse and validate ``_last_checkpoint``; raises :class:`CorruptLastCheckpointError`."""
    obj = _load_object(text)
    checksum = _verify_checksum(obj)
    return LastCheckpoint(
        version=_required_int(obj, "version"),
        size=_required_int(obj, "size"),
        parts=_optional(obj, "parts", int),
        size_in_bytes=_optional(obj, "sizeInBytes", int),
        num_of_add_files=_optional(obj, "numOfAddFiles", int),
        checkpoint_schema=_optional(obj, "checkpointSchema", dict),
        tags=_string_map(obj, "tags"),
        checksum=checksum,
        v2_checkpoint=_optional(obj, "v2Checkpoint", dict),
    )


def _json_fields(info: LastCheckpoint) -> dict[str, Any]:
    fields: dict[str, Any] = {"version": info.version, "size": info.size}
    optional = {
        "parts": info.parts,
        "sizeInBytes": info.size_in_bytes,
        "numOfAddFiles": info.num_of_add_files,
        "checkpointSchema": info.checkpoint_schema,
        "tags": info.tags,
        "v2Checkpoint": info.v2_checkpoint,
    }
    fields.update({key: value for key, value in optional.items() if value is not None})
    return fields


def serialize_last_checkpoint(info: LastCheckpoint) -> str:
    """Compact JSON: ``version, size[, parts]``, the other present fields, then ``checksum``.

    The stored ``info.checksum`` is ignored; a fresh one is computed over the other fields.
    """
    fields = _json_fields(info)
    fields["checksum"] = checksum_of(fields)
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
