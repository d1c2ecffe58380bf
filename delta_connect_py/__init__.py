"""delta_connect_py: Delta Lake table state from a Spark Connect client.

Rebuilds a Delta table's state (log segment, replay, computed state, time travel) as plain
Spark Connect DataFrame operations against a vanilla Spark Connect server: no Delta jars and
nothing of ours installed on the server.

    from delta_connect_py import DeltaTable, connect
    spark = connect()                       # SPARK_REMOTE, or the embedded local server
    snap = DeltaTable.for_path(spark, "/data/events").snapshot()
    snap.version, snap.state.num_of_files

It needs a pyspark 4.0+ Spark Connect client, which it does not install by default (so a
platform's own pyspark is never replaced): ``pip install 'delta-connect-py[client]'``.
"""

#: The package's version, its one source: pyproject.toml reads it (``[tool.setuptools.dynamic]``).
__version__ = "0.1.0"

from delta_connect_py.pyspark_client import require_connect_client

require_connect_client()  # before any module below imports pyspark

from delta_connect_py.cdf import CdfBatch, FileChanges  # noqa: E402
from delta_connect_py.checkpoints import CheckpointResult  # noqa: E402
from delta_connect_py.errors import DeltaError  # noqa: E402
from delta_connect_py.plans.state import State  # noqa: E402
from delta_connect_py.protocol.cdf import DeltaSourceOffset  # noqa: E402
from delta_connect_py.protocol.file_filters import Filter, FilterTerm, FilterValue  # noqa: E402
from delta_connect_py.session import connect  # noqa: E402
from delta_connect_py.snapshot import Snapshot  # noqa: E402
from delta_connect_py.table import DeltaTable  # noqa: E402

__all__ = [
    "CdfBatch",
    "CheckpointResult",
    "DeltaError",
    "DeltaSourceOffset",
    "DeltaTable",
    "FileChanges",
    "Filter",
    "FilterTerm",
    "FilterValue",
    "Snapshot",
    "State",
    "__version__",
    "connect",
]
