"""Test-only encoders for deletion vectors (Z85, portable RoaringBitmap, DV framing), written
independently from PROTOCOL.md so the decoder in ``delta_connect_py.protocol.deletion_vectors``
is checked against a second implementation.
"""

from __future__ import annotations

import struct
import zlib

from delta_connect_py.protocol.deletion_vectors import PORTABLE_MAGIC, Z85_ALPHABET


def z85_encode(data: bytes) -> str:
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        digits = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            digits.append(Z85_ALPHABET[digit])
        out.append("".join(reversed(digits)))
    return "".join(out)


def _container(lows: list[int], kind: str) -> tuple[bytes, bool]:
    if kind == "run":
        runs: list[tuple[int, int]] = []
        for low in lows:
            if runs and runs[-1][0] + runs[-1][1] + 1 == low:
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((low, 0))
        body = struct.pack("<H", len(runs)) + b"".join(struct.pack("<HH", *r) for r in runs)
        return body, True
    if kind == "bitmap" or len(lows) > 4096:
        words = [0] * 1024
        for low in lows:
            words[low // 64] |= 1 << (low % 64)
        return struct.pack("<1024Q", *words), False
    return struct.pack(f"<{len(lows)}H", *lows), False


def roaring32(values: list[int], kinds: dict[int, str] | None = None, runs: bool = False) -> bytes:
    """Portable 32-bit RoaringBitmap serialization of sorted distinct ``values``."""
    by_key: dict[int, list[int]] = {}
    for value in values:
        by_key.setdefault(value >> 16, []).append(value & 0xFFFF)
    keys = sorted(by_key)
    bodies = [_container(by_key[k], (kinds or {}).get(k, "auto")) for k in keys]
    has_runs = runs or any(is_run for _, is_run in bodies)
    out = bytearray()
    if has_runs:
        out += struct.pack("<I", 12347 | ((len(keys) - 1) << 16))
        flags = bytearray((len(keys) + 7) // 8)
        for i, (_, is_run) in enumerate(bodies):
            if is_run:
                flags[i // 8] |= 1 << (i % 8)
        out += flags
    else:
        out += struct.pack("<II", 12346, len(keys))
    for key in keys:
        out += struct.pack("<HH", key, len(by_key[key]) - 1)
    if not has_runs or len(keys) >= 4:
        position = len(out) + 4 * len(keys)
        for body, _ in bodies:
            out += struct.pack("<I", position)
            position += len(body)
    for body, _ in bodies:
        out += body
    return bytes(out)


def portable_array(values: list[int], **options: object) -> bytes:
    by_high: dict[int, list[int]] = {}
    for value in values:
        by_high.setdefault(value >> 32, []).append(value & 0xFFFFFFFF)
    out = struct.pack("<iq", PORTABLE_MAGIC, len(by_high))
    for high in sorted(by_high):
        out += struct.pack("<I", high) + roaring32(by_high[high], **options)  # type: ignore[arg-type]
    return out


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
