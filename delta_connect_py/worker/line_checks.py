"""Checking a commit line's text as bytes, where a worker reads it: one JSON object, paths strings.

Responsibility: the text checks of ``plans.action_lines`` (see there for why each exists) done
on a line's bytes in the Python worker that reads commit files, so that Spark needs no string
expression per line (each ``rlike`` decodes the line into a Java string: about a quarter of a
checkpointed table's fresh snapshot); and the error both places give,
``DELTA_CORRUPT_LOG_FILE`` naming the file, its version and the line.

Invariants: ``line_problem`` finds exactly what ``plans.action_lines.text_problem`` finds on a
line of valid UTF-8 (Java's ``\\s`` and Python's bytes ``\\s`` are the same six ASCII bytes; the
one stray character a joined line may hold is matched as one UTF-8 sequence, as Java matches one
code point); UTF-8 itself is checked by the reader, for a whole batch at once. A blank line is
no action and has no problem. ``line_problems`` finds, for a batch of valid UTF-8 lines at once
(RE2 through pyarrow, one code point where the byte patterns match one UTF-8 sequence), exactly
what ``line_problem`` finds on each.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from delta_connect_py.errors import CorruptLogFileError

#: The column of commit lines that holds ``line_problem`` (null for a valid line).
LINE_PROBLEM_COLUMN = "_line_problem"
#: How much of an invalid line the error quotes.
QUOTED_LINE_CHARS = 200

NOT_UTF8 = "it is not valid UTF-8"
NO_START = "it does not start a JSON object"
NO_END = "it does not end a JSON object (truncated?)"
JOINED = "it holds more than one JSON object"
NON_STRING_PATH = "a path is not a string"


def missing_field(action: str, descriptor: str | None, field: str) -> str:
    """Why an action lacking a field the protocol requires is refused: "its add action has no
    size", or for a field of its ``descriptor``, "its add action's deletionVector has no
    storageType"."""
    what = f"its {action} action" if descriptor is None else f"its {action} action's {descriptor}"
    return f"{what} has no {field}"


#: Text of a line holding more than one JSON object: a ``}`` followed (perhaps past one stray
#: character, a damaged newline) by ``{"key":``. Valid JSON never has ``}`` before ``{`` outside
#: strings, and inside a string the quote after ``{`` would have to end it and then be
#: followed by a colon, which only a key is. A Java regular expression (Spark's ``rlike``).
JOINED_OBJECTS = r'\}\s*[^,\s]?\s*\{\s*"[^"\\]*"\s*:'
#: ``JOINED_OBJECTS`` over UTF-8 bytes: the stray character is a lead byte and its
#: continuation bytes.
_JOINED_OBJECTS = re.compile(rb'\}\s*(?:[^,\s\x80-\xbf][\x80-\xbf]*)?\s*\{\s*"[^"\\]*"\s*:')
#: A ``"path"`` key (a raw quote cannot occur inside a JSON string, so this is a key) whose
#: value is not a string or null. Java and Python read it alike.
PATH_NOT_STRING = r'"path"\s*:\s*[^"\sn]'
_PATH_NOT_STRING = re.compile(PATH_NOT_STRING.encode())
#: Free-form actions, whose content is not checked beyond being one JSON object.
FREE_FORM_PREFIX = '{"commitInfo"'
_FREE_FORM_PREFIX = FREE_FORM_PREFIX.encode()


def shape_problem(line: bytes) -> str | None:
    """Why ``line`` is not one JSON object (a cheap test of its first and last bytes, then one
    regular expression); None when it is, or is blank."""
    stripped = line.strip()  # the same bytes object when there is nothing to strip
    if not stripped:
        return None
    if not stripped.startswith(b"{"):
        return NO_START
    if not stripped.endswith(b"}"):
        return NO_END
    if _JOINED_OBJECTS.search(stripped) is not None:
        return JOINED
    return None


def line_problem(line: bytes) -> str | None:
    """Why ``line`` is not one valid action as text (``shape_problem``, or a file action's
    ``path`` that is not a string); None when it is."""
    problem = shape_problem(line)
    if problem is not None or line.startswith(_FREE_FORM_PREFIX):
        return problem
    return NON_STRING_PATH if _PATH_NOT_STRING.search(line) is not None else None


#: The whitespace of Java's and Python's ``\s`` (RE2's leaves out the vertical tab).
_WHITESPACE = " \t\n\r\v\f"
#: ``JOINED_OBJECTS`` and ``PATH_NOT_STRING`` in RE2's syntax (matching code points), with that
#: whitespace spelled out.
_SPACE = r"[ \t\n\r\v\f]"
_JOINED_OBJECTS_RE2 = rf'\}}{_SPACE}*[^, \t\n\r\v\f]?{_SPACE}*\{{{_SPACE}*"[^"\\]*"{_SPACE}*:'
_PATH_NOT_STRING_RE2 = rf'"path"{_SPACE}*:{_SPACE}*[^" \t\n\r\v\fn]'


def line_problems(lines: pa.Array) -> pa.Array:
    """``line_problem`` of every line of ``lines`` (valid UTF-8 strings, none null), computed
    for the whole array at once (2,000 of M's commits, 30 MB of lines: 33 ms, where each line
    checked in Python took 49 ms, close to half of the worker's read of them)."""
    stripped = pc.utf8_trim(lines, _WHITESPACE)
    problem_if = {
        NO_START: pc.invert(pc.starts_with(stripped, "{")),
        NO_END: pc.invert(pc.ends_with(stripped, "}")),
        JOINED: pc.match_substring_regex(stripped, _JOINED_OBJECTS_RE2),
        NON_STRING_PATH: pc.and_(
            pc.invert(pc.starts_with(lines, FREE_FORM_PREFIX)),
            pc.match_substring_regex(lines, _PATH_NOT_STRING_RE2),
        ),
    }
    blank = pc.equal(pc.utf8_length(stripped), 0)
    conditions = pc.make_struct(blank, *problem_if.values(), field_names=["", *problem_if])
    no_problem = pa.scalar(None, pa.string())
    cases = [no_problem, *(pa.scalar(name, pa.string()) for name in problem_if), no_problem]
    return pc.case_when(conditions, *cases)


def corrupt_line(file: str, version: int | None, reason: str, line: str) -> CorruptLogFileError:
    """``DELTA_CORRUPT_LOG_FILE`` for the invalid ``line`` of ``file`` (a log file's URI)."""
    log_dir, separator, _ = file.rpartition("/_delta_log/")
    at_version = "" if version is None else f"version {version}: "
    quoted = line if len(line) < QUOTED_LINE_CHARS else line[:QUOTED_LINE_CHARS] + "..."
    return CorruptLogFileError(
        file=file,
        path=(log_dir + "/_delta_log") if separator else file,
        reason=f"{at_version}a line is not a valid Delta action ({reason}): {quoted}",
    )
