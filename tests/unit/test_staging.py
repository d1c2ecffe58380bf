"""Staging folder names and staleness, and the S3 single-copy limit (``protocol.staging``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delta_connect_py.protocol.staging import (
    S3_SINGLE_COPY_BYTES,
    STAGING_PREFIX,
    newest_known_mtime,
    single_copy_refusal,
    staging_created_ms,
    staging_folder_name,
    staging_is_stale,
)

CUTOFF = 1_700_000_000_000


def _never_listed() -> int | None:
    raise AssertionError("a name with its creation time must not need a listing")


@given(st.integers(0, 10**15), st.text("0123456789abcdef", min_size=1, max_size=32))
def test_a_name_holds_its_creation_time(created: int, token: str) -> None:
    name = staging_folder_name(created, token)
    assert name.startswith("_" + STAGING_PREFIX[1:])  # hidden from every Delta reader
    assert staging_created_ms(name) == created


def test_a_named_folder_is_stale_by_its_name_alone() -> None:
    """S3 prefixes have no modification time: a live writer's folder must not look stale, and
    its file times are never consulted."""
    young = staging_folder_name(CUTOFF + 5, "abc")
    old = staging_folder_name(CUTOFF - 1, "abc")
    assert not staging_is_stale(young, CUTOFF, _never_listed)
    assert staging_is_stale(old, CUTOFF, _never_listed)
    assert not staging_is_stale(staging_folder_name(CUTOFF, "abc"), CUTOFF, _never_listed)


@pytest.mark.parametrize(
    ("newest", "stale"),
    [(None, False), (0, False), (CUTOFF - 1, True), (CUTOFF, False), (CUTOFF + 1, False)],
)
def test_an_old_style_name_keeps_the_mtime_rule_and_no_mtime_is_never_stale(
    newest: int | None, stale: bool
) -> None:
    for name in (f"{STAGING_PREFIX}b36da86d925a491e9e6a1dae097b3a3b", f"{STAGING_PREFIX}a"):
        assert staging_created_ms(name) is None
        assert staging_is_stale(name, CUTOFF, lambda: newest) is stale


@pytest.mark.parametrize(
    "name",
    [f"{STAGING_PREFIX}12x.abc", f"{STAGING_PREFIX}123.", f"{STAGING_PREFIX}.abc", "other.1.a"],
)
def test_malformed_names_carry_no_creation_time(name: str) -> None:
    assert staging_created_ms(name) is None


def test_newest_known_mtime_ignores_unknown_times() -> None:
    assert newest_known_mtime([None, 0]) is None
    assert newest_known_mtime([]) is None
    assert newest_known_mtime([0, 5, None, 3]) == 5


@pytest.mark.parametrize("token", ["", "a.b"])
def test_bad_name_parts_are_refused(token: str) -> None:
    with pytest.raises(ValueError):
        staging_folder_name(1, token)


@pytest.mark.parametrize("scheme", ["s3://", "s3a://", "S3A://", "s3n://"])
def test_a_file_above_5_gib_cannot_be_renamed_on_s3(scheme: str) -> None:
    uri = f"{scheme}bucket/t/_delta_log"
    assert single_copy_refusal(uri, [S3_SINGLE_COPY_BYTES, 10]) is None
    reason = single_copy_refusal(uri, [10, S3_SINGLE_COPY_BYTES + 1])
    assert reason is not None and "part_size" in reason and str(S3_SINGLE_COPY_BYTES + 1) in reason
    assert single_copy_refusal(uri, []) is None


@pytest.mark.parametrize("uri", ["file:/t/_delta_log", "/t/_delta_log", "gs://b/t", "hdfs://n/t"])
def test_other_file_systems_have_no_single_copy_limit(uri: str) -> None:
    assert single_copy_refusal(uri, [S3_SINGLE_COPY_BYTES * 3]) is None
