"""Spark Connect sessions for delta_connect_py.

Responsibility: :func:`connect` returns a Spark Connect session (an explicit ``remote``, else
``SPARK_REMOTE``, else the embedded default server), and :func:`prepare_session` makes any
Connect session ready for our plans: our worker code is shipped by value (the server never
imports delta_connect_py), and once per session the server's Spark version is read (one request,
no job). Neither runs a Spark job or starts a Python worker: on a server just started, the first
job costs seconds (the JVM's class loading and JIT, the Python daemon's start), which
``connect()`` leaves to the first call that needs them.

Invariants: a session ``connect`` returns retries an unanswered request for at most its bound
(``server_timeout``, else ``DELTA_CONNECT_SERVER_TIMEOUT``, else 30 s; pyspark's own retry policy
with fewer retries) and then raises ``SERVER_UNAVAILABLE``; ``connect`` never returns a stopped
session or one its server no longer knows (a restarted server), it makes a new one; the library
never relies on pyspark's active or default session (``active_session`` pins the session in use
around the pyspark calls that look it up). Shipping by value is registered before any of our
functions is pickled; a server
older than Spark 4.0 raises :class:`~delta_connect_py.errors.UnsupportedServerVersionError`
before any of our code runs on it; a server older than the client's Spark line gets the
settings that client reads but the server does not define, or gives in a form it cannot parse
(``settings_for_server``), before any ``createDataFrame``; a client/server Python
minor-version mismatch raises
:class:`~delta_connect_py.errors.PythonVersionMismatchError` naming both versions at the first
call that runs a job on the server's Python workers (a snapshot's listing: pyspark's worker
compares its Python with the client's before it unpickles anything, and ``raising_delta_errors``,
around every job of ours, translates its ``PYTHON_VERSION_MISMATCH``), not in ``connect``; a
session ``connect`` created is released on the server when this process exits (sessions the
caller made are the caller's), never delaying exit by more than ``RELEASE_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from pyspark import __version__ as CLIENT_PYSPARK

from delta_connect_py.arguments import invalid_type, invalid_value, shown
from delta_connect_py.connections import (
    _addresses,
    _client,
    _sessions,
    bound_retries,
    session_key,
)
from delta_connect_py.errors import (
    InvalidArgumentError,
    UnsupportedServerVersionError,
)
from delta_connect_py.pyspark_client import spark_line
from delta_connect_py.spark_failures import raising_delta_errors, translate_server_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from delta_connect_py.embedded import EmbeddedServer

__all__ = ["connect", "prepare_session", "translate_server_error"]

logger = logging.getLogger("delta_connect_py")

_embedded: EmbeddedServer | None = None
_prepared_sessions: set[str] = set()
#: The server application each session ``connect`` made was prepared on, by session id.
_applications: dict[str, str | None] = {}

CLIENT_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The oldest Spark line whose Connect server runs our plans, and what we say is supported.
OLDEST_SERVER = (4, 0)
SUPPORTED_SERVERS = "Spark Connect servers of Spark 4.0 to 4.3"
#: Settings a pyspark 4.1 client reads on every ``createDataFrame`` of local data, which Spark
#: 4.0 does not define (``SQL_CONF_NOT_FOUND``); set to Spark 4.1's defaults. A 4.0 server
#: accepts unknown ``spark.sql.*`` keys. They only size the chunks of a local relation above
#: ``spark.sql.session.localRelationCacheThreshold`` (64 MiB), which a 4.0 server could not
#: read either; ours are listings and small descriptor tables.
LOCAL_RELATION_CHUNK_CONF = {
    "spark.sql.session.localRelationChunkSizeRows": "10000",
    "spark.sql.session.localRelationChunkSizeBytes": str(16 << 20),
    "spark.sql.session.localRelationBatchOfChunksSizeBytes": str(1 << 30),
}
#: The setting a pyspark 4.2 client also reads there and parses as a plain integer: Spark 4.0
#: does not define it, and Spark 4.1 gives its default with a unit (``3221225472b``), which
#: fails every ``createDataFrame`` of such a client. Set to that same size (Spark 4.1's default,
#: 3 GiB) as a number of bytes, which both servers accept.
LOCAL_RELATION_SIZE_CONF = {"spark.sql.session.localRelationSizeLimit": str(3 << 30)}
#: How long process exit waits for the server to release a session (an unreachable server
#: would otherwise be retried for minutes).
RELEASE_TIMEOUT_SECONDS = 5.0
#: Environment variable and default of ``connect(server_timeout=...)``: how long, in seconds, a
#: request to an unanswering server is retried before ``SERVER_UNAVAILABLE``.
SERVER_TIMEOUT_ENV = "DELTA_CONNECT_SERVER_TIMEOUT"
DEFAULT_SERVER_TIMEOUT_SECONDS = 30.0
#: Names the server's Spark application: a restarted server has another one.
APPLICATION_ID_CONF = "spark.app.id"


def connect(remote: str | None = None, *, server_timeout: float | None = None) -> SparkSession:
    """A Spark Connect session: ``remote``, else ``$SPARK_REMOTE``, else the embedded server.

    The embedded server (a local Spark Connect server process on 127.0.0.1) is started on first
    use and stopped when this Python process exits. ``server_timeout`` (else
    ``$DELTA_CONNECT_SERVER_TIMEOUT``, else 30): seconds to retry a request the server does not
    answer before raising ``SERVER_UNAVAILABLE``, for this call and every later one on the
    session. A session that was stopped, or whose server was restarted, is replaced: after a
    restart, call ``connect()`` again.
    """
    from pyspark.sql import SparkSession

    bound = server_timeout_seconds(server_timeout)
    target = _checked_remote(remote) or os.environ.get("SPARK_REMOTE") or _embedded_remote()
    spark = _sessions.get(target)
    if spark is not None and not _still_served(spark):
        logger.info("The Spark Connect session to %s is gone (server restarted or stopped)", target)
        _drop(target, spark)
        spark = None
    if spark is None:
        # create(), not getOrCreate(): the latter returns any open session, whatever its remote.
        spark = SparkSession.builder.remote(target).create()
        _sessions[target] = spark
        _addresses[session_key(spark)] = target
        # Registered after the embedded server's own atexit hook, so it runs before the server
        # stops. Without it the server keeps the session, its cached states and its Python
        # worker processes until the session times out (an hour by default).
        atexit.register(_release, spark)
    bound_retries(spark, bound)
    try:
        with raising_delta_errors(spark):
            if session_key(spark) not in _applications:
                _applications[session_key(spark)] = _server_application(spark)
            prepare_session(spark)
    except BaseException:
        _drop(target, spark)  # a failed connect leaves no session behind
        raise
    return spark


def _checked_remote(remote: object) -> str | None:
    """``remote`` when None or a Spark Connect address (``sc://host:port``, with pyspark's
    optional ``/;param=value`` parts); an empty string, another scheme or another type is
    ``DELTA_CONNECT_INVALID_ARGUMENT`` (None, not "", asks for the embedded server)."""
    expected = "None (the embedded server) or a Spark Connect address, e.g. 'sc://host:15002'"
    if remote is None:
        return None
    if not isinstance(remote, str):
        raise invalid_type("connect", "remote", remote, expected)
    if not remote.startswith("sc://") or len(remote) <= len("sc://"):
        raise invalid_value("connect", "remote", remote, expected)
    return remote


def server_timeout_seconds(server_timeout: float | None) -> float:
    """``server_timeout``, else ``$DELTA_CONNECT_SERVER_TIMEOUT``, else the default, checked."""
    value: object = server_timeout
    argument = "server_timeout"
    if value is None and os.environ.get(SERVER_TIMEOUT_ENV):
        value, argument = os.environ[SERVER_TIMEOUT_ENV], SERVER_TIMEOUT_ENV
    if value is None:
        return DEFAULT_SERVER_TIMEOUT_SECONDS
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not 0 <= seconds < float("inf"):
        raise InvalidArgumentError(
            function="connect",
            argument=argument,
            value=shown(value),
            expected="a number of seconds, 0 or more",
        )
    return seconds


def _still_served(spark: SparkSession) -> bool:
    """Whether ``spark`` is open and its server still knows it: one request, not retried (a
    server that is gone is then told by the new session's own bounded retries)."""
    if getattr(spark, "is_stopped", False):
        return False
    client = _client(spark)
    policies = client.get_retry_policies()
    client.set_retry_policies([])
    try:
        # A restarted server takes the old session id as a new session (pyspark 4.1 and Spark
        # 4.1 raise nothing), without our settings and cached states: its application differs.
        application = _server_application(spark)
    except Exception:  # any failure: the session cannot be used
        return False
    finally:
        client.set_retry_policies(policies)
    known = _applications.get(session_key(spark))
    return not getattr(spark, "is_stopped", False) and application == known


def _server_application(spark: SparkSession) -> str | None:
    """The id of the server's Spark application (new at every server start); one request."""
    return spark.conf.get(APPLICATION_ID_CONF, None)


def _drop(target: str, spark: SparkSession) -> None:
    """Forget ``spark`` and stop it without retries (its server may be gone)."""
    _sessions.pop(target, None)
    _prepared_sessions.discard(session_key(spark))
    _applications.pop(session_key(spark), None)
    _client(spark).set_retry_policies([])
    _release(spark)


def _release(spark: SparkSession) -> None:
    """Release ``spark``'s server-side session, waiting at most ``RELEASE_TIMEOUT_SECONDS``."""

    def stop() -> None:
        # The server may already be gone: then nothing is left to release.
        with contextlib.suppress(Exception):
            spark.stop()

    releaser = threading.Thread(target=stop, name="delta-connect-release", daemon=True)
    releaser.start()
    releaser.join(RELEASE_TIMEOUT_SECONDS)


def _embedded_remote() -> str:
    global _embedded
    if _embedded is None or _embedded.process is None:
        from delta_connect_py.embedded import EmbeddedServer

        worker_python = os.environ.get("DELTA_CONNECT_WORKER_PYTHON", sys.executable)
        _embedded = EmbeddedServer(worker_python=worker_python).start()
    return _embedded.remote


def register_worker_code() -> None:
    """Pickle delta_connect_py's functions by value, so the server need not import us."""
    from pyspark import cloudpickle

    # The package object, taken from sys.modules: importing the package here would make the
    # package and its session module import each other.
    package = sys.modules[__name__.partition(".")[0]]
    cloudpickle.register_pickle_by_value(package)  # type: ignore[no-untyped-call]


def prepare_session(spark: SparkSession) -> None:
    """Ship our code by value and check the server's Spark version (applying the settings an
    older server needs for this client), once per session: one request, no job.

    The server's Python workers are not probed: the first job that runs on them checks their
    Python against this client's (see the module's invariants).
    """
    register_worker_code()
    session_id = session_key(spark)
    if session_id in _prepared_sessions:
        return
    with raising_delta_errors(spark):
        # An analysis request, no job: read before any of our code reaches a worker, which a
        # Spark 3.5 server's worker fails to unpickle (a raw traceback instead of the versions).
        server_version = spark.version
        settings = settings_for_server(server_version, CLIENT_PYSPARK)
        if settings:
            from delta_connect_py.plans.spark import set_conf

            set_conf(spark, settings)
    logger.info("Spark Connect server runs Spark %s", server_version)
    _prepared_sessions.add(session_id)


def settings_for_server(server_version: str, client_version: str) -> dict[str, str]:
    """The session settings a Spark Connect server of ``server_version`` needs for a pyspark
    ``client_version`` client.

    Raises ``DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION`` for a server older than Spark 4.0. A
    version string we cannot read is let through with no settings: the server decides.
    """
    server, client = spark_line(server_version), spark_line(client_version)
    if server is None:
        return {}
    if server < OLDEST_SERVER:
        raise UnsupportedServerVersionError(
            server_version=server_version,
            client_version=client_version,
            supported=SUPPORTED_SERVERS,
        )
    settings: dict[str, str] = {}
    if client is not None and client >= (4, 1) and server < (4, 1):
        settings.update(LOCAL_RELATION_CHUNK_CONF)
    if client is not None and client >= (4, 2) and server < (4, 2):
        settings.update(LOCAL_RELATION_SIZE_CONF)
    return settings
