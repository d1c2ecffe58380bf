"""Finding checkpoint values that are not UTF-8 (``DELTA_CORRUPT_LOG_FILE``).

Responsibility: the Spark column that tells whether a checkpoint row holds a string that is not
valid UTF-8, for any action column's type; the error naming the first such file and column, as
counted by a job that reads the rows anyway (``CheckpointFrames.check_readable``; the observed
metrics of the replay of a small checkpoint, ``plans.replay``), or raised by the query that
reads them (``refused_if_not_utf8``: rows the client collects itself) and decoded from Spark's
failure (``not_utf8_failure``). The replay's Python worker refuses a non-file action's string
itself (``worker.replay``), as it decodes them.

Why: Spark's parquet reader keeps a string's bytes as they are, so a damaged or miswritten
checkpoint string reaches the client as bytes that Python cannot decode (a raw
``UnicodeDecodeError`` at the ``collect`` of ``all_files()``), and a checkpoint writer would copy
them into the next checkpoint. delta-rs refuses such a file; commit lines are refused likewise
(``plans.action_lines``).

Invariants: only Spark expressions, evaluated in the scan that reads the rows (no Python
worker). Strings, and arrays and maps of strings, are tested with ``is_valid_utf8`` (an array or
map joined with an ASCII separator, which no multi-byte sequence spans); other arrays and maps are
tested element by element with higher-order functions, which Spark evaluates more slowly but
which Delta's action columns do not need. A null value holds no invalid string.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructType

from delta_connect_py.errors import CorruptLogFileError, checkpoint_value_not_utf8
from delta_connect_py.plans.raised_failures import raised, raised_fields

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: Joins an array's or a map's strings for one test; ASCII, so it ends any multi-byte sequence.
_SEPARATOR = "\n"


def not_utf8(column: Column, data_type: DataType) -> Column | None:
    """True where ``column`` (of ``data_type``) holds a string that is not valid UTF-8, else
    false or null; None when the type holds no string at all."""
    if isinstance(data_type, StringType):
        return ~F.is_valid_utf8(column)
    if isinstance(data_type, StructType):
        return _any(not_utf8(column.getField(f.name), f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _elements_not_utf8(column, data_type.elementType)
    if isinstance(data_type, MapType):
        return _any(
            [
                _elements_not_utf8(F.map_keys(column), data_type.keyType),
                _elements_not_utf8(F.map_values(column), data_type.valueType),
            ]
        )
    return None


def _elements_not_utf8(array: Column, element_type: DataType) -> Column | None:
    if isinstance(element_type, StringType):
        return ~F.is_valid_utf8(F.concat_ws(_SEPARATOR, array))
    if not _holds_strings(element_type):
        return None

    def element_not_utf8(element: Column) -> Column:
        test = not_utf8(element, element_type)
        assert test is not None  # the type holds strings
        return F.coalesce(test, F.lit(False))

    return F.exists(array, element_not_utf8)


def _holds_strings(data_type: DataType) -> bool:
    if isinstance(data_type, StringType):
        return True
    if isinstance(data_type, StructType):
        return any(_holds_strings(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _holds_strings(data_type.elementType)
    if isinstance(data_type, MapType):
        return _holds_strings(data_type.keyType) or _holds_strings(data_type.valueType)
    return False


def _any(tests: Iterable[Column | None]) -> Column | None:
    present = [F.coalesce(test, F.lit(False)) for test in tests if test is not None]
    return reduce(operator.or_, present) if present else None


def any_not_utf8(columns: Mapping[str, tuple[Column, DataType]]) -> Column | None:
    """True where some of ``columns`` (name to column and type) holds a string that is not
    UTF-8, else false; None when none of them can hold a string."""
    return _any(not_utf8(column, data_type) for column, data_type in columns.values())


def first_not_utf8_column(columns: Mapping[str, tuple[Column, DataType]]) -> Column | None:
    """The name of the first of ``columns`` (name to column and type) holding a string that is
    not UTF-8 in the row, else null; None when none of them can hold a string."""
    named = [
        (test, name)
        for name, (column, data_type) in columns.items()
        if (test := not_utf8(column, data_type)) is not None
    ]
    if not named:
        return None
    first = F.when(F.coalesce(named[0][0], F.lit(False)), F.lit(named[0][1]))
    for test, name in named[1:]:
        first = first.when(F.coalesce(test, F.lit(False)), F.lit(name))
    return first


#: Marks the failure ``refused_if_not_utf8`` raises, so the client can tell it from any other.
MARKER = "DELTA_CONNECT_NOT_UTF8"


def columns_of(
    frame: DataFrame, names: Sequence[str] | None = None
) -> dict[str, tuple[Column, DataType]]:
    """``frame``'s top-level columns (those of ``names`` it has; default all) as
    ``any_not_utf8`` and ``first_not_utf8_column`` take them."""
    fields = [f for f in frame.schema.fields if names is None or f.name in names]
    return {f.name: (F.col(f"`{f.name}`"), f.dataType) for f in fields}


def refused_if_not_utf8(
    rows: DataFrame, version: int, columns: Sequence[str], file: Column
) -> DataFrame:
    """``rows`` of the checkpoint of ``version``, failing the query that reads them at the
    first row whose ``columns`` hold a string that is not UTF-8, with a message naming the
    row's ``file`` and the column, which ``not_utf8_failure`` decodes. For the few rows a
    client reads itself (a checkpoint's sidecar names, its protocol and metadata), whose
    conversion to Python would otherwise fail with a raw ``UnicodeDecodeError``."""
    column = first_not_utf8_column(columns_of(rows, columns))
    if column is None:
        return rows
    refused = raised(MARKER, file, F.lit(str(version)), column).cast("boolean")
    return rows.where(F.when(column.isNull(), F.lit(True)).otherwise(refused))


def not_utf8_failure(text: str) -> CorruptLogFileError | None:
    """The ``DELTA_CORRUPT_LOG_FILE`` a ``refused_if_not_utf8`` failure in ``text`` stands for;
    None when ``text`` holds none."""
    fields = raised_fields(MARKER, 3, text)
    if fields is None or not fields[1].isdigit():
        return None
    file, version, column = fields
    return checkpoint_value_not_utf8(file, int(version), column)
