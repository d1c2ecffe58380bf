"""``_last_checkpoint`` parsing, checksum (PROTOCOL.md "JSON checksum") and writing."""

from __future__ import annotations

import glob
import hashlib
import json
import os

import pytest

from delta_connect_py.protocol.last_checkpoint import (
    CorruptLastCheckpointError,
    LastCheckpoint,
    canonical_form,
    checksum_of,
    parse_last_checkpoint,
    serialize_last_checkpoint,
)

CONFORMANCE = "/work/shared/conformance"
SPEC_JSON = (
    '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
    '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
)
SPEC_CANONICAL = (
    '"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,'
    '"k1"+"k3"+2+"k4"="v4","k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6",'
    '"k1"+"k3"+2+"k5"+2="v7"'
)


def test_spec_test_vector() -> None:
    obj = json.loads(SPEC_JSON)
    assert canonical_form(obj) == SPEC_CANONICAL
    assert checksum_of(obj) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_canonical_literals_and_encoding() -> None:
    obj = {"a": 10, "b": {"y": None, "x": "https://delta.io"}, "c": [True, False, 2.5]}
    assert canonical_form(obj) == (
        '"a"=10,"b"+"x"="https%3A%2F%2Fdelta.io","b"+"y"=null,"c"+0=true,"c"+1=false,"c"+2=2.5'
    )
    assert canonical_form({"k0": "normal", "k1": "a\u20ac+"}) == (
        '"k0"="normal","k1"="a%E2%82%AC%2B"'
    )
    special = "%'`~!@#$%^&*()_+-={[}]|\\;:'\"/?.>,<"
    assert canonical_form({"k": special}) == (
        '"k"="%25%27%60~%21%40%23%24%25%5E%26%2A%28%29_%2B-%3D%7B%5B%7D%5D%7C%5C%3B%3A%27%22%2F'
        '%3F.%3E%2C%3C"'
    )
    # only the top-level checksum is excluded
    assert canonical_form({"k1": "v1", "checksum": "x", "k3": 23}) == '"k1"="v1","k3"=23'
    assert canonical_form({"n": {"checksum": "x"}}) == '"n"+"checksum"="x"'


def test_float_literal_text_is_kept() -> None:
    text = '{"version":1,"size":2,"x":1.50}'
    obj = json.loads(text)
    stored = hashlib.md5(b'"size"=2,"version"=1,"x"=1.50').hexdigest()
    info = parse_last_checkpoint(text[:-1] + f',"checksum":"{stored}"}}')
    assert info.version == 1
    assert checksum_of(obj) != stored  # a float re-rendered by Python loses the literal


def test_parse_minimal_and_full() -> None:
    assert parse_last_checkpoint('{"version":10,"size":13}') == LastCheckpoint(10, 13)
    full = LastCheckpoint(
        version=1,
        size=12,
        parts=2,
        size_in_bytes=30499,
        num_of_add_files=10,
        checkpoint_schema={"type": "struct", "fields": []},
        tags={"a": "b"},
        v2_checkpoint={"path": "x.json", "sizeInBytes": 1, "modificationTime": 2},
    )
    text = serialize_last_checkpoint(full)
    parsed = parse_last_checkpoint(text)
    assert parsed == LastCheckpoint(**{**full.__dict__, "checksum": parsed.checksum})
    assert parsed.checksum == checksum_of(json.loads(text))


def test_serialize_key_order() -> None:
    text = serialize_last_checkpoint(LastCheckpoint(1, 2, parts=3, size_in_bytes=20))
    assert list(json.loads(text)) == ["version", "size", "parts", "sizeInBytes", "checksum"]
    assert text.startswith('{"version":1,"size":2,"parts":3,')
    no_parts = serialize_last_checkpoint(LastCheckpoint(5, 6, num_of_add_files=1, checksum="zz"))
    assert list(json.loads(no_parts)) == ["version", "size", "numOfAddFiles", "checksum"]
    assert json.loads(no_parts)["checksum"] != "zz"


def test_unknown_keys_ignored_but_checksummed() -> None:
    obj = {"version": 3, "size": 4, "checkpointType": "x"}
    obj["checksum"] = checksum_of(obj)
    assert parse_last_checkpoint(json.dumps(obj)).version == 3
    obj["checkpointType"] = "y"
    with pytest.raises(CorruptLastCheckpointError, match="checksum"):
        parse_last_checkpoint(json.dumps(obj))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "{",
        "[1, 2]",
        "null",
        '{"size": 1}',
        '{"version": 1}',
        '{"version": "1", "size": 1}',
        '{"version": 1.0, "size": 1}',
        '{"version": true, "size": 1}',
        '{"version": 1, "size": null}',
        '{"version": 1, "size": 1, "parts": "2"}',
        '{"version": 1, "size": 1, "tags": {"a": 1}}',
        '{"version": 1, "size": 1, "checkpointSchema": []}',
        '{"version": 1, "size": 1, "checksum": 5}',
        '{"version": 1, "version": 1, "size": 1}',
        '{"version": 1, "size": 1, "tags": {"a": "b", "a": "c"}}',
        '{"version": 1, "size": 1, "checksum": "00000000000000000000000000000000"}',
    ],
)
def test_corrupt(text: str) -> None:
    with pytest.raises(CorruptLastCheckpointError):
        parse_last_checkpoint(text)


def test_corrupt_is_value_error() -> None:
    assert issubclass(CorruptLastCheckpointError, ValueError)


def test_empty_last_checkpoint_of_kernel_golden_table() -> None:
    path = (
        f"{CONFORMANCE}/golden/corrupted-last-checkpoint-kernel/delta/_delta_log/_last_checkpoint"
    )
    if not os.path.exists(path):
        pytest.skip("conformance tables not available")
    with open(path, encoding="utf-8") as handle, pytest.raises(CorruptLastCheckpointError):
        parse_last_checkpoint(handle.read())


def test_real_checksums_validate() -> None:
    paths = glob.glob(f"{CONFORMANCE}/*/*/delta/_delta_log/_last_checkpoint")
    with_checksum = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if '"checksum"' in text:
            with_checksum.append(parse_last_checkpoint(text))
    if not with_checksum:
        pytest.skip("no conformance _last_checkpoint with a checksum")
    assert all(info.checksum for info in with_checksum)
