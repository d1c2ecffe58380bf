"""How many S3 requests reading a log of many commits costs, counted in moto's request log.

A fresh snapshot's state fetches each commit once: the protocol and metadata read keeps the
lines on the server and the replay parses that copy (before: twice, one GET per read). Many
commits of one log are read by listing the directory, so no commit file is probed on its own
by a LIST with its name as a prefix, nor by a HEAD for each check Spark makes of a named path
(before: ~7 HEADs and ~2 LISTs per commit file; now at most one HEAD more than its GET, S3A's
own before opening it).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from delta_connect_py import DeltaTable
from delta_connect_py.plans.loading import DIRECTORY_READ_MIN_FILES
from tests.object_store_server import BUCKET, MotoServer

pytestmark = pytest.mark.object_store

COMMITS = 3 * DIRECTORY_READ_MIN_FILES
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD) (/[^ ]*) HTTP')
_COMMIT = re.compile(r"_delta_log(?:/|%2F)(\d{20})\.json")


def _requests_per_commit(log: str) -> dict[int, Counter[str]]:
    counts: dict[int, Counter[str]] = {}
    for method, target in _REQUEST.findall(log):
        match = _COMMIT.search(target)
        if match is None:
            continue
        kind = "LIST" if "list-type" in target else method
        counts.setdefault(int(match.group(1)), Counter())[kind] += 1
    return counts


def test_many_commits_are_read_without_probing_each(
    spark: Any, moto: MotoServer, tmp_path: Path
) -> None:
    local = tmp_path / "many_commits"
    for i in range(COMMITS):
        write_deltalake(str(local), pa.table({"id": [i]}), mode="append")
    moto.upload({"many_commits": local})
    uri = f"s3a://{BUCKET}/many_commits"
    start = len(moto.requests_log())
    state = DeltaTable.for_path(spark, uri).snapshot().state
    counts = _requests_per_commit(moto.requests_log()[start:])
    assert state == DeltaTable.for_path(spark, str(local)).snapshot().state
    assert sorted(counts) == list(range(COMMITS))
    for version, count in counts.items():
        assert count["LIST"] == 0, (version, count)
        assert count["GET"] == 1 and count["HEAD"] <= 2, (version, count)
