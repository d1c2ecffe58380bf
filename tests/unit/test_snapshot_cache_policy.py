"""The snapshot cache's least-recently-used policy, bounded by count and by estimated bytes."""

from __future__ import annotations

import pytest

from delta_connect_py.snapshot_cache import LruPolicy, enabled_by_environment


def _policy(
    max_entries: int = 3, max_bytes: int = 100, sizes: dict[str, int] | None = None
) -> tuple[LruPolicy[str, str], list[str]]:
    released: list[str] = []
    sizes = sizes if sizes is not None else {}
    policy: LruPolicy[str, str] = LruPolicy(
        max_entries, max_bytes, lambda value: sizes.get(value, 1), released.append
    )
    return policy, released


def test_the_least_recently_used_entry_goes_first_when_over_count() -> None:
    policy, released = _policy(max_entries=2)
    policy.put("a", "A")
    policy.put("b", "B")
    assert policy.get("a") == "A"  # a is now the most recently used
    policy.put("c", "C")
    assert policy.keys() == ["a", "c"]
    assert released == ["B"]


def test_peek_does_not_change_recency() -> None:
    policy, released = _policy(max_entries=2)
    policy.put("a", "A")
    policy.put("b", "B")
    assert policy.peek("a") == "A"
    policy.put("c", "C")
    assert released == ["A"]


def test_bytes_are_estimated_again_when_enforced() -> None:
    sizes = {"A": 10, "B": 10, "C": 10}
    policy, released = _policy(max_entries=10, max_bytes=30, sizes=sizes)
    for key in "abc":
        policy.put(key, key.upper())
    assert released == []
    sizes["B"] = 50  # b's state grew on the server since it was put
    policy.put("d", "D")
    assert policy.keys() == ["c", "d"]
    assert released == ["A", "B"]
    assert policy.total_bytes() == 11


def test_a_value_larger_than_the_byte_bound_is_not_kept() -> None:
    policy, released = _policy(max_bytes=100, sizes={"BIG": 101})
    policy.put("a", "A")
    policy.put("big", "BIG")
    assert policy.keys() == ["a"]
    assert released == []  # its holder still uses it


def test_a_replaced_value_is_released_unless_the_new_one_builds_on_it() -> None:
    policy, released = _policy()
    policy.put("a", "A1")
    policy.put("a", "A2", keep=lambda old, new: new == old[0] + "2")
    assert released == []
    policy.put("a", "A3", keep=lambda old, new: False)
    assert released == ["A2"]
    policy.put("a", "A3")
    assert released == ["A2"]  # the same value again is not released


def test_pop_removes_without_releasing_and_clear_releases_all() -> None:
    policy, released = _policy()
    policy.put("a", "A")
    policy.put("b", "B")
    assert policy.pop("a") == "A"
    assert released == []
    policy.clear()
    assert released == ["B"]
    assert len(policy) == 0


def test_bounds_of_zero_keep_nothing() -> None:
    for max_entries, max_bytes in ((0, 100), (3, 0)):
        policy, _ = _policy(max_entries=max_entries, max_bytes=max_bytes)
        policy.put("a", "A")
        assert policy.keys() == []


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("1", True), ("on", True), ("0", False), ("false", False), (" OFF ", False)],
)
def test_the_environment_switch(
    monkeypatch: pytest.MonkeyPatch, value: str | None, enabled: bool
) -> None:
    if value is None:
        monkeypatch.delenv("DELTA_CONNECT_SNAPSHOT_CACHE", raising=False)
    else:
        monkeypatch.setenv("DELTA_CONNECT_SNAPSHOT_CACHE", value)
    assert enabled_by_environment() is enabled
