"""Deleted rows of deletion vectors, as a Spark plan: DV files read by Spark, decoded in a worker.

Responsibility: :func:`deleted_rows` turns DV descriptor rows (``worker.dv_rows.DV_INPUT_SCHEMA``)
into ``(file_key, row_index)`` rows. Spark's ``binaryFile`` source reads each DV file named by
the descriptors (through the server's Hadoop file systems and credentials, so object stores
need nothing of the Python workers), Spark cuts each descriptor's framed bitmap out of its file
(``offset``, ``sizeInBytes`` + 8), and only the decoding runs in a Python worker
(``worker.dv_rows.expand_deletion_vectors``).

Invariants: each DV file is read once per plan, whatever the number of descriptors naming it;
a DV file that does not exist raises ``DELTA_FILE_NOT_FOUND_DETAILED`` naming it when the plan
is built (before any job); descriptor rows are matched to files by file name, and files whose
names collide are read by separate readers, so a row never gets another file's bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F

from delta_connect_py.errors import DeletionVectorInvalidError, FileReferencedNotFoundError
from delta_connect_py.plans.spark import (
    collect,
    escape_glob,
    map_in_arrow,
    spark_schema,
    strict_reader,
    union_all,
)
from delta_connect_py.protocol.deletion_vectors import (
    STORAGE_INLINE,
    DeletionVectorDescriptor,
    DeletionVectorFormatError,
    dv_location,
)
from delta_connect_py.spark_failures import caused_by, translate_server_error
from delta_connect_py.worker.dv_rows import (
    DV_INPUT_SCHEMA,
    DV_ROWS_SCHEMA,
    STORED_COLUMN,
    expand_deletion_vectors,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_NAME = "_dcp_dv_name"
_LOCATION = "dv_location"


def deleted_rows(
    spark: SparkSession, rows: Sequence[tuple[Any, ...]], table_root: str
) -> DataFrame:
    """``(file_key, row_index)`` of every row the descriptor ``rows`` delete (lazy)."""
    descriptors = spark.createDataFrame(list(rows), schema=spark_schema(DV_INPUT_SCHEMA))
    locations = sorted({row[1] for row in rows if row[1] is not None})
    no_bytes = F.lit(None).cast("binary").alias(STORED_COLUMN)
    inline = descriptors.where(F.col(_LOCATION).isNull()).select("*", no_bytes)
    parts = [inline]
    for group in _unique_name_groups(locations):
        named = descriptors.where(F.col(_LOCATION).isin(group))
        parts.append(_with_stored_bytes(spark, named, group, table_root))
    return map_in_arrow(union_all(parts), expand_deletion_vectors, spark_schema(DV_ROWS_SCHEMA))


def decoded_deleted_rows(
    spark: SparkSession, rows: Sequence[tuple[Any, ...]], table_root: str
) -> DataFrame:
    """``deleted_rows``, decoded once now: a missing or corrupt deletion vector is raised here
    as a DeltaError, not later from the caller's action on a frame built on them as a bare
    Spark error. Not cached (the server would keep every read's rows): deletion vectors are
    small, and decoding them twice is cheap."""
    deleted = deleted_rows(spark, rows, table_root)
    collect(deleted.select(F.count(F.lit(1))))
    return deleted


def descriptor_row(
    key: str, descriptor: DeletionVectorDescriptor, table_root: str, data_file: str
) -> tuple[Any, ...]:
    """The ``DV_INPUT_SCHEMA`` row of ``data_file``'s deletion vector, under ``key``.

    A descriptor that names no place (an unknown storage type, a UUID that is not one, a path
    that is not absolute) is ``DELTA_DELETION_VECTOR_INVALID`` here, before any job.
    """
    try:
        location = dv_location(descriptor, table_root)
    except DeletionVectorFormatError as exc:
        raise DeletionVectorInvalidError(
            file=data_file, location=descriptor.path_or_inline_dv, reason=str(exc), table=table_root
        ) from None
    inline = descriptor.path_or_inline_dv if descriptor.storage_type == STORAGE_INLINE else None
    return (
        key,
        location,
        inline,
        descriptor.offset,
        descriptor.size_in_bytes,
        descriptor.cardinality,
        table_root,
    )


def _file_name(path: Column) -> Column:
    return F.element_at(F.split(path, "/"), -1)


def _unique_name_groups(locations: Sequence[str]) -> list[list[str]]:
    """``locations`` split into as few groups as possible with distinct file names in each."""
    groups: list[list[str]] = []
    names: list[set[str]] = []
    for location in locations:
        name = location.rsplit("/", 1)[-1]
        for group, taken in zip(groups, names, strict=True):
            if name not in taken:
                group.append(location)
                taken.add(name)
                break
        else:
            groups.append([location])
            names.append({name})
    return groups


def _with_stored_bytes(
    spark: SparkSession, descriptors: DataFrame, locations: list[str], table_root: str
) -> DataFrame:
    """``descriptors`` (all naming one of ``locations``) plus each one's framed bitmap."""
    reader = strict_reader(spark).format("binaryFile")
    files = reader.load([escape_glob(path) for path in locations])
    try:
        files.schema  # noqa: B018 - analysis checks that every named file exists
    except Exception as exc:
        raise caused_by(_missing_file_error(exc, locations, table_root), exc) from None
    files = files.select(_file_name(F.col("path")).alias(_NAME), "content")
    joined = F.broadcast(descriptors.withColumn(_NAME, _file_name(F.col(_LOCATION)))).join(
        files, on=_NAME
    )
    # The frame: 4-byte size, payload, 4-byte checksum (unframed by the worker).
    start = F.coalesce(F.col("offset"), F.lit(0)) + F.lit(1)
    chunk = F.substr(F.col("content"), start, F.col("size_in_bytes") + F.lit(8))
    return joined.select(*DV_INPUT_SCHEMA.names, chunk.alias(STORED_COLUMN))


def _missing_file_error(exc: Exception, locations: Sequence[str], table_root: str) -> Exception:
    text = str(exc)
    if "PATH_NOT_FOUND" not in text:
        return translate_server_error(exc)
    missing = next(
        (path for path in locations if path.rsplit("/", 1)[-1] in text),
        "(one of the table's deletion vector files)",
    )
    return FileReferencedNotFoundError(path=missing, table=table_root)
