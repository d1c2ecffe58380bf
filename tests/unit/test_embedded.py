"""The embedded server's preflight errors (thin client only, no or old Java), its command line
and what its stop leaves on disk."""

from __future__ import annotations

import itertools
import stat
import subprocess
from pathlib import Path

import pyspark
import pytest

from delta_connect_py import embedded
from delta_connect_py.errors import EmbeddedServerError


@pytest.fixture
def thin_pyspark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pyspark seen as installed in a folder without jars, like pyspark-client."""
    home = tmp_path / "pyspark"
    home.mkdir()
    monkeypatch.setattr(pyspark, "__file__", str(home / "__init__.py"))
    return home


def test_thin_client_only_names_the_local_extra(thin_pyspark: Path) -> None:
    with pytest.raises(EmbeddedServerError, match=r"delta-connect-py\[local\]") as info:
        embedded.find_spark_home()
    assert info.value.getErrorClass() == "DELTA_CONNECT_EMBEDDED_SERVER"


def test_thin_client_only_fails_before_starting_anything(thin_pyspark: Path) -> None:
    server = embedded.EmbeddedServer()
    with pytest.raises(EmbeddedServerError, match=r"delta-connect-py\[local\]"):
        server.start()
    assert server.process is None


def test_missing_java_home_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-such-jdk"))
    with pytest.raises(EmbeddedServerError, match="Java 17"):
        embedded.find_java()


def test_no_java_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EmbeddedServerError, match="no java was found"):
        embedded.find_java()


def test_old_java_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(EmbeddedServerError, match="version 11"):
        embedded.find_java()


def test_command_binds_loopback_with_the_server_conf(tmp_path: Path) -> None:
    command = embedded.EmbeddedServer(port=15999, driver_memory="4g").command(tmp_path)
    confs = {
        key: value
        for flag, item in itertools.pairwise(command)
        if flag == "--conf"
        for key, _, value in [item.partition("=")]
    }
    assert confs == {
        **embedded.SERVER_CONF,
        **embedded.LAUNCH_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": "15999",
        "spark.driver.defaultJavaOptions": "-Xms4g",
    }
    assert command[-1] == str(embedded.DRIVER_PROGRAM)
    assert embedded.DRIVER_PROGRAM.is_file()


def test_the_launcher_waits_for_the_line_its_driver_program_prints() -> None:
    """The driver program imports nothing of ours, so the ready line is written twice."""
    source = embedded.DRIVER_PROGRAM.read_text()
    assert f'READY_LINE = "{embedded.READY_LINE}"' in source
    assert "print(READY_LINE, flush=True)" in source


def test_the_driver_program_writes_its_class_path_where_the_launcher_reads_it() -> None:
    source = embedded.DRIVER_PROGRAM.read_text()
    assert f'CLASS_PATH_FILE_ENV = "{embedded.CLASS_PATH_FILE_ENV}"' in source


def _server_with_scratch(tmp_path: Path, command: list[str]) -> embedded.EmbeddedServer:
    """An EmbeddedServer whose 'server' is ``command`` in its own process group."""
    scratch = tmp_path / "scratch"
    (scratch / "spark-local").mkdir(parents=True)
    server = embedded.EmbeddedServer(log_path=scratch / "server.log")
    server.log_path.write_text("the server's log\n")  # type: ignore[union-attr]
    server.process = subprocess.Popen(command, start_new_session=True)
    return server


def test_stop_removes_the_scratch_folder_of_a_running_server(tmp_path: Path) -> None:
    server = _server_with_scratch(tmp_path, ["sleep", "60"])
    assert server.scratch_dir == tmp_path / "scratch"
    server.stop()
    assert not (tmp_path / "scratch").exists()


def test_stop_keeps_the_log_of_a_server_that_failed_on_its_own(tmp_path: Path) -> None:
    server = _server_with_scratch(tmp_path, ["sh", "-c", "exit 3"])
    assert server.process is not None
    server.process.wait(timeout=10)
    server.stop()
    assert (tmp_path / "scratch" / "server.log").read_text() == "the server's log\n"


def test_spark_local_dir_is_inside_the_scratch_folder_unless_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    server = embedded.EmbeddedServer(log_path=tmp_path / "server.log")
    assert server.local_dir_environment() == {"SPARK_LOCAL_DIRS": str(tmp_path / "spark-local")}
    assert not any(item.startswith("spark.local.dir") for item in server.command(tmp_path))
    server.extra_conf["spark.local.dir"] = "/data/spark"
    assert server.local_dir_environment() == {}
    monkeypatch.setenv("SPARK_LOCAL_DIRS", "/data/spark")
    assert embedded.EmbeddedServer(log_path=tmp_path / "server.log").local_dir_environment() == {}


def test_the_jvms_temporary_files_go_to_the_scratch_folder(tmp_path: Path) -> None:
    server = embedded.EmbeddedServer(log_path=tmp_path / "server.log", driver_memory="4g")
    options = f"spark.driver.defaultJavaOptions=-Xms4g -Djava.io.tmpdir={tmp_path / 'tmp'}"
    assert options in server.command(tmp_path)
