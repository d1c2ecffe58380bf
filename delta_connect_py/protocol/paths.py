"""Keys for data files named in the log: canonical paths and deletion vector ids.

Responsibility: the logical-file key ``(canonical path, DV unique id)`` that log replay matches
``add`` and ``remove`` actions on, and a coarser key used to co-locate rows of one path.

Invariants: two action paths get the same :func:`canonical_path` iff delta-spark would consider
them the same file, i.e. its ``canonicalPath`` (absolute scheme-less paths are qualified with the
table root's scheme and authority; relative and fully-qualified paths are kept) followed by
``java.net.URI`` equality, which ignores the case of the scheme, of the host and of
percent-escape hex digits and treats ``scheme:///x`` like ``scheme:/x``. Paths are never
URI-decoded (the log's escaped form is the key). :func:`path_partition_key` is lower-case, so
equal canonical keys always get equal partition keys. No file system is touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def _upper_escapes(text: str) -> str:
    return _ESCAPE.sub(lambda match: match.group(0).upper(), text)


def _split_scheme(uri: str) -> tuple[str | None, str]:
    """(lower-case scheme or None, the rest after ``scheme:``)."""
    match = _SCHEME.match(uri)
    if match is None:
        return None, uri
    return match.group(0)[:-1].lower(), uri[match.end() :]


def _lower_host(authority: str) -> str:
    """Lower-case the host of ``[userinfo@]host[:port]``; user info keeps its case."""
    userinfo, at, hostport = authority.rpartition("@")
    return f"{userinfo}{at}{hostport.lower()}"


def _normalize_hierarchical(scheme: str, rest: str) -> str:
    """``scheme:`` + rest with an empty authority dropped and the host lower-cased."""
    if not rest.startswith("//"):
        return f"{scheme}:{rest}"
    authority_and_path = rest[2:]
    slash = authority_and_path.find("/")
    authority = authority_and_path if slash < 0 else authority_and_path[:slash]
    path = "" if slash < 0 else authority_and_path[slash:]
    if not authority:
        return f"{scheme}:{path}"
    return f"{scheme}://{_lower_host(authority)}{path}"


def root_prefix(table_root: str) -> str:
    """``scheme:`` or ``scheme://authority`` of the table root (``file:`` when it has none)."""
    scheme, rest = _split_scheme(table_root)
    if scheme is None:
        return "file:"
    normalized = _normalize_hierarchical(scheme, rest)
    if normalized.startswith(f"{scheme}://"):
        authority_end = normalized.find("/", len(scheme) + 3)
        return normalized if authority_end < 0 else normalized[:authority_end]
    return f"{scheme}:"


def is_plain_path(path: str) -> bool:
    """Whether ``path`` is relative and has no ``%`` or ``:``: then it is its own canonical path,
    and no other path has it as canonical path (qualifying adds a scheme, escapes keep ``%``)."""
    return not ("%" in path or ":" in path or path.startswith("/"))


def canonical_path(path: str, table_root: str) -> str:
    """The key under which delta-spark's replay would identify the file ``path``.

    ``/a/b`` under ``s3a://bucket/t`` becomes ``s3a://bucket/a/b``; under ``/tmp/t``,
    ``file:/tmp/t`` or ``file:///tmp/t`` it becomes ``file:/a/b``. ``file:///a`` and ``file:/a``
    share the key ``file:/a``. Relative paths stay as written. Escapes become ``%XX`` upper case.
    """
    scheme, rest = _split_scheme(path)
    if scheme is not None:
        canonical = _normalize_hierarchical(scheme, rest)
    elif path.startswith("/"):
        canonical = root_prefix(table_root) + path
    else:
        canonical = path
    return _upper_escapes(canonical)


def path_partition_key(path: str, table_root: str) -> str:
    """A coarse, lower-cased key: equal canonical paths always give equal partition keys."""
    return canonical_path(path, table_root).lower()


def dv_unique_id(dv: Mapping[str, Any] | None) -> str | None:
    """``storageType + pathOrInlineDv`` plus ``"@" + offset`` when ``offset`` is set.

    ``None`` when there is no deletion vector (``dv`` is None or has no ``storageType``, as an
    all-null Arrow struct does).
    """
    if dv is None or dv.get("storageType") is None:
        return None
    unique = f"{dv['storageType']}{dv.get('pathOrInlineDv') or ''}"
    offset = dv.get("offset")
    return unique if offset is None else f"{unique}@{offset}"


def file_key(path: str, dv: Mapping[str, Any] | None, table_root: str) -> tuple[str, str | None]:
    """The logical-file primary key ``(canonical path, DV unique id)``."""
    return canonical_path(path, table_root), dv_unique_id(dv)
