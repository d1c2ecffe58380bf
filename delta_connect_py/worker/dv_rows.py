"""Expanding deletion vectors into deleted row indexes, on the server, in a mapInArrow worker.

Responsibility: :func:`expand_deletion_vectors` reads each deletion vector named by its input
rows (inline bytes, or a DV file read with pyarrow.fs) and emits one ``(file_key, row_index)``
row per deleted row, which the client's plan anti-joins with the data rows.

Invariants: input rows follow :data:`DV_INPUT_SCHEMA` and output batches :data:`DV_ROWS_SCHEMA`
exactly; a missing DV file raises ``DELTA_FILE_NOT_FOUND_DETAILED`` and malformed bytes
``DELTA_DELETION_VECTOR_INVALID`` (both carried to the client as DeltaErrors); DV files are only
read, never written; one DV file read at one offset is decoded once per task.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from delta_connect_py.errors import DeletionVectorInvalidError, FileReferencedNotFoundError
from delta_connect_py.protocol.deletion_vectors import (
    DeletionVectorFormatError,
    deleted_rows,
    unframe,
    z85_decode,
)
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.log_files import filesystem_and_path

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
DV_ROWS_SCHEMA = pa.schema([("file_key", pa.string()), ("row_index", pa.int64())])


def _stored_payload(location: str, offset: int, size: int, table_root: str) -> bytes:
    filesystem, path = filesystem_and_path(location)
    try:
        with filesystem.open_input_file(path) as handle:
            handle.seek(offset)
            chunk = bytes(handle.read(size + 8))
    except FileNotFoundError as exc:
        raise WorkerFailure(FileReferencedNotFoundError(path=location, table=table_root)) from exc
    return unframe(chunk, size)


def _rows_of(row: dict[str, object]) -> list[int]:
    size = int(row["size_in_bytes"])  # type: ignore[call-overload]
    cardinality = int(row["cardinality"])  # type: ignore[call-overload]
    location = row["dv_location"]
    try:
        if location is None:
            payload = z85_decode(str(row["inline_dv"]))[:size]
        else:
            offset = int(row["offset"] or 0)  # type: ignore[call-overload]
            payload = _stored_payload(str(location), offset, size, str(row["table_root"]))
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
