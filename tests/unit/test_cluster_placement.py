"""tests.cluster_placement: a test's own server goes to the standalone cluster only when one is
named, and is used only once every worker granted it an executor."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster_placement import (
    MASTER_VARIABLE,
    WORKERS_VARIABLE,
    cluster_conf,
    wait_for_executors,
)


def test_local_mode_without_a_master(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(MASTER_VARIABLE, raising=False)
    assert cluster_conf("/py") == {}
    wait_for_executors(tmp_path / "absent.log", timeout_seconds=0)  # nothing to wait for


def test_a_named_master_gets_one_executor_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_VARIABLE, "spark://127.0.0.1:7077")
    monkeypatch.setenv(WORKERS_VARIABLE, "3")
    conf = cluster_conf("/venv/bin/python")
    assert conf["spark.master"] == "spark://127.0.0.1:7077"
    assert conf["spark.cores.max"] == "3"
    assert conf["spark.executor.cores"] == "1"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "/venv/bin/python"


def test_waits_for_every_grant_and_names_the_log_when_short(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MASTER_VARIABLE, "spark://127.0.0.1:7077")
    monkeypatch.setenv(WORKERS_VARIABLE, "2")
    log = tmp_path / "server.log"
    log.write_text("INFO Granted executor ID app-1/0 on hostPort 127.0.0.1:1\n")
    with pytest.raises(RuntimeError, match="fewer than 2 executors granted") as raised:
        wait_for_executors(log, timeout_seconds=0.2)
    assert str(log) in str(raised.value)
    with log.open("a") as more:
        more.write("INFO Granted executor ID app-1/1 on hostPort 127.0.0.1:2\n")
    wait_for_executors(log, timeout_seconds=0.2)
