"""The Spark Connect client delta_connect_py runs on.

Responsibility: check, when delta_connect_py is imported, that the environment's ``pyspark`` is
a Spark Connect client we can use (pyspark 4.0 or newer with ``pyspark.sql.connect``),
whichever distribution put it there: ``pyspark-client`` (the ``client`` extra), full
``pyspark[connect]`` (the ``local`` extra), or a platform's own (Databricks Connect ships its
own ``pyspark``). The package's base dependencies install no client, so a ``pyspark`` that is
already there is never replaced; without a usable one, the ImportError says what to install.

Invariants: only the standard library is imported before ``pyspark`` itself; the check runs
before any other module of the package imports pyspark.
"""

from __future__ import annotations

import re

#: The oldest pyspark line whose Connect client has what we use (``Observation``,
#: ``DataFrame.localCheckpoint`` and ``executionInfo`` over Connect).
OLDEST_CLIENT = (4, 0)
INSTALL_HINT = (
    "Install a Spark Connect client: pip install 'delta-connect-py[client]' (pyspark-client "
    ">=4.0,<4.2), or pip install 'pyspark[connect]>=4.0,<4.2' to also run a local server. An "
    "environment that ships its own pyspark (e.g. Databricks Connect) needs it at 4.0 or newer."
)


def spark_line(version: str) -> tuple[int, int] | None:
    """The (major, minor) a Spark version string starts with (``4.0.5``, ``4.1.0-SNAPSHOT``,
    ``4.0.0.dev0``); None when it starts otherwise."""
    found = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def require_connect_client() -> str:
    """The installed pyspark's version; ImportError (saying what to install) when there is no
    pyspark, it is older than 4.0, or its Spark Connect client cannot be imported."""
    try:
        import pyspark
    except ImportError as exc:
        raise ImportError(f"delta_connect_py found no pyspark. {INSTALL_HINT}") from exc
    version = str(getattr(pyspark, "__version__", "unknown"))
    line = spark_line(version)
    if line is None or line < OLDEST_CLIENT:
        raise ImportError(
            f"delta_connect_py needs pyspark 4.0 or newer with Spark Connect; this environment "
            f"has pyspark {version} ({pyspark.__file__}). {INSTALL_HINT}"
        )
    try:
        import pyspark.sql.connect.session
    except ImportError as exc:
        raise ImportError(
            f"pyspark {version} is installed but its Spark Connect client cannot be imported "
            f"({exc}). {INSTALL_HINT}"
        ) from exc
    return version
