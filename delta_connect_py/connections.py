"""The sessions ``connect`` made, by address, and how their requests are retried.

Responsibility: the registry of open sessions (by the address they were made for) that
``session.connect`` fills and ``spark_failures`` reads to name a server in an error, and the
bounded retry policy ``connect`` installs on them.

Invariants: nothing here sends a request; a session made elsewhere (not by ``connect``) is
unknown here, and lookups for it answer None.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The open sessions ``connect`` made, by the address they were made for.
_sessions: dict[str, SparkSession] = {}
#: The address each session ``connect`` made was made for, by session id.
_addresses: dict[str, str] = {}


def session_key(spark: SparkSession) -> str:
    """The session's name, unique in this process: its Connect session id."""
    return str(getattr(spark, "session_id", id(spark)))


class BoundedRetryPolicy:
    """Marker base of the bounded policy (see :func:`bounded_retry_policy`)."""

    bound_seconds: float


def bounded_retry_policy(seconds: float) -> Any:
    """pyspark's ``DefaultPolicy`` (same retried errors, same backoff growth and jitter) with
    its backoff capped and as many retries as fit, jitter included, in ``seconds``."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    defaults = DefaultPolicy()
    bound_ms = seconds * 1000
    max_backoff = max(defaults.initial_backoff, min(defaults.max_backoff or bound_ms, bound_ms / 4))
    retries, waited, backoff = 0, 0.0, float(defaults.initial_backoff)
    while True:
        jitter = defaults.jitter if backoff >= defaults.min_jitter_threshold else 0
        if waited + backoff + jitter > bound_ms:
            break
        waited += backoff + jitter
        retries += 1
        backoff = min(max_backoff, backoff * defaults.backoff_multiplier)

    class Bounded(DefaultPolicy, BoundedRetryPolicy):
        pass

    options: dict[str, Any] = {"max_retries": retries, "max_backoff": int(max_backoff)}
    # pyspark 4.1 also honours a server's own retry delay, capped by this; 4.0 has no such cap.
    if "max_server_retry_delay" in inspect.signature(DefaultPolicy.__init__).parameters:
        options["max_server_retry_delay"] = int(max_backoff)
    policy = Bounded(**options)
    policy.bound_seconds = seconds
    return policy


def bound_retries(spark: SparkSession, seconds: float) -> None:
    """Retry ``spark``'s unanswered requests for at most ``seconds`` (pyspark's default policy
    retries for at least 10 minutes, silently)."""
    _client(spark).set_retry_policies([bounded_retry_policy(seconds)])


def retry_bound_seconds(spark: SparkSession) -> float | None:
    """The retry bound ``connect`` gave ``spark``; None for a session with other policies."""
    client = getattr(spark, "client", None)
    policies = client.get_retry_policies() if client is not None else []
    bounds = [p.bound_seconds for p in policies if isinstance(p, BoundedRetryPolicy)]
    return bounds[0] if bounds else None


def session_address(spark: SparkSession) -> str | None:
    """The address ``connect`` made ``spark`` for; None for a session made elsewhere."""
    return _addresses.get(session_key(spark))


def session_for_address(host_port: str) -> SparkSession | None:
    """The open session ``connect`` made for the server at ``host_port`` (``127.0.0.1:15002``)."""
    for target, spark in _sessions.items():
        if target.removeprefix("sc://").split("/", 1)[0] == host_port:
            return spark
    return None


def _client(spark: SparkSession) -> Any:
    connect_session: Any = spark  # typed as classic pyspark's session, which has no client
    return connect_session.client
