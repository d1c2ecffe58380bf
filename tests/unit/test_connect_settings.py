"""connect()'s retry bound: the argument, the environment variable, and the policy it makes."""

from __future__ import annotations

import pytest

from delta_connect_py import connections, session
from delta_connect_py.errors import InvalidArgumentError


def test_the_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(session.SERVER_TIMEOUT_ENV, "12")
    assert session.server_timeout_seconds(3) == 3.0
    assert session.server_timeout_seconds(None) == 12.0
    monkeypatch.delenv(session.SERVER_TIMEOUT_ENV)
    assert session.server_timeout_seconds(None) == session.DEFAULT_SERVER_TIMEOUT_SECONDS == 30


@pytest.mark.parametrize("bad", [-1, "soon", float("nan"), float("inf"), True])
def test_a_bound_that_is_no_number_of_seconds_is_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="server_timeout"):
        session.server_timeout_seconds(bad)  # type: ignore[arg-type]


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(session.SERVER_TIMEOUT_ENV, "ten")
    with pytest.raises(InvalidArgumentError, match=session.SERVER_TIMEOUT_ENV):
        session.server_timeout_seconds(None)


@pytest.mark.parametrize("seconds", [0, 0.5, 2, 30, 120, 600])
def test_the_policys_worst_case_waits_fit_the_bound(seconds: float) -> None:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    policy = connections.bounded_retry_policy(seconds)
    assert isinstance(policy, DefaultPolicy) and policy.bound_seconds == seconds
    state, total = policy.to_state(), 0.0
    for _ in range(policy.max_retries or 0):
        wait = state.next_attempt()
        assert wait is not None
        total += wait
    assert state.next_attempt() is None  # no retry beyond max_retries
    assert total <= seconds * 1000
