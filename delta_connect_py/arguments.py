"""Checks of the public API's arguments, done on the client before any Spark job.

Responsibility: one place that says what a version, a timestamp, a table path, a column list,
a filter or a positive count must be, and raises ``DELTA_CONNECT_INVALID_ARGUMENT`` naming the
call, the argument, the value received and what is expected.

Invariants: a check never contacts the server and never changes a valid value's meaning (it
returns the value as the rest of the library uses it: an ``int``, a ``str`` path); a wrong type
raises :class:`InvalidArgumentTypeError` (also a ``TypeError``), a wrong value of the right type
:class:`InvalidArgumentError` (also a ``ValueError``). Values shown in messages are shortened.
"""

from __future__ import annotations

import operator
import os
from datetime import datetime
from typing import Any

from delta_connect_py.errors import InvalidArgumentError, InvalidArgumentTypeError

#: Longest ``repr`` of a received value shown in a message.
MAX_SHOWN = 80

TIMESTAMP_EXPECTED = (
    "a datetime or a string Spark casts to a timestamp, like '2024-01-01 00:00:00' or "
    "'2024-01-01T00:00:00+02:00' (without a zone: the session's time zone)"
)
FILTER_EXPECTED = (
    "None, a (column, op, value) tuple, a list of such tuples (ANDed) or a list of lists of "
    "them (ORed), e.g. [('id', '>', 5)]"
)


def shown(value: object) -> str:
    """``repr(value)``, shortened to ``MAX_SHOWN`` characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def invalid_type(function: str, argument: str, value: object, expected: str) -> Exception:
    return InvalidArgumentTypeError(
        function=function,
        argument=argument,
        value=shown(value),
        value_type=type(value).__name__,
        expected=expected,
    )


def invalid_value(function: str, argument: str, value: object, expected: str) -> Exception:
    return InvalidArgumentError(
        function=function, argument=argument, value=shown(value), expected=expected
    )


def integer(
    function: str,
    argument: str,
    value: object,
    *,
    minimum: int | None,
    what: str,
    maximum: int | None = None,
) -> int:
    """``value`` as an ``int`` (of at least ``minimum``, at most ``maximum``): any integer type
    (numpy's too), never a bool, a float or a string of digits."""
    expected = f"{what}: an int" + ("" if minimum is None else f" >= {minimum}")
    expected += "" if maximum is None else f" and <= {maximum}"
    if isinstance(value, bool):
        raise invalid_type(function, argument, value, expected)
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise invalid_type(function, argument, value, expected) from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise invalid_value(function, argument, value, expected)
    return number


def optional_integer(
    function: str,
    argument: str,
    value: object,
    *,
    minimum: int | None,
    what: str,
    maximum: int | None = None,
) -> int | None:
    if value is None:
        return None
    return integer(function, argument, value, minimum=minimum, what=what, maximum=maximum)


def version(function: str, value: object, argument: str = "version") -> int | None:
    """A table version or None. Negative versions are left to the caller's Delta error (a
    snapshot's ``DELTA_VERSION_NOT_FOUND`` lists the versions that exist)."""
    return optional_integer(
        function, argument, value, minimum=None, what="a table version (None for latest)"
    )


def cdf_version(function: str, value: object, argument: str) -> int | None:
    """A change data feed's start or end version: None or an int >= 0 (delta-spark refuses a
    negative ``startingVersion`` as an illegal option)."""
    return optional_integer(function, argument, value, minimum=0, what="a table version")


def timestamp(function: str, value: object, argument: str = "timestamp") -> datetime | str | None:
    """None, a datetime or a string (parsed later: an unreadable string is
    ``DELTA_TIMESTAMP_INVALID``)."""
    if value is None or isinstance(value, (datetime, str)):
        return value
    raise invalid_type(function, argument, value, TIMESTAMP_EXPECTED)


def version_or_timestamp(
    function: str,
    version_value: object,
    timestamp_value: object,
    names: tuple[str, str] = ("version", "timestamp"),
) -> tuple[int | None, datetime | str | None]:
    """Both checked, and at most one of them given."""
    checked_version = version(function, version_value, names[0])
    checked_timestamp = timestamp(function, timestamp_value, names[1])
    if checked_version is not None and checked_timestamp is not None:
        raise invalid_value(
            function,
            f"{names[0]}, {names[1]}",
            (checked_version, checked_timestamp),
            f"either {names[0]} or {names[1]}, not both",
        )
    return checked_version, checked_timestamp


def table_path(function: str, value: object) -> str:
    """A table path: a non-empty ``str`` or ``os.PathLike`` of one (not bytes, not None)."""
    expected = "a table path or URI: a non-empty str or pathlib.Path (e.g. 's3a://bucket/t')"
    path = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(path, str):
        raise invalid_type(function, "path", value, expected)
    if not path.strip():
        raise invalid_value(function, "path", value, expected)
    return path


def columns(function: str, value: object) -> list[str] | None:
    """None or a list (or tuple) of column names; a bare string is refused, not iterated."""
    expected = "None or a list of column names, e.g. ['id', 'name']"
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise invalid_type(function, "columns", value, expected)
    if not all(isinstance(name, str) for name in value):
        raise invalid_type(function, "columns", value, expected)
    return list(value)


def flag(function: str, argument: str, value: object) -> bool:
    """A ``bool`` (numpy's too): a string such as ``"no"`` is refused, never read as true."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise invalid_type(function, argument, value, "True or False")


def session(function: str, value: object) -> Any:
    """A Spark Connect session (a class with pyspark's Connect ``client`` and ``version``;
    looked up on the class: reading ``version`` asks the server), not a URL."""
    if hasattr(type(value), "client") and hasattr(type(value), "version"):
        return value
    expected = "a Spark Connect session, e.g. delta_connect_py.connect('sc://host:15002')"
    raise invalid_type(function, "spark", value, expected)


def mapping(function: str, argument: str, value: object) -> Any:
    """None or a mapping (a dict of names to values)."""
    if value is None or hasattr(value, "items"):
        return value
    raise invalid_type(function, argument, value, "None or a dict of names to values")


def filter_container(function: str, value: Any) -> Any:
    """The filter's outer type (its predicates are checked by ``protocol.file_filters``): a
    string such as ``"id > 5"`` is refused rather than read character by character."""
    if value is None or isinstance(value, (tuple, list)):
        return value
    raise invalid_type(function, "filter", value, FILTER_EXPECTED)
