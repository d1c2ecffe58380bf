"""Checking that each commit line read is one valid Delta action (``DELTA_CORRUPT_LOG_FILE``).

Responsibility: the Spark column that fails a query on the first commit line that Spark's JSON
parser would take but the Delta protocol does not allow, and the client-side decoding of that
failure into ``CorruptLogFileError`` naming the file, its version and the line.

Spark's FAILFAST JSON parse already refuses text that is not JSON or is truncated. It is
lenient in three ways a damaged log exploits, which are checked here:

- text after the first JSON object of a line is ignored (a lost newline joins two lines; a
  truncated line appended to a file without a final newline): a line must start with ``{``,
  end with ``}``, and never hold a ``}`` followed by the start of another object;
- a field of a string type takes any JSON value (``"path": 5`` reads as ``"5"``): a file
  action's ``path`` must be a JSON string;
- a missing field is read as null: an action without a field the protocol requires (an add
  without ``size``, a metaData without ``id``) is refused instead of read as a pathless add.

Invariants: lines of other writers stay valid: unknown fields and unknown actions are allowed,
as are nulls where the protocol allows them (only the fields in ``REQUIRED_FIELDS`` are
required, and only those the read's schema includes are checked); ``commitInfo`` is free-form.
The checks are Spark expressions evaluated in the same job as the parse (no extra job),
on the ``version`` column: rows a query filters out before using it may go unchecked.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import StructType

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.protocol.actions import FILE_COLUMN, VERSION_COLUMN
from delta_connect_py.worker.log_files import JOINED_OBJECTS

if TYPE_CHECKING:
    from pyspark.sql import Column

#: Fields an action must have (non-null), per the protocol's action definitions. Left out on
#: purpose: ``metaData.schemaString`` (delta-spark's own test tables write metaData without
#: it) and fields the protocol marks optional.
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "add": ("path", "size", "modificationTime", "dataChange", "partitionValues"),
    "remove": ("path", "dataChange"),
    "cdc": ("path", "size", "dataChange", "partitionValues"),
    "metaData": ("id", "format", "partitionColumns"),
    "protocol": ("minReaderVersion", "minWriterVersion"),
    "txn": ("appId", "version"),
    "domainMetadata": ("domain", "configuration", "removed"),
}

#: A ``"path"`` key (a raw quote cannot occur inside a JSON string, so this is a key) whose
#: value is not a string or null.
NON_STRING_PATH = r'"path"\s*:\s*[^"\sn]'
#: Free-form actions, whose content is not checked beyond being one JSON object.
FREE_FORM_PREFIX = '{"commitInfo"'

#: Marks the failure ``raise_error`` raises, so the client can tell it from any other.
MARKER = "DELTA_CONNECT_INVALID_ACTION_LINE"
SEPARATOR = " \u241e "
QUOTED_LINE_CHARS = 200


def invalid_line_reason(value: Column, action: Column, schema: StructType) -> Column:
    """Why the line ``value``, parsed as ``action`` with ``schema``, is not a valid action
    line; null when it is."""
    # Plain string tests first: a regular expression is tried at every byte of a line, and
    # lines of adds with stats are long; the expressions only run on lines the tests flag.
    blank = value.rlike(r"^\s*$")  # read as no action, like the worker path's skipped lines
    starts = value.startswith("{") | value.rlike(r"^\s*\{") | blank
    ends = value.endswith("}") | value.rlike(r"\}\s*$") | blank
    reasons: list[tuple[Column, str]] = [
        # Spark keeps a line's bytes as they are; JSON parsing would read a damaged byte as
        # U+FFFD (a changed path, a valid-looking action), where delta-rs refuses the file.
        (~F.is_valid_utf8(value), "it is not valid UTF-8"),
        (~starts, "it does not start a JSON object"),
        (~ends, "it does not end a JSON object (truncated?)"),
        (value.rlike(JOINED_OBJECTS), "it holds more than one JSON object"),
        (
            ~value.startswith(FREE_FORM_PREFIX) & value.rlike(NON_STRING_PATH),
            "a path is not a string",
        ),
    ]
    for name, required in REQUIRED_FIELDS.items():
        if name not in schema.fieldNames():
            continue
        present = schema[name].dataType
        assert isinstance(present, StructType)
        for field in required:
            if field in present.fieldNames():
                missing = (
                    action.getField(name).isNotNull()
                    & action.getField(name).getField(field).isNull()
                )
                reasons.append((missing, f"its {name} action has no {field}"))
    reason = F.when(reasons[0][0], F.lit(reasons[0][1]))
    for condition, text in reasons[1:]:
        reason = reason.when(condition, F.lit(text))
    return reason


def checked_version(value: Column, action: Column, schema: StructType) -> Column:
    """The line's ``version`` column, failing the query on the first invalid line with a
    message ``corrupt_line_error`` decodes."""
    reason = invalid_line_reason(value, action, schema)
    message = F.concat(
        F.lit(MARKER + SEPARATOR),
        F.col(FILE_COLUMN),
        F.lit(SEPARATOR),
        reason,
        F.lit(SEPARATOR),
        F.substring(value, 1, QUOTED_LINE_CHARS),
        F.lit(SEPARATOR),
    )
    version = F.col(VERSION_COLUMN)
    return F.when(reason.isNull(), version).otherwise(F.raise_error(message).cast("long"))


_RAISED = re.compile(
    re.escape(MARKER + SEPARATOR)
    + "(.*?)"
    + re.escape(SEPARATOR)
    + "(.*?)"
    + re.escape(SEPARATOR)
    + "(.*?)"
    + re.escape(SEPARATOR),
    re.DOTALL,
)
_COMMIT_VERSION = re.compile(r"(\d+)(?:\.\d+)?(?:\.compacted)?\.json$")
#: A V2 checkpoint in JSON form, ``<version>.checkpoint.<uuid>.json``.
_CHECKPOINT_VERSION = re.compile(r"^(\d+)\.checkpoint\.[^/]*\.json$")


def corrupt_line_error(text: str) -> CorruptLogFileError | None:
    """The ``DELTA_CORRUPT_LOG_FILE`` a ``valid_action_lines`` failure in ``text`` stands
    for; None when ``text`` holds none."""
    found = _RAISED.search(text)
    if found is None:
        return None
    file, reason, line = found.groups()
    log_dir, separator, name = file.rpartition("/_delta_log/")
    version = _CHECKPOINT_VERSION.search(name) or _COMMIT_VERSION.search(name)
    at_version = f"version {int(version.group(1))}: " if version else ""
    quoted = line if len(line) < QUOTED_LINE_CHARS else line + "..."
    return CorruptLogFileError(
        file=file,
        path=(log_dir + "/_delta_log") if separator else file,
        reason=f"{at_version}a line is not a valid Delta action ({reason}): {quoted}",
    )
