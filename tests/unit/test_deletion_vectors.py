"""Deletion vector decoding: Z85, descriptor locations, framing and the RoaringBitmapArray
formats, against an independent encoder written here from PROTOCOL.md and real DV files.
"""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.protocol.deletion_vectors import (
    NATIVE_MAGIC,
    DeletionVectorDescriptor,
    DeletionVectorFormatError,
    deleted_rows,
    deserialize_bitmap_array,
    dv_location,
    inline_payload,
    unframe,
    z85_decode,
    z85_uuid,
)
from tests.conftest import CONFORMANCE
from tests.dv_encoding import framed, portable_array, roaring32, z85_encode

# ----------------------------------------------------------------------------- tests


def test_z85_round_trip_and_spec_uuid() -> None:
    data = bytes(range(32))
    assert z85_decode(z85_encode(data)) == data
    # The example of PROTOCOL.md: "ab^-aqEH.-t@S}K{vb[*k^" is prefix "ab" + a Z85 UUID.
    assert z85_uuid("^-aqEH.-t@S}K{vb[*k^") == uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    with pytest.raises(DeletionVectorFormatError):
        z85_decode("abc")
    with pytest.raises(DeletionVectorFormatError):
        z85_decode("abc d")


def test_dv_locations_for_each_storage_type() -> None:
    u = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 1, 10, 1)
    assert dv_location(u, "s3a://bucket/t/") == (
        "s3a://bucket/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    bare = DeletionVectorDescriptor("u", "^-aqEH.-t@S}K{vb[*k^", 1, 10, 1)
    assert dv_location(bare, "file:/t") == (
        "file:/t/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    p = DeletionVectorDescriptor("p", "file:/a%20b/dv.bin", 4, 10, 1)
    assert dv_location(p, "file:/t") == "file:/a b/dv.bin"
    assert dv_location(DeletionVectorDescriptor("i", "00000", None, 4, 0), "file:/t") is None
    with pytest.raises(DeletionVectorFormatError):
        dv_location(DeletionVectorDescriptor("x", "", None, 0, 0), "file:/t")
    assert (
        dv_location(DeletionVectorDescriptor("p", "/a/dv.bin", 4, 10, 1), "file:/t") == "/a/dv.bin"
    )
    # A path after the scheme that is not absolute names no file (delta-spark's test template).
    relative = DeletionVectorDescriptor("p", "file:%7B%7BFOLDER%7D%7D/dv.bin", 4, 10, 1)
    with pytest.raises(DeletionVectorFormatError, match="not an absolute path URI"):
        dv_location(relative, "file:/t")
    assert u.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@1"


@settings(max_examples=60, deadline=None)
@given(
    st.sets(
        st.one_of(
            st.integers(0, 70_000),
            st.integers(0, 2**33),
            st.integers(2**32 - 5, 2**32 + 5),
        ),
        max_size=300,
    ),
    st.booleans(),
)
def test_portable_arrays_round_trip(values: set[int], runs: bool) -> None:
    ordered = sorted(values)
    payload = portable_array(ordered, runs=runs)
    assert deserialize_bitmap_array(payload) == ordered
    assert deleted_rows(payload, len(ordered)) == ordered


def test_bitmap_and_run_containers_and_many_keys() -> None:
    dense = list(range(0, 60_000, 3))  # > 4096 in key 0: bitmap container
    assert deserialize_bitmap_array(portable_array(dense)) == dense
    ranges = list(range(100, 5000)) + list(range(70_000, 70_010))
    payload = portable_array(ranges, kinds={0: "run", 1: "run"})
    assert deserialize_bitmap_array(payload) == ranges
    five_keys = [k << 16 for k in range(5)]  # >= 4 containers with runs: offsets present
    assert deserialize_bitmap_array(portable_array(five_keys, runs=True)) == five_keys


def test_native_format() -> None:
    low, high = [1, 2, 3], [7]
    out = struct.pack("<ii", NATIVE_MAGIC, 2)
    for values in (low, high):
        bitmap = roaring32(values)
        out += struct.pack("<i", len(bitmap)) + bitmap
    assert deserialize_bitmap_array(out) == [1, 2, 3, (1 << 32) | 7]


def test_framing_checks_size_and_checksum() -> None:
    payload = portable_array([0, 9])
    assert unframe(framed(payload) + b"trailing", len(payload)) == payload
    with pytest.raises(DeletionVectorFormatError, match="size"):
        unframe(framed(payload), len(payload) - 1)
    corrupt = bytearray(framed(payload))
    corrupt[10] ^= 0xFF
    with pytest.raises(DeletionVectorFormatError, match="checksum"):
        unframe(bytes(corrupt), len(payload))
    with pytest.raises(DeletionVectorFormatError, match="truncated"):
        unframe(framed(payload)[:-3], len(payload))


def test_bad_magic_truncation_and_cardinality() -> None:
    payload = portable_array([1, 2])
    with pytest.raises(DeletionVectorFormatError, match="magic"):
        deserialize_bitmap_array(b"\0\0\0\0" + payload[4:])
    with pytest.raises(DeletionVectorFormatError, match="truncated"):
        deserialize_bitmap_array(payload[:-1])
    with pytest.raises(DeletionVectorFormatError, match="holds"):
        deleted_rows(payload, 3)


def test_inline_descriptor() -> None:
    payload = portable_array([0, 1, 4, 5])
    descriptor = DeletionVectorDescriptor("i", z85_encode(payload), None, len(payload), 4)
    assert deleted_rows(inline_payload(descriptor), 4) == [0, 1, 4, 5]


def _conformance_dvs() -> list[tuple[str, dict[str, object]]]:
    found = []
    for table in (
        "golden/dv-partitioned-with-checkpoint",
        "kernel/with-short-dv",
        "kernel/cdf-table-with-dv",
        "delta-rs/table_with_deletion_logs",
    ):
        for commit in sorted((CONFORMANCE / table / "delta" / "_delta_log").glob("*.json")):
            for line in commit.read_text().splitlines():
                dv = (json.loads(line).get("add") or {}).get("deletionVector")
                if dv:
                    found.append((table, dv))
    return found


@pytest.mark.parametrize(("table", "dv"), _conformance_dvs())
def test_real_deletion_vectors_decode_to_their_cardinality(
    table: str, dv: dict[str, object]
) -> None:
    descriptor = DeletionVectorDescriptor(
        str(dv["storageType"]),
        str(dv["pathOrInlineDv"]),
        dv.get("offset"),  # type: ignore[arg-type]
        int(str(dv["sizeInBytes"])),
        int(str(dv["cardinality"])),
    )
    root = "file:" + str(CONFORMANCE / table / "delta")
    location = dv_location(descriptor, root)
    if location is None:
        payload = inline_payload(descriptor)
    else:
        data = Path(location.removeprefix("file:")).read_bytes()
        payload = unframe(data[descriptor.offset or 0 :], descriptor.size_in_bytes)
    rows = deleted_rows(payload, descriptor.cardinality)
    assert rows == sorted(set(rows))
