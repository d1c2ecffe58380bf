"""Checking that each commit line read is one valid Delta action (``DELTA_CORRUPT_LOG_FILE``).

Responsibility: the Spark column that fails a query on the first commit line that Spark's JSON
parser would take but the Delta protocol does not allow, and the client-side decoding of that
failure into ``CorruptLogFileError`` naming the file, its version and the line.

Spark's FAILFAST JSON parse already refuses text that is not JSON or is truncated. It is
lenient in ways a damaged log exploits, which are checked here:

- Spark keeps a line's bytes as they are; JSON parsing would read a damaged byte as U+FFFD (a
  changed path, a valid-looking action), where delta-rs refuses the file: a line must be UTF-8;
- text after the first JSON object of a line is ignored (a lost newline joins two lines; a
  truncated line appended to a file without a final newline): a line must start with ``{``,
  end with ``}``, and never hold a ``}`` followed by the start of another object;
- a field of a string type takes any JSON value (``"path": 5`` reads as ``"5"``): a file
  action's ``path`` must be a JSON string;
- a missing field is read as null: an action without a field the protocol requires (an add
  without ``size``, a metaData without ``id``) is refused instead of read as a pathless add.

The first three are tests of the line's text, its *problem* (``LINE_PROBLEM_COLUMN``, null for
a valid line), which every frame of commit lines carries: lines the Python workers read have
it computed there, on the bytes (``worker.line_checks``, where the texts of the reasons live);
lines Spark's text source reads (a few small commits, ``loading.read_by_text_source``; object
stores; a V2 checkpoint in JSON form) have it as Spark expressions (``text_problem``), evaluated
with the parse. The last is a test of the parsed struct, always here.

Invariants: lines of other writers stay valid: unknown fields and unknown actions are allowed,
as are nulls where the protocol allows them (only the fields in ``REQUIRED_FIELDS`` are
required, and only those the read's schema includes are checked); ``commitInfo`` is free-form.
The failure is a Spark expression evaluated in the same job as the parse (no extra job), on the
``version`` column: rows a query filters out before using it may go unchecked (a line's
problem being known does not fail anything until then).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import StructType

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.plans.raised_failures import raised, raised_fields
from delta_connect_py.protocol.actions import (
    DELETION_VECTOR_REQUIRED_FIELDS,
    FILE_COLUMN,
    REQUIRED_FIELDS,
    VERSION_COLUMN,
    WITH_DELETION_VECTORS,
)
from delta_connect_py.worker.line_checks import (
    FREE_FORM_PREFIX,
    JOINED,
    JOINED_OBJECTS,
    NO_END,
    NO_START,
    NON_STRING_PATH,
    NOT_UTF8,
    PATH_NOT_STRING,
    QUOTED_LINE_CHARS,
    corrupt_line,
    missing_field,
)

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Marks the failure ``checked_version`` raises, so the client can tell it from any other.
MARKER = "DELTA_CONNECT_INVALID_ACTION_LINE"


def text_problem(value: Column) -> Column:
    """Why the text of the line ``value`` is not one valid action, as Spark expressions (what
    ``worker.line_checks.line_problem`` finds, and UTF-8); null when it is valid, or blank."""
    # Plain string tests first: a regular expression is tried at every byte of a line, and
    # lines of adds with stats are long; the expressions only run on lines the tests flag.
    blank = value.rlike(r"^\s*$")  # read as no action, like the worker path's skipped lines
    starts = value.startswith("{") | value.rlike(r"^\s*\{") | blank
    ends = value.endswith("}") | value.rlike(r"\}\s*$") | blank
    problems: list[tuple[Column, str]] = [
        (~F.is_valid_utf8(value), NOT_UTF8),
        (~starts, NO_START),
        (~ends, NO_END),
        (value.rlike(JOINED_OBJECTS), JOINED),
        (~value.startswith(FREE_FORM_PREFIX) & value.rlike(PATH_NOT_STRING), NON_STRING_PATH),
    ]
    return _first_reason(problems)


def invalid_line_reason(problem: Column, action: Column, schema: StructType) -> Column:
    """Why a line with text ``problem`` (``text_problem``), parsed as ``action`` with
    ``schema``, is not a valid action line; null when it is."""
    reasons: list[tuple[Column, Column | str]] = [(problem.isNotNull(), problem)]
    reasons += missing_field_reasons(action.getField, schema)
    return _first_reason(reasons)


#: Required fields of one kind of struct a row may hold: the action's name, the field of the
#: action holding the struct (None: the action itself; ``"deletionVector"``), the fields.
RequiredFields = tuple[str, str | None, tuple[str, ...]]


def required_fields(schema: StructType) -> tuple[RequiredFields, ...]:
    """The fields the protocol requires (``REQUIRED_FIELDS``, then the deletion vector
    descriptors' ``DELETION_VECTOR_REQUIRED_FIELDS``) that ``schema``, a row's struct of
    actions as read, holds: a field the read's schema lacks is null in every row, and not
    tested."""
    found: list[RequiredFields] = []
    for name, required in REQUIRED_FIELDS.items():
        present = struct_field_type(schema, name)
        if present is not None:
            found.append((name, None, _held(present, required)))
    for name in WITH_DELETION_VECTORS:
        carrier = struct_field_type(schema, name)
        descriptor = None if carrier is None else struct_field_type(carrier, "deletionVector")
        if descriptor is not None:
            held = _held(descriptor, DELETION_VECTOR_REQUIRED_FIELDS)
            found.append((name, "deletionVector", held))
    return tuple(entry for entry in found if entry[2])


def _held(struct_type: StructType, fields: Sequence[str]) -> tuple[str, ...]:
    return tuple(field for field in fields if field in struct_type.fieldNames())


def missing_field_reasons(
    action_of: Callable[[str], Column], schema: StructType
) -> list[tuple[Column, Column | str]]:
    """A reason per field of ``required_fields(schema)`` that the row's action,
    ``action_of(name)``, holds null where the action (or its descriptor) is present."""
    return [
        (
            struct.isNotNull() & struct.getField(field).isNull(),
            missing_field(action, descriptor, field),
        )
        for struct, (action, descriptor, fields) in _required_structs(action_of, schema)
        for field in fields
    ]


def missing_field_count(action_of: Callable[[str], Column], schema: StructType) -> Column | None:
    """An aggregation: how many (row, field) pairs of ``required_fields(schema)`` lack the
    field where the row's action (or descriptor) is present, else 0; None when there is none
    to test. Plain counts, ``count(action) - count(action.field)``, which cost a scan next to
    nothing where ``missing_field_reasons``' per-row conditions would (a 1M-row checkpoint's
    full read took 4-5 s more)."""
    missing = [
        F.count(struct) - F.count(struct.getField(field))
        for struct, (_, _, fields) in _required_structs(action_of, schema)
        for field in fields
    ]
    return reduce(operator.add, missing) if missing else None


def _required_structs(
    action_of: Callable[[str], Column], schema: StructType
) -> list[tuple[Column, RequiredFields]]:
    """Each entry of ``required_fields(schema)`` with the row's struct holding its fields
    (``action_of(action)``, or that action's descriptor)."""
    structs = []
    for entry in required_fields(schema):
        action, descriptor, _ = entry
        struct = action_of(action)
        structs.append((struct if descriptor is None else struct.getField(descriptor), entry))
    return structs


def first_missing_field(action_of: Callable[[str], Column], schema: StructType) -> Column | None:
    """The first of ``missing_field_reasons`` that holds for the row, else null; None when
    ``schema`` holds no required field to test."""
    reasons = missing_field_reasons(action_of, schema)
    return _first_reason(reasons) if reasons else None


def struct_field_type(schema: StructType, name: str) -> StructType | None:
    """The type of ``schema``'s field ``name`` when it is a struct; else None."""
    if name not in schema.fieldNames():
        return None
    found = schema[name].dataType
    return found if isinstance(found, StructType) else None


def _first_reason(reasons: Sequence[tuple[Column, Column | str]]) -> Column:
    """The value of the first condition that holds (texts as literals), else null."""
    as_column = [
        (when, F.lit(value) if isinstance(value, str) else value) for when, value in reasons
    ]
    reason = F.when(*as_column[0])
    for condition, value in as_column[1:]:
        reason = reason.when(condition, value)
    return reason


def checked_version(value: Column, problem: Column, action: Column, schema: StructType) -> Column:
    """The line's ``version`` column, failing the query on the first invalid line with a
    message ``corrupt_line_error`` decodes."""
    reason = invalid_line_reason(problem, action, schema)
    line = F.substring(value, 1, QUOTED_LINE_CHARS)
    failure = raised(MARKER, F.col(FILE_COLUMN), reason, line).cast("long")
    return F.when(reason.isNull(), F.col(VERSION_COLUMN)).otherwise(failure)


_COMMIT_VERSION = re.compile(r"(\d+)(?:\.\d+)?(?:\.compacted)?\.json$")
#: A V2 checkpoint in JSON form, ``<version>.checkpoint.<uuid>.json``.
_CHECKPOINT_VERSION = re.compile(r"^(\d+)\.checkpoint\.[^/]*\.json$")


def corrupt_line_error(text: str) -> CorruptLogFileError | None:
    """The ``DELTA_CORRUPT_LOG_FILE`` a ``valid_action_lines`` failure in ``text`` stands
    for; None when ``text`` holds none."""
    fields = raised_fields(MARKER, 3, text)
    if fields is None:
        return None
    file, reason, line = fields
    name = file.rpartition("/_delta_log/")[2]
    version = _CHECKPOINT_VERSION.search(name) or _COMMIT_VERSION.search(name)
    return corrupt_line(file, int(version.group(1)) if version else None, reason, line)
