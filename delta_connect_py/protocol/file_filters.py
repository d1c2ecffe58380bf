"""Row filters for table reads, and deciding from the log which data files can match them.

Responsibility: the filter form ``Snapshot.to_df(filter=...)`` accepts (``(column, op, value)``
predicates on columns, a nested struct field named by its dotted path, ANDed, or a disjunction
of such conjunctions as pyarrow's ``filters`` take it; see :func:`parse_filter`), partition
value parsing per Delta's serialization (PROTOCOL.md "Partition Value Serialization"), and
per-file decisions: :func:`partition_may_match` (partition pruning) and :func:`stats_may_match`
(data skipping on ``stats`` min/max/nullCount).

Invariants: a decision is conservative: ``False`` only when no row of the file can satisfy the
predicate under SQL semantics (a comparison with null is not true); whenever a value, type or
statistic cannot be interpreted exactly (timestamps, floating point, binary, truncated string
maxima, a value whose Python type does not match the column's) the answer is ``True``. The
caller still applies the filter to the rows, so these decisions only ever save reading files.
Pure: no Spark, no I/O.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeAlias

from delta_connect_py import arguments

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
MEMBERSHIP = ("in", "not in")
OPERATORS = (*COMPARISONS, "==", *MEMBERSHIP)

_INTEGER = re.compile(r"[+-]?\d+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER_TYPES = frozenset({"byte", "short", "integer", "long"})
#: delta-spark truncates string statistics to this many characters; a maximum this long may be
#: a truncated prefix and is not used.
STRING_STATS_PREFIX_LENGTH = 32


#: A value a filter compares a column with: a Python literal of the column's type.
FilterScalar: TypeAlias = bool | int | float | Decimal | str | bytes | dt.date | dt.datetime
#: A filter term's value: a literal, or for ``in`` / ``not in`` a non-empty list of them.
FilterValue: TypeAlias = FilterScalar | Sequence[FilterScalar]
#: One predicate, ``(column, op, value)``: ``column`` a column name or the dotted path of a
#: nested struct field; ``op`` one of ``=``, ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
#: ``in``, ``not in``. Example: ``("region", "=", "EU")``, ``("qty", "in", [1, 2])``.
FilterTerm: TypeAlias = tuple[str, str, FilterValue]
#: A row filter as pyarrow's ``filters`` take it: one term, a list of terms (all must hold), or
#: a list of such lists (rows pass when every term of some list holds). None: no filter.
Filter: TypeAlias = FilterTerm | Sequence[FilterTerm] | Sequence[Sequence[FilterTerm]]


@dataclass(frozen=True)
class Predicate:
    """``column op value``; ``op`` is one of :data:`OPERATORS` (``==`` normalized to ``=``)."""

    column: str
    op: str
    value: Any

    @property
    def values(self) -> tuple[Any, ...]:
        return tuple(self.value) if self.op in MEMBERSHIP else (self.value,)


#: A filter in disjunctive normal form: rows pass when every predicate of some conjunction holds.
Conjunction = tuple[Predicate, ...]
Disjunction = tuple[Conjunction, ...]


def parse_filter(filter: Filter | None, function: str = "to_df") -> Disjunction:
    """Validate a filter: None, one ``(column, op, value)`` tuple, a list of them (AND), or a
    list of such lists (OR of the ANDs; pyarrow's disjunctive normal form). No filter is ``()``.

    ``op`` is ``=``/``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in`` or ``not in``; values are
    Python literals (``in``/``not in`` take a non-empty list); None is not a value. A malformed
    filter is ``DELTA_CONNECT_INVALID_ARGUMENT`` (a ValueError; a TypeError for a filter that is
    not a tuple or list at all) naming ``function``.
    """
    arguments.filter_container(function, filter)
    if filter is None:
        return ()
    items = [filter] if isinstance(filter, tuple) else list(filter)
    if not any(_is_conjunction(item) for item in items):
        return (tuple(_predicate(item, function) for item in items),) if items else ()
    return tuple(_conjunction(item, function) for item in items)


def _is_conjunction(item: Any) -> bool:
    """Whether a filter's item is a list of predicates rather than one predicate (whose first
    element is a column name)."""
    return isinstance(item, list) and bool(item) and isinstance(item[0], (tuple, list))


def _conjunction(item: Any, function: str) -> Conjunction:
    if not _is_conjunction(item):
        raise arguments.invalid_value(
            function,
            "filter",
            item,
            "a list of (column, op, value) predicates or a list of non-empty lists of them, "
            "not both (this item stands beside lists of predicates)",
        )
    return tuple(_predicate(predicate, function) for predicate in item)


def predicates_of(filter: Disjunction) -> list[Predicate]:
    """Every predicate of the filter, in order."""
    return [predicate for conjunction in filter for predicate in conjunction]


def _predicate(item: Any, function: str) -> Predicate:
    def invalid(expected: str) -> Exception:
        return arguments.invalid_value(function, "filter", item, expected)

    if not isinstance(item, (tuple, list)) or len(item) != 3:
        raise invalid(f"a (column, op, value) predicate; {arguments.FILTER_EXPECTED}")
    column, op, value = item
    op = str(op).strip().lower()
    if not isinstance(column, str) or op not in OPERATORS:
        raise invalid(f"a column name and one of the operators {', '.join(OPERATORS)}")
    op = "=" if op == "==" else op
    if op in MEMBERSHIP:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
            raise invalid(f"a list of values after {op!r}")
        value = tuple(value)
        if not value:
            raise invalid(f"a non-empty list of values after {op!r}")
    if value is None or (op in MEMBERSHIP and any(v is None for v in value)):
        raise invalid("a value that is not None (None is not a filter value)")
    return Predicate(column, op, value)


def _parse_int(text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise ValueError(text)
    return int(text)


def _parse_date(text: str) -> dt.date:
    if not _DATE.fullmatch(text):
        raise ValueError(text)
    return dt.date.fromisoformat(text)


def _parse_decimal(text: str) -> Decimal:
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    return Decimal(text)


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _parser(type_name: str) -> Callable[[str], Any] | None:
    """How to read a value of this Delta type exactly; None when we do not compare it."""
    if type_name in _INTEGER_TYPES:
        return _parse_int
    if type_name == "string":
        return str
    if type_name == "date":
        return _parse_date
    if type_name == "boolean":
        return _parse_bool
    if type_name.startswith("decimal"):
        return _parse_decimal
    return None


def _coerce(value: Any, type_name: str) -> tuple[bool, Any]:
    """(True, value as the column's Python type) when comparison is exact, else (False, None)."""
    if type_name in _INTEGER_TYPES:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return ok, value if ok else None
    if type_name == "string":
        return isinstance(value, str), value
    if type_name == "boolean":
        return isinstance(value, bool), value
    if type_name == "date":
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return True, value
        return False, None
    if type_name.startswith("decimal") and isinstance(value, (int, Decimal)):
        return not isinstance(value, bool), Decimal(value)
    return False, None


def is_null_partition_value(text: str | None) -> bool:
    """Null and the empty string both mean a null partition value."""
    return text is None or text == ""


def parse_partition_value(text: str | None, type_name: str) -> tuple[bool, Any]:
    """(True, typed value or None for null) when this value can be compared exactly."""
    if is_null_partition_value(text):
        return True, None
    parser = _parser(type_name)
    if parser is None:
        return False, None
    try:
        return True, parser(str(text))
    except (ValueError, InvalidOperation):
        return False, None


def _holds(actual: Any, op: str, wanted: Sequence[Any]) -> bool:
    value = wanted[0]
    if op == "=":
        return bool(actual == value)
    if op == "!=":
        return bool(actual != value)
    if op == "<":
        return bool(actual < value)
    if op == "<=":
        return bool(actual <= value)
    if op == ">":
        return bool(actual > value)
    if op == ">=":
        return bool(actual >= value)
    if op == "in":
        return actual in wanted
    return actual not in wanted


def _coerced_values(predicate: Predicate, type_name: str) -> list[Any] | None:
    coerced = [_coerce(value, type_name) for value in predicate.values]
    if not all(ok for ok, _ in coerced):
        return None
    return [value for _, value in coerced]


def partition_may_match(predicate: Predicate, raw: str | None, type_name: str) -> bool:
    """Can a file whose partition column holds ``raw`` have rows satisfying ``predicate``?"""
    parsed, actual = parse_partition_value(raw, type_name)
    if not parsed:
        return True
    if actual is None:
        return False
    wanted = _coerced_values(predicate, type_name)
    if wanted is None:
        return True
    return _holds(actual, predicate.op, wanted)


@dataclass(frozen=True)
class ColumnStats:
    """One column's statistics from an ``add.stats`` JSON (any of them may be unknown)."""

    num_records: int | None
    null_count: int | None
    min_value: Any
    max_value: Any


def column_stats(stats: Mapping[str, Any] | None, physical_path: Sequence[str]) -> ColumnStats:
    """The statistics of the column at ``physical_path`` (a top-level column's physical name,
    then those of the struct fields leading to a nested one; stats are keyed by physical names
    and nested as the schema is)."""
    stats = stats or {}

    def section(name: str) -> Any:
        values: Any = stats.get(name)
        for key in physical_path:
            values = values.get(key) if isinstance(values, Mapping) else None
        return values

    null_count = section("nullCount")
    num_records = stats.get("numRecords")
    return ColumnStats(
        num_records=num_records if isinstance(num_records, int) else None,
        null_count=null_count if isinstance(null_count, int) else None,
        min_value=section("minValues"),
        max_value=section("maxValues"),
    )


def _bound(value: Any, type_name: str, is_max: bool) -> Any:
    """A statistic as an exact bound of the column's Python type, or None."""
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    if type_name == "string":
        if not isinstance(value, str):
            return None
        return None if is_max and len(value) >= STRING_STATS_PREFIX_LENGTH else value
    if type_name == "boolean":
        return None
    parser = _parser(type_name)
    if parser is None:
        return None
    try:
        return parser(str(value))
    except (ValueError, InvalidOperation):
        return None


def stats_may_match(predicate: Predicate, stats: ColumnStats, type_name: str) -> bool:
    """Can a file with these statistics have rows satisfying ``predicate``?"""
    if (
        stats.num_records is not None
        and stats.null_count is not None
        and stats.null_count >= stats.num_records
    ):
        return False  # only nulls: no comparison is true
    if predicate.op in ("!=", "not in"):
        return True
    wanted = _coerced_values(predicate, type_name)
    low = _bound(stats.min_value, type_name, is_max=False)
    high = _bound(stats.max_value, type_name, is_max=True)
    if wanted is None:
        return True
    return any(_in_range(predicate.op, value, low, high) for value in wanted)


def _in_range(op: str, value: Any, low: Any, high: Any) -> bool:
    """Could some x with low <= x <= high (None: unbounded) satisfy ``x op value``?"""
    if op in ("=", "in"):
        return (low is None or low <= value) and (high is None or value <= high)
    if op == "<":
        return low is None or low < value
    if op == "<=":
        return low is None or low <= value
    if op == ">":
        return high is None or high > value
    return high is None or high >= value
