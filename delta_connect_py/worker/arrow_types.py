"""Arrow input of a mapInArrow body in the types it is written for, whatever the session says.

Responsibility: :func:`with_regular_types`, which passes batches through unchanged unless they
carry Arrow's 64-bit-offset types (``large_string``, ``large_binary``, ``large_list``), which
Spark sends when the session sets ``spark.sql.execution.arrow.useLargeVarTypes``; those are
cast to their 32-bit-offset twins (``string``, ``binary``, ``list``), the types every body and
the compute kernels it calls were written for (``binary_join_element_wise`` has no kernel for
``large_string`` beside ``string``, for one).

Invariants: values never change, only their offsets' width: a batch whose column would need
64-bit offsets (2 GB of text in one batch) fails the cast with Arrow's error instead of being
cut; the target schema is derived once per input schema; batches without large types are the
very objects received.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa


def regular_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every large string, binary and list type, at any depth, made regular."""
    if pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_large_binary(data_type):
        return pa.binary()
    if pa.types.is_large_list(data_type) or pa.types.is_list(data_type):
        item = data_type.value_field
        return pa.list_(item.with_type(regular_type(item.type)))
    if pa.types.is_map(data_type):
        return pa.map_(
            data_type.key_field.with_type(regular_type(data_type.key_type)),
            data_type.item_field.with_type(regular_type(data_type.item_type)),
        )
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(regular_type(field.type)) for field in data_type])
    return data_type


def regular_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema(
        [field.with_type(regular_type(field.type)) for field in schema], metadata=schema.metadata
    )


def with_regular_types(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches``, each cast to ``regular_schema`` of its schema when that differs."""
    targets: dict[pa.Schema, pa.Schema] = {}
    for batch in batches:
        target = targets.get(batch.schema)
        if target is None:
            target = targets[batch.schema] = regular_schema(batch.schema)
        if target.equals(batch.schema):
            yield batch
        else:
            cast = pa.Table.from_batches([batch]).cast(target)
            yield from cast.to_batches() or [pa.RecordBatch.from_pylist([], schema=target)]
