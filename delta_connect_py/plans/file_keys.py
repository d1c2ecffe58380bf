"""Logical-file keys as Spark expressions: the twin of ``protocol.paths`` for rows on the server.

Responsibility: ``file_key()``, the column ``canonical path + NUL + deletion-vector unique id`` of
an add or remove row, and its two halves (``file_key_columns``, which the replay plan joins on as
two flat columns), computed by Spark itself so that checkpoint rows can be matched against
replayed rows without sending them through Python; the cheaper ``plain_file_key_column`` for
joins against keys that are all plain; and which rows are file actions.

Invariants: for every path, ``canonical_path_column`` equals ``protocol.paths.canonical_path``
and ``dv_unique_id_column`` equals ``protocol.paths.dv_unique_id`` (tested against each other on
a real server); the key equals the one ``worker.replay.file_keys`` builds. Most paths (relative,
without ``%`` or ``:``) are their own canonical form and cost only three substring tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F

from delta_connect_py.protocol.paths import root_prefix

if TYPE_CHECKING:
    from pyspark.sql import Column

_SCHEME = r"^[A-Za-z][A-Za-z0-9+.\-]*:"


def action_path() -> Column:
    """The path of the row's add or remove (null for other actions)."""
    return F.coalesce(F.col("add.path"), F.col("remove.path"))


def is_file_action() -> Column:
    """Whether the row holds an add or a remove (by their required ``path``, so a scan reads
    only that field, not the whole struct)."""
    return F.col("add.path").isNotNull() | F.col("remove.path").isNotNull()


def file_key(table_root: str) -> Column:
    """``canonical path + NUL + DV unique id ('' without a DV)`` of the row's add or remove."""
    canonical_path, dv_id = file_key_columns(table_root)
    return F.concat(canonical_path, F.lit("\x00"), dv_id)


def file_key_columns(
    table_root: str, add: Column | None = None, remove: Column | None = None
) -> tuple[Column, Column]:
    """The file key's two halves, canonical path and DV id, of an ``add`` or ``remove`` struct
    (default: the row's ``add`` and ``remove`` columns)."""
    add, remove = _actions(add, remove)
    path = F.coalesce(add.getField("path"), remove.getField("path"))
    dv_id = F.coalesce(dv_unique_id_column(add), dv_unique_id_column(remove), F.lit(""))
    return canonical_path_column(path, table_root), dv_id


def plain_file_key_column(add: Column | None = None, remove: Column | None = None) -> Column:
    """The path as written, null when the add or remove has a deletion vector: equal for two
    rows exactly when their file keys are, provided one of them has a plain path (see
    ``is_plain_path``) and no deletion vector (null equals nothing)."""
    add, remove = _actions(add, remove)
    path = F.coalesce(add.getField("path"), remove.getField("path"))
    return F.when(~has_deletion_vector(add, remove), path)


def _actions(add: Column | None, remove: Column | None) -> tuple[Column, Column]:
    """``add`` and ``remove``, by default the row's columns of those names."""
    return F.col("add") if add is None else add, F.col("remove") if remove is None else remove


def dv_unique_id_column(action: Column) -> Column:
    """``storageType + pathOrInlineDv [+ "@" + offset]``; null without a deletion vector."""
    dv = action.getField("deletionVector")
    base = F.concat(
        dv.getField("storageType"), F.coalesce(dv.getField("pathOrInlineDv"), F.lit(""))
    )
    offset = dv.getField("offset")
    with_offset = F.when(offset.isNull(), base).otherwise(
        F.concat(base, F.lit("@"), offset.cast("string"))
    )
    return F.when(dv.getField("storageType").isNull(), F.lit(None)).otherwise(with_offset)


def is_plain_path(path: Column) -> Column:
    """``protocol.paths.is_plain_path``: relative, no ``%`` or ``:``. Such a path is its own
    canonical path, and a path that is not plain never has a plain canonical path."""
    return ~(path.contains("%") | path.contains(":") | path.startswith("/"))


def has_deletion_vector(add: Column | None = None, remove: Column | None = None) -> Column:
    """Whether the row's add or remove has a deletion vector (default: the row's columns)."""
    add, remove = _actions(add, remove)
    return (
        add.getField("deletionVector").getField("storageType").isNotNull()
        | remove.getField("deletionVector").getField("storageType").isNotNull()
    )


def canonical_path_column(path: Column, table_root: str) -> Column:
    """delta-spark's canonical path of ``path`` (see ``protocol.paths.canonical_path``)."""
    return F.when(is_plain_path(path), path).otherwise(_upper_escapes(_qualified(path, table_root)))


def _qualified(path: Column, table_root: str) -> Column:
    has_scheme = path.rlike(_SCHEME)
    scheme = F.lower(F.regexp_extract(path, f"({_SCHEME[1:-1]}):", 1))
    rest = F.regexp_replace(path, _SCHEME, "")
    return (
        F.when(has_scheme, _normalized_hierarchical(scheme, rest))
        .when(path.startswith("/"), F.concat(F.lit(root_prefix(table_root)), path))
        .otherwise(path)
    )


def _normalized_hierarchical(scheme: Column, rest: Column) -> Column:
    """``scheme:`` + rest, an empty authority dropped and the host lower-cased."""
    after_slashes = F.substring(rest, 3, 1 << 30)
    authority = F.regexp_extract(after_slashes, r"^([^/]*)", 1)
    tail = F.substring(after_slashes, F.length(authority) + 1, 1 << 30)
    userinfo = F.regexp_extract(authority, r"^(.*@)", 1)
    hostport = F.substring(authority, F.length(userinfo) + 1, 1 << 30)
    with_authority = F.concat(scheme, F.lit("://"), userinfo, F.lower(hostport), tail)
    return (
        F.when(~rest.startswith("//"), F.concat(scheme, F.lit(":"), rest))
        .when(authority == "", F.concat(scheme, F.lit(":"), tail))
        .otherwise(with_authority)
    )


def _upper_escapes(text: Column) -> Column:
    """Every ``%xx`` hex escape with upper-case digits; other text unchanged."""
    pieces = F.split(text, "%", -1)

    def upper_leading_hex(piece: Column, index: Column) -> Column:
        head = F.substring(piece, 1, 2)
        is_escape = (index > 0) & head.rlike("^[0-9A-Fa-f]{2}$")
        return F.when(is_escape, F.concat(F.upper(head), F.substring(piece, 3, 1 << 30))).otherwise(
            piece
        )

    return F.array_join(F.transform(pieces, upper_leading_hex), "%")
