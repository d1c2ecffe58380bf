"""The ``delta-connect`` command line against the server under test."""

from __future__ import annotations

import json
from typing import Any

import pytest

from delta_connect_py.cli import main
from tests.conftest import CONFORMANCE

TABLE = str(CONFORMANCE / "delta-rs/table_with_deletion_logs/delta")


def test_describe_prints_version_protocol_metadata_and_state(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--remote", spark_remote, "describe", TABLE]) == 0
    described: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert described["version"] == 20
    assert described["protocol"]["readerFeatures"] == ["deletionVectors"]
    assert described["state"]["numOfFiles"] == 1
    assert described["state"]["numOfMetadata"] == described["state"]["numOfProtocol"] == 1


def test_describe_at_version(spark_remote: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--remote", spark_remote, "describe", TABLE, "--version", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 3


def test_errors_print_the_error_class(
    spark_remote: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(CONFORMANCE / "golden/no-delta-log-folder/delta")
    assert main(["--remote", spark_remote, "describe", missing]) == 2
    assert "DELTA_MISSING_DELTA_TABLE" in capsys.readouterr().err
