"""Logical-file keys as Spark expressions: the twin of ``protocol.paths`` for rows on the server.

Responsibility: ``file_key()``, the column ``canonical path + NUL + deletion-vector unique id`` of
an add or remove row, and its two halves (``canonical_path_column``, ``deletion_vector_id``,
which the replay plan joins on as two flat columns), computed by Spark itself so that checkpoint
rows can be matched against replayed rows without sending them through Python.

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


def file_key(table_root: str) -> Column:
    """``canonical path + NUL + DV unique id ('' without a DV)`` of the row's add or remove."""
    path = F.coalesce(F.col("add.path"), F.col("remove.path"))
    return F.concat(canonical_path_column(path, table_root), F.lit("\x00"), deletion_vector_id())


def deletion_vector_id(add: Column | None = None, remove: Column | None = None) -> Column:
    """The DV unique id of the row's ``add`` or ``remove`` struct ('' without a DV)."""
    add = F.col("add") if add is None else add
    remove = F.col("remove") if remove is None else remove
    return F.coalesce(dv_unique_id_column(add), dv_unique_id_column(remove), F.lit(""))


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


def canonical_path_column(path: Column, table_root: str) -> Column:
    """delta-spark's canonical path of ``path`` (see ``protocol.paths.canonical_path``)."""
    plain = ~(path.contains("%") | path.contains(":") | path.startswith("/"))
    return F.when(plain, path).otherwise(_upper_escapes(_qualified(path, table_root)))


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
