"""Deletion vectors: descriptors, Z85, and the RoaringBitmapArray format, in pure Python.

Responsibility: everything a reader needs to turn a ``deletionVector`` descriptor into the set
of deleted row indexes of its data file, written from PROTOCOL.md ("Deletion Vectors",
"Deletion Vector Format"), with the standard library only, so it runs in a vanilla Spark
worker: Z85 decoding, where a descriptor's bytes live (:func:`dv_location`), the DV file framing
(:func:`unframe`) and the bitmap formats (:func:`deserialize_bitmap_array`).

Invariants: decoding never guesses, and Z85 decodes exactly as delta-spark's
``Codec.Base85Codec.decodeBlocks``: a group above 2**32 - 1 keeps its low 32 bits (delta-spark
sums the group in a Long and writes ``sum.toInt``; delta-rs decodes such a group differently, so
the two disagree on e.g. ``kernel/cdf-table-with-dv``); the bitmap checks below still apply. A
wrong magic number, a bad
checksum, a truncated payload, a container header that does not fit, or a cardinality different
from the descriptor's raises
:class:`DeletionVectorFormatError`. Row indexes come out ascending and distinct (64-bit values:
the high 32 bits select the bitmap of the array, the low 32 bits the value inside it). No I/O.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_VALUES = {character: index for index, character in enumerate(Z85_ALPHABET)}

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_LIMIT = 4096
_BITMAP_WORDS = 1024
_UUID_Z85_LENGTH = 20

STORAGE_UUID = "u"
STORAGE_INLINE = "i"
STORAGE_PATH = "p"


class DeletionVectorFormatError(ValueError):
    """The bytes of a deletion vector do not follow the protocol's format."""


def z85_decode(text: str) -> bytes:
    """Z85 text (length a multiple of 5) to bytes, 4 bytes per 5 characters, big-endian."""
    if len(text) % 5:
        raise DeletionVectorFormatError(f"Z85 text length {len(text)} is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for character in text[start : start + 5]:
            digit = _Z85_VALUES.get(character)
            if digit is None:
                raise DeletionVectorFormatError(f"invalid Z85 character {character!r}")
            value = value * 85 + digit
        # A group above 2**32 - 1 keeps its low 32 bits: delta-spark's decoder (the reference)
        # computes the group as a Long and stores `sum.toInt`. Some writers emit such a group
        # for the zero padding of a final partial block.
        out += (value & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(out)


def z85_uuid(text: str) -> uuid.UUID:
    """The UUID encoded by 20 Z85 characters."""
    if len(text) != _UUID_Z85_LENGTH:
        raise DeletionVectorFormatError(f"a Z85 UUID has 20 characters, got {len(text)}")
    return uuid.UUID(bytes=z85_decode(text))


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The ``deletionVector`` field of an ``add`` action."""

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    @classmethod
    def from_action(cls, action: Mapping[str, Any]) -> DeletionVectorDescriptor:
        """The descriptor of a ``deletionVector`` field as the log writes it (``offset`` may be
        left out)."""
        return cls(
            storage_type=action["storageType"],
            path_or_inline_dv=action["pathOrInlineDv"],
            offset=action.get("offset"),
            size_in_bytes=action["sizeInBytes"],
            cardinality=action["cardinality"],
        )

    @property
    def unique_id(self) -> str:
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"


def dv_location(descriptor: DeletionVectorDescriptor, table_root: str) -> str | None:
    """The (unescaped) URI of the file holding the DV, None when it is inline.

    ``u``: ``<table_root>/<prefix>/deletion_vector_<uuid>.bin`` (the prefix is whatever precedes
    the 20-character Z85 UUID); ``p``: the URI-decoded absolute path, which must be one (a path
    after the scheme that is not absolute names no file: delta-spark cannot open it either).
    """
    kind = descriptor.storage_type
    if kind == STORAGE_INLINE:
        return None
    if kind == STORAGE_PATH:
        location = unquote(descriptor.path_or_inline_dv)
        if not urlsplit(location).path.startswith("/"):
            raise DeletionVectorFormatError(
                f"its path {descriptor.path_or_inline_dv!r} is not an absolute path URI"
            )
        return location
    if kind != STORAGE_UUID:
        raise DeletionVectorFormatError(f"unknown deletion vector storage type {kind!r}")
    encoded = descriptor.path_or_inline_dv
    prefix, z85 = encoded[:-_UUID_Z85_LENGTH], encoded[-_UUID_Z85_LENGTH:]
    name = f"deletion_vector_{z85_uuid(z85)}.bin"
    root = table_root.rstrip("/")
    return f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}"


def inline_payload(descriptor: DeletionVectorDescriptor) -> bytes:
    """The serialized bitmap array of an inline (``i``) descriptor."""
    return z85_decode(descriptor.path_or_inline_dv)[: descriptor.size_in_bytes]


def unframe(chunk: bytes, size_in_bytes: int) -> bytes:
    """The payload of a stored DV: ``chunk`` starts at the descriptor's offset.

    Layout: 4-byte big-endian size, ``size`` payload bytes, 4-byte big-endian CRC-32 of them.
    """
    if len(chunk) < 8 + size_in_bytes:
        raise DeletionVectorFormatError("deletion vector file is truncated")
    (size,) = struct.unpack_from(">i", chunk, 0)
    if size != size_in_bytes:
        raise DeletionVectorFormatError(
            f"stored deletion vector size {size} differs from descriptor's {size_in_bytes}"
        )
    payload = chunk[4 : 4 + size]
    (checksum,) = struct.unpack_from(">I", chunk, 4 + size)
    if zlib.crc32(payload) != checksum:
        raise DeletionVectorFormatError("deletion vector checksum mismatch")
    return payload


class _Reader:
    """A little-endian cursor over bytes that fails loudly when it runs out."""

    def __init__(self, data: bytes, position: int = 0) -> None:
        self.data = data
        self.position = position

    def take(self, count: int) -> bytes:
        end = self.position + count
        if count < 0 or end > len(self.data):
            raise DeletionVectorFormatError("deletion vector payload is truncated")
        piece = self.data[self.position : end]
        self.position = end
        return piece

    def unpack(self, fmt: str) -> tuple[int, ...]:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


def _container_values(reader: _Reader, cardinality: int, is_run: bool) -> Iterator[int]:
    if is_run:
        (runs,) = reader.unpack("H")
        pairs = reader.unpack(f"{2 * runs}H")
        for index in range(runs):
            start, length = pairs[2 * index], pairs[2 * index + 1]
            yield from range(start, start + length + 1)
    elif cardinality <= _ARRAY_LIMIT:
        yield from reader.unpack(f"{cardinality}H")
    else:
        words = reader.unpack(f"{_BITMAP_WORDS}Q")
        for word_index, word in enumerate(words):
            while word:
                low = word & -word
                yield word_index * 64 + low.bit_length() - 1
                word ^= low


def read_roaring32(reader: _Reader) -> list[int]:
    """One portable 32-bit RoaringBitmap (the format shared by CRoaring and Java) at ``reader``."""
    (cookie,) = reader.unpack("I")
    run_flags = b""
    if cookie & 0xFFFF == _COOKIE_RUNS:
        containers = (cookie >> 16) + 1
        run_flags = reader.take((containers + 7) // 8)
    elif cookie == _COOKIE_NO_RUNS:
        (containers,) = reader.unpack("I")
    else:
        raise DeletionVectorFormatError(f"unknown RoaringBitmap cookie {cookie}")
    header = reader.unpack(f"{2 * containers}H")
    if not run_flags or containers >= _NO_OFFSET_THRESHOLD:
        reader.take(4 * containers)
    values: list[int] = []
    for index in range(containers):
        key, cardinality = header[2 * index], header[2 * index + 1] + 1
        is_run = bool(run_flags) and bool(run_flags[index // 8] >> (index % 8) & 1)
        high = key << 16
        values.extend(high | low for low in _container_values(reader, cardinality, is_run))
    return values


def deserialize_bitmap_array(payload: bytes) -> list[int]:
    """Every 64-bit value of a serialized RoaringBitmapArray (portable or native), ascending."""
    reader = _Reader(payload)
    (magic,) = reader.unpack("i")
    values: list[int] = []
    if magic == PORTABLE_MAGIC:
        (count,) = reader.unpack("q")
        for _ in range(count):
            (key,) = reader.unpack("I")
            values.extend((key << 32) | low for low in read_roaring32(reader))
    elif magic == NATIVE_MAGIC:
        (count,) = reader.unpack("i")
        for key in range(count):
            (size,) = reader.unpack("i")
            bitmap = _Reader(reader.take(size))
            values.extend((key << 32) | low for low in read_roaring32(bitmap))
    else:
        raise DeletionVectorFormatError(f"unexpected RoaringBitmapArray magic number {magic}")
    return values


def deleted_rows(payload: bytes, cardinality: int) -> list[int]:
    """The deleted row indexes in ``payload``, checked against the descriptor's cardinality."""
    rows = deserialize_bitmap_array(payload)
    if len(rows) != cardinality:
        raise DeletionVectorFormatError(
            f"deletion vector holds {len(rows)} rows, its descriptor says {cardinality}"
        )
    return rows
