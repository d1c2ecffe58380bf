"""Expanding deletion vectors into deleted row indexes, on the server, in a mapInArrow worker.

Responsibility: :func:`expand_deletion_vectors` decodes each deletion vector named by its input
rows (inline bytes, or the framed bitmap Spark cut out of the DV file: ``STORED_COLUMN``, see
``plans.deletion_vectors``) and emits one ``(file_key, row_index)`` row per deleted row, which
the client's plan anti-joins with the data rows.

Invariants: input rows follow :data:`DV_INPUT_SCHEMA` plus :data:`STORED_COLUMN` and output
batches :data:`DV_ROWS_SCHEMA` exactly; malformed bytes (a checksum or size that does not
match, a frame cut short by a file too small for its offset) raise
``DELTA_DELETION_VECTOR_INVALID`` (carried to the client as a DeltaError); the worker opens no
file: everything it decodes arrived with its input rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from delta_connect_py.errors import DeletionVectorInvalidError
from delta_connect_py.protocol.deletion_vectors import (
    DeletionVectorFormatError,
    deleted_rows,
    unframe,
    z85_decode,
)
from delta_connect_py.worker.failures import WorkerFailure

DV_INPUT_SCHEMA = pa.schema(
    [
        ("file_key", pa.string()),
        ("dv_location", pa.string()),
        ("inline_dv", pa.string()),
        ("offset", pa.int32()),
        ("size_in_bytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("table_root", pa.string()),
    ]
)
#: The framed bitmap of a stored DV (size, payload, checksum), read from its file by Spark.
STORED_COLUMN = "stored"
DV_ROWS_SCHEMA = pa.schema([("file_key", pa.string()), ("row_index", pa.int64())])


def _rows_of(row: dict[str, object]) -> list[int]:
    size = int(row["size_in_bytes"])  # type: ignore[call-overload]
    cardinality = int(row["cardinality"])  # type: ignore[call-overload]
    location = row["dv_location"]
    try:
        if location is None:
            payload = z85_decode(str(row["inline_dv"]))[:size]
        else:
            stored = row[STORED_COLUMN]
            payload = unframe(stored if isinstance(stored, bytes) else b"", size)
        return deleted_rows(payload, cardinality)
    except DeletionVectorFormatError as exc:
        where = location if location is not None else "inline deletion vector"
        raise WorkerFailure(
            DeletionVectorInvalidError(
                file=row["file_key"], location=where, reason=str(exc), table=row["table_root"]
            )
        ) from exc


def expand_deletion_vectors(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: DV descriptors in, ``(file_key, row_index)`` of every deleted row out."""
    for batch in batches:
        for row in batch.to_pylist():
            indexes = _rows_of(row)
            keys = pa.array([row["file_key"]] * len(indexes), pa.string())
            yield pa.RecordBatch.from_arrays(
                [keys, pa.array(indexes, pa.int64())], schema=DV_ROWS_SCHEMA
            )
