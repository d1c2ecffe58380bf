"""The ``delta-connect`` command line against the server under test.

Results are compared with delta-rs (``deltalake``) reading the same table, not with constants.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable as RustTable

from delta_connect_py import cli
from delta_connect_py.cli import main
from tests.conftest import CONFORMANCE, _close_sessions_of

TABLE = str(CONFORMANCE / "delta-rs/table_with_deletion_logs/delta")
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "examples" / "sample_table")
WORKER_PYTHON = ROOT / ".venv-worker" / "bin" / "python"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["--format", "json", *argv]) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    return printed


def test_describe_prints_version_protocol_metadata_and_state(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Not a terminal: JSON by default.
    assert main(["--remote", spark_remote, "describe", TABLE]) == 0
    described: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert described["version"] == 20
    assert described["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert described["state"]["numOfFiles"] == 1
    assert described["state"]["numOfMetadata"] == described["state"]["numOfProtocol"] == 1


def test_describe_at_version(spark_remote: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--remote", spark_remote, "describe", TABLE, "--version", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 3
    assert (
        run_json(capsys, "--remote", spark_remote, "describe", TABLE, "--at-version", "4")[
            "version"
        ]
        == 4
    )


def test_describe_the_sample_table_as_delta_rs_sees_it(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rust = RustTable(SAMPLE)
    described = run_json(capsys, "--remote", spark_remote, "describe", SAMPLE)
    assert described["version"] == rust.version()
    assert described["partitionColumns"] == rust.metadata().partition_columns
    assert described["state"]["numOfFiles"] == len(rust.file_uris())
    assert [field["name"] for field in described["schema"]] == [
        field.name for field in rust.schema().fields
    ]
    assert described["timestamp"].endswith("Z")

    assert main(["--remote", spark_remote, "--format", "table", "describe", SAMPLE]) == 0
    summary = capsys.readouterr().out.splitlines()

    def field(name: str) -> str:
        (line,) = (line for line in summary if line.startswith(f"{name}  "))
        return line[len(name) :].strip()

    assert field("version") == str(rust.version())
    assert field("partitioned by") == ", ".join(rust.metadata().partition_columns)
    assert field("files").startswith(f"{len(rust.file_uris())} (")


def test_show_filters_and_selects_like_delta_rs(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = run_json(
        capsys,
        *("--remote", spark_remote, "show", SAMPLE, "--at-version", "3"),
        *("--columns", "order_id,price", "--filter", "region in eu,us", "--filter", "quantity>=3"),
    )
    expected = (
        RustTable(SAMPLE, version=3)
        .to_pyarrow_table(
            columns=["order_id", "price"],
            filters=[("region", "in", ["eu", "us"]), ("quantity", ">=", 3)],
        )
        .to_pylist()
    )
    assert shown["version"] == 3
    assert sorted(shown["rows"], key=lambda row: row["order_id"]) == sorted(
        expected, key=lambda row: row["order_id"]
    )


def _variant_table(spark: Any, root: Path) -> str:
    """A table of one variant column, its rows a JSON object, an array and a null: the data
    written by the server's Spark, the log by hand (delta-rs writes no variant)."""
    data = root / "data"
    rows = spark.sql(
        "SELECT id, parse_json(text) AS v FROM VALUES "
        "(1, '{\"a\": 1}'), (2, '[true, \"x\"]'), (3, NULL) AS t(id, text)"
    )
    rows.coalesce(1).write.parquet(str(data))
    (part,) = data.glob("part-*.parquet")
    fields = [
        {"name": "id", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "v", "type": "variant", "nullable": True, "metadata": {}},
    ]
    actions = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["variantType"],
                "writerFeatures": ["variantType"],
            }
        },
        {
            "metaData": {
                "id": "variant-table",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 0,
            }
        },
        {
            "add": {
                "path": f"data/{part.name}",
                "partitionValues": {},
                "size": part.stat().st_size,
                "modificationTime": 0,
                "dataChange": True,
            }
        },
    ]
    log = root / "_delta_log"
    log.mkdir()
    (log / "00000000000000000000.json").write_text("\n".join(map(json.dumps, actions)) + "\n")
    return str(root)


def test_show_prints_variants_as_json(
    spark: Any, spark_remote: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arrow holds a variant as its binary encoding, and pyspark's ``toArrow`` fails on a
    nullable variant column with a null: the command shows each as its JSON text."""
    table = _variant_table(spark, tmp_path / "t")
    shown = run_json(capsys, "--remote", spark_remote, "show", table)
    by_id = {row["id"]: row["v"] for row in shown["rows"]}
    assert by_id == {1: '{"a":1}', 2: '[true,"x"]', 3: None}


def test_history_and_cdf_print_iso_utc_timestamps(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rust = RustTable(SAMPLE)
    history = run_json(capsys, "--remote", spark_remote, "history", SAMPLE, "--limit", "2")
    assert [entry["version"] for entry in history["history"]] == [
        rust.version(),
        rust.version() - 1,
    ]
    assert all(entry["timestamp"].endswith("Z") for entry in history["history"])

    changes = run_json(capsys, "--remote", spark_remote, "cdf", SAMPLE, "--from", "2", "--to", "3")
    expected = rust.load_cdf(starting_version=2, ending_version=3).read_all()
    assert len(changes["rows"]) == expected.num_rows
    assert sorted(row["_change_type"] for row in changes["rows"]) == sorted(
        expected.column("_change_type").to_pylist()
    )
    assert all(row["_commit_timestamp"].endswith("Z") for row in changes["rows"])


def test_errors_print_the_error_class(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(CONFORMANCE / "golden/no-delta-log-folder/delta")
    assert main(["--remote", spark_remote, "describe", missing]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: [DELTA_MISSING_DELTA_TABLE] ")
    assert err.count("\n") == 1


def test_a_filter_value_of_another_type_is_a_delta_error_exit_2(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--remote", spark_remote, "show", SAMPLE, "--filter", "quantity > abc"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: [DELTA_CONNECT_INVALID_ARGUMENT]")
    assert captured.err.count("\n") == 1


def test_other_failures_print_one_line_and_exit_1(
    spark_remote: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure that is no DeltaError (here raised by the command itself, after a real
    # connect): still one line, no traceback, exit 1.
    def failing(args: object) -> None:
        raise RuntimeError("something unexpected\nwith a second line")

    monkeypatch.setattr(cli, "_describe", failing)
    argv = ["--remote", spark_remote, "describe", SAMPLE]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "error: RuntimeError: something unexpected\n"
    assert "Traceback" not in captured.err

    assert main(["--debug", *argv]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.embedded
def test_serve_runs_a_server_until_terminated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``delta-connect serve`` (full pyspark): ready line, a working server, gone on SIGTERM."""
    from delta_connect_py.embedded import free_port

    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "SPARK_REMOTE"}
    if WORKER_PYTHON.exists():
        env["DELTA_CONNECT_WORKER_PYTHON"] = str(WORKER_PYTHON)
    log = tmp_path / "serve.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "delta_connect_py.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline()
        assert ready.startswith(f"Spark Connect server ready at sc://127.0.0.1:{port} ")
        remote = f"sc://127.0.0.1:{port}"
        assert server.poll() is None, log.read_text()[-4000:]
        described = run_json(capsys, "--remote", remote, "describe", SAMPLE, "--at-version", "1")
        assert described["version"] == 1
        # Released while the server lives: at exit, pyspark would retry releasing the session's
        # executions against the stopped server for about 10 minutes.
        _close_sessions_of(remote)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=60)


@pytest.mark.embedded
def test_serve_on_a_port_in_use_says_so_without_starting_a_server() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "delta_connect_py.cli", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    assert f"Port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "connect('sc://127.0.0.1:" in done.stderr
    assert "Exception" not in done.stderr  # no Java stack
