"""Canonical path keys and DV ids (notes 1.2, 1.9, 2.1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delta_connect_py.protocol.paths import (
    canonical_path,
    dv_unique_id,
    file_key,
    is_plain_path,
    path_partition_key,
)


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("part-0.parquet", "file:/tmp/t", "part-0.parquet"),
        ("a=1/part-0.parquet", "s3a://b/t", "a=1/part-0.parquet"),
        ("a=x%2ay/p.parquet", "/tmp/t", "a=x%2Ay/p.parquet"),
        ("/a/b.parquet", "file:/tmp/t", "file:/a/b.parquet"),
        ("/a/b.parquet", "file:///tmp/t", "file:/a/b.parquet"),
        ("/a/b.parquet", "/tmp/t", "file:/a/b.parquet"),
        ("/a/b.parquet", "s3a://bucket/t", "s3a://bucket/a/b.parquet"),
        ("/a/b.parquet", "s3a://bucket", "s3a://bucket/a/b.parquet"),
        ("/a/b%3a.parquet", "s3a://bucket/t", "s3a://bucket/a/b%3A.parquet"),
        ("file:///a/b.parquet", "/tmp/t", "file:/a/b.parquet"),
        ("file:/a/b.parquet", "s3a://x/t", "file:/a/b.parquet"),
        ("s3a://bucket/a/b.parquet", "file:/tmp/t", "s3a://bucket/a/b.parquet"),
        ("S3A://Bucket/a/B.parquet", "file:/tmp/t", "s3a://bucket/a/B.parquet"),
        ("abfss://c@Acct.dfs.core.windows.net/x", "/t", "abfss://c@acct.dfs.core.windows.net/x"),
    ],
)
def test_canonical_path(path: str, root: str, expected: str) -> None:
    assert canonical_path(path, root) == expected


def test_uri_equal_spellings_share_a_key() -> None:
    root = "file:/tmp/t"
    spellings = ["file:///x/a%2fb", "file:/x/a%2Fb", "/x/a%2f" + "b", "FILE:/x/a%2fb"]
    assert len({canonical_path(s, root) for s in spellings}) == 1
    assert canonical_path("a%20b", root) != canonical_path("a b", root)  # never decoded


_PATH_CHARS = st.sampled_from(list("aAbB/:%20fF=._-"))


@given(st.text(_PATH_CHARS, max_size=20), st.text(_PATH_CHARS, max_size=20))
def test_partition_key_is_coarser(a: str, b: str) -> None:
    for root in ("file:/tmp/t", "s3a://bucket/t"):
        if canonical_path(a, root) == canonical_path(b, root):
            assert path_partition_key(a, root) == path_partition_key(b, root)
        assert path_partition_key(a, root) == canonical_path(a, root).lower()


def test_dv_unique_id() -> None:
    assert dv_unique_id(None) is None
    assert dv_unique_id({"storageType": None, "pathOrInlineDv": None}) is None
    assert dv_unique_id({"storageType": "u", "pathOrInlineDv": "ab^-x", "offset": 1}) == "uab^-x@1"
    assert dv_unique_id({"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91"}) == (
        "iwi5b=000010000siXQKl0rr91"
    )
    assert dv_unique_id({"storageType": "p", "pathOrInlineDv": "s3://x", "offset": 0}) == (
        "ps3://x@0"
    )


def test_file_key() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "abc", "offset": 4}
    assert file_key("/a/b", dv, "s3a://bk/t") == ("s3a://bk/a/b", "uabc@4")
    assert file_key("b", None, "s3a://bk/t") == ("b", None)


@given(
    st.lists(st.sampled_from([*"aZ09/:%.=-", "%2f", "%2F", "s3a:", "//", "file:"]), max_size=10),
    st.sampled_from(["file:/tmp/t", "s3a://Bucket/t", "/tmp/t"]),
)
def test_only_plain_paths_have_plain_canonical_paths(pieces: list[str], root: str) -> None:
    """What lets the replay match checkpoint rows on paths as written when every replayed key
    is plain (``plans.replay._JoinKeys``)."""
    path = "".join(pieces)
    canonical = canonical_path(path, root)
    assert is_plain_path(canonical) == is_plain_path(path)
    if is_plain_path(path):
        assert canonical == path
