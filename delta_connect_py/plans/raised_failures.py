"""Failures a query raises on purpose, for the client to decode.

Responsibility: the message a failing expression (``raise_error``) carries, a marker then
fields, and the fields read back from Spark's error text, which may hold the message among
much else (the stage, the task, a stack trace).

Invariants: fields are separated by U+241E between spaces, which log paths and Delta's texts
are not expected to hold (a field holding it would be read cut short, never as another
marker's); a message whose first field holds a plan's column reference (``_file#12``) is the
expression itself, printed by another failure of the plan, and is not decoded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column

SEPARATOR = " \u241e "
#: A column reference as Spark prints a plan's expressions (``_file#795878``).
_EXPRESSION_TEXT = re.compile(r"#\d+")


def raised(marker: str, *fields: Column) -> Column:
    """A failure of the query that evaluates it, whose message is ``marker`` then ``fields``
    (of no type: cast it to the type of the column it stands in for)."""
    parts = [F.lit(marker + SEPARATOR)]
    for field in fields:
        parts += [field, F.lit(SEPARATOR)]
    return F.raise_error(F.concat(*parts))


def raised_fields(marker: str, count: int, text: str) -> tuple[str, ...] | None:
    """The ``count`` fields of a ``raised(marker, ...)`` failure in ``text``; None when
    ``text`` holds none."""
    pattern = re.escape(marker + SEPARATOR) + (r"(.*?)" + re.escape(SEPARATOR)) * count
    found = re.search(pattern, text, re.DOTALL)
    if found is None or _EXPRESSION_TEXT.search(found.group(1)):
        return None
    return found.groups()
