"""Client and server versions: which servers are refused, which get settings, and the import
check of the environment's pyspark (a real interpreter in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from delta_connect_py.errors import DeltaError, UnsupportedServerVersionError
from delta_connect_py.pyspark_client import spark_line
from delta_connect_py.session import (
    LOCAL_RELATION_CHUNK_CONF,
    LOCAL_RELATION_SIZE_CONF,
    settings_for_server,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "line"),
    [
        ("4.0.5", (4, 0)),
        ("4.1.0-SNAPSHOT", (4, 1)),
        ("4.0.0.dev0", (4, 0)),
        ("3.5.9", (3, 5)),
        ("10.12.1", (10, 12)),
        ("unknown", None),
        ("", None),
    ],
)
def test_spark_line(version: str, line: tuple[int, int] | None) -> None:
    assert spark_line(version) == line


@pytest.mark.parametrize("server", ["3.5.9", "3.5.0", "3.4.1", "2.4.8"])
@pytest.mark.parametrize("client", ["4.1.3", "4.0.4"])
def test_a_server_older_than_4_0_is_refused_naming_both_versions(server: str, client: str) -> None:
    with pytest.raises(UnsupportedServerVersionError) as raised:
        settings_for_server(server, client)
    error = raised.value
    assert isinstance(error, DeltaError)
    assert error.getErrorClass() == "DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION"
    message = str(error)
    assert message.startswith("[DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION] ")
    assert f"Spark {server}" in message
    assert f"pyspark {client}" in message
    assert "Spark 4.0 to 4.3" in message


def test_a_4_1_client_sets_the_chunk_settings_on_a_4_0_server() -> None:
    assert settings_for_server("4.0.5", "4.1.3") == LOCAL_RELATION_CHUNK_CONF
    assert settings_for_server("4.0.0", "4.1.0") == LOCAL_RELATION_CHUNK_CONF
    assert set(LOCAL_RELATION_CHUNK_CONF) == {
        "spark.sql.session.localRelationChunkSizeRows",
        "spark.sql.session.localRelationChunkSizeBytes",
        "spark.sql.session.localRelationBatchOfChunksSizeBytes",
    }


def test_a_4_2_client_sets_the_size_limit_as_a_number_on_older_servers() -> None:
    """A 4.1 server gives the limit as ``3221225472b``, which a 4.2 client's ``int()`` refuses;
    a 4.0 server has neither it nor the chunk settings."""
    assert settings_for_server("4.1.3", "4.2.0") == LOCAL_RELATION_SIZE_CONF
    assert settings_for_server("4.0.5", "4.2.0") == {
        **LOCAL_RELATION_CHUNK_CONF,
        **LOCAL_RELATION_SIZE_CONF,
    }
    assert LOCAL_RELATION_SIZE_CONF == {"spark.sql.session.localRelationSizeLimit": "3221225472"}


@pytest.mark.parametrize(
    ("server", "client"),
    [
        ("4.0.5", "4.0.4"),  # the 4.0 client reads no such settings
        ("4.1.3", "4.1.3"),
        ("4.1.3", "4.0.4"),
        ("4.2.0", "4.1.3"),
        ("4.2.1", "4.2.0"),
        ("4.3.0", "4.2.0"),
        ("a managed build", "4.1.3"),  # unreadable: the server decides
    ],
)
def test_other_pairs_need_no_settings(server: str, client: str) -> None:
    assert settings_for_server(server, client) == {}


def _import_in_subprocess(setup: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = f"{setup}\nimport delta_connect_py\n"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_import_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    result = _import_in_subprocess("import sys; sys.modules['pyspark'] = None", tmp_path)
    assert result.returncode != 0
    assert "ImportError: delta_connect_py found no pyspark." in result.stderr
    assert "pip install 'delta-connect-py[client]'" in result.stderr


def test_import_with_a_pyspark_older_than_4_0_says_what_to_install(tmp_path: Path) -> None:
    # A pyspark 3.5 (no Observation or localCheckpoint over Connect) first on the path.
    old = tmp_path / "pyspark"
    old.mkdir()
    (old / "__init__.py").write_text('__version__ = "3.5.9"\n')
    result = _import_in_subprocess("", tmp_path)
    assert result.returncode != 0
    assert "needs pyspark 4.0 or newer with Spark Connect" in result.stderr
    assert "has pyspark 3.5.9" in result.stderr
    assert "pip install 'delta-connect-py[client]'" in result.stderr


def test_import_with_this_environment_s_client_passes(tmp_path: Path) -> None:
    result = _import_in_subprocess("", tmp_path)
    assert result.returncode == 0, result.stderr
