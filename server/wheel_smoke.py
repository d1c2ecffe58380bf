"""The installed wheel's smoke test (run by server/wheel-smoke.sh, never by pytest).

Run with the Python of a fresh virtual environment that has only the wheel (and its ``[client]``
extra), from a directory outside the repository, with ``SPARK_REMOTE`` set:

    python wheel_smoke.py TABLE_COPY REPOSITORY_ROOT

It checks that the package is the installed one (not the repository's sources), that its
metadata and ``__version__`` agree, and then reads the table through the server with the API
and the ``delta-connect`` command line, which must agree with each other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"wheel smoke test failed: {what}")
    print(f"ok: {what}")


def command_line(*arguments: str) -> str:
    script = Path(sys.executable).parent / "delta-connect"
    result = subprocess.run([str(script), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"delta-connect {' '.join(arguments)} failed:\n{result.stderr}")
    return result.stdout


def main() -> None:
    table, repository = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
    import delta_connect_py
    from delta_connect_py import DeltaTable, connect

    installed = Path(delta_connect_py.__file__).resolve()
    check(installed.is_relative_to(Path(sys.prefix).resolve()), f"imported from {installed}")
    check(not installed.is_relative_to(repository), "not the repository's sources")
    check(
        version("delta-connect-py") == delta_connect_py.__version__,
        f"metadata version {version('delta-connect-py')} == __version__",
    )
    check((installed.parent / "py.typed").exists(), "py.typed installed")

    spark = connect()  # $SPARK_REMOTE
    dt = DeltaTable.for_path(spark, table)
    snap = dt.snapshot()
    state = snap.state
    check(state.num_of_files > 0, f"snapshot version {snap.version}: {state.num_of_files} files")
    check(snap.all_files().count() == state.num_of_files, "all_files() matches state")
    rows = snap.to_df().count()
    check(rows > 0, f"to_df(): {rows} rows")
    versions = [row["version"] for row in dt.history().select("version").collect()]
    check(max(versions) == snap.version, f"history(): versions {sorted(versions)}")

    check(
        command_line("--version").strip() == f"delta-connect {delta_connect_py.__version__}",
        "delta-connect --version",
    )
    described = json.loads(command_line("--format", "json", "describe", str(table)))
    check(
        (described["version"], described["state"]["numOfFiles"])
        == (snap.version, state.num_of_files),
        "delta-connect describe agrees with the API",
    )
    print(f"wheel smoke test passed (SPARK_REMOTE={os.environ['SPARK_REMOTE']})")


if __name__ == "__main__":
    main()
