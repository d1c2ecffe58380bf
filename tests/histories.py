"""Random, protocol-valid Delta action histories for property tests, and ways to compare states.

A history is a list of commits; commit ``v`` is a list of action dicts in Delta's JSON form.
Version 0 holds protocol and metaData. Every commit obeys PROTOCOL.md's per-commit rules: at
most one action per path, never an add and a remove of the same key, at most one txn per appId,
at most one metaData and one protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import strategies as st

from delta_connect_py import snapshot as snapshot_module
from delta_connect_py.protocol.filenames import commit_name
from delta_connect_py.protocol.paths import dv_unique_id

NOW_MS = 1_800_000_000_000
DAY_MS = 86_400_000
PATHS = ["a.parquet", "b.parquet", "c%20d.parquet", "part=x/e.parquet", "f.parquet"]
DELETION_VECTORS: list[dict[str, Any] | None] = [
    None,
    {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    },
    {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    },
]


def _metadata(configuration: dict[str, str]) -> dict[str, Any]:
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    return {
        "id": "00000000-0000-0000-0000-000000000001",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": configuration,
        "createdTime": NOW_MS - 100 * DAY_MS,
    }


@st.composite
def file_action(draw: st.DrawFn, path: str) -> dict[str, Any]:
    dv = draw(st.sampled_from(DELETION_VECTORS))
    if draw(st.booleans()):
        return {
            "add": {
                "path": path,
                "partitionValues": {},
                "size": draw(st.integers(1, 10_000)),
                "modificationTime": NOW_MS - DAY_MS,
                "dataChange": draw(st.booleans()),
                "stats": json.dumps({"numRecords": draw(st.integers(0, 50))}),
                "deletionVector": dv,
            }
        }
    deleted_at = draw(st.sampled_from([None, NOW_MS - DAY_MS, NOW_MS - 30 * DAY_MS]))
    return {
        "remove": {
            "path": path,
            "deletionTimestamp": deleted_at,
            "dataChange": True,
            "size": draw(st.integers(1, 10_000)),
            "deletionVector": dv,
        }
    }


@st.composite
def commit(draw: st.DrawFn) -> list[dict[str, Any]]:
    paths = draw(st.lists(st.sampled_from(PATHS), unique=True, max_size=4))
    # Writers always record commitInfo, so generated commits are never empty (a zero-byte
    # commit has a test of its own in test_snapshot).
    actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": NOW_MS, "operation": "WRITE"}}]
    actions += [draw(file_action(path)) for path in paths]
    for app in draw(st.lists(st.sampled_from(["app-1", "app-2"]), unique=True, max_size=2)):
        last_updated = draw(st.sampled_from([None, NOW_MS - DAY_MS]))
        actions.append(
            {
                "txn": {
                    "appId": app,
                    "version": draw(st.integers(0, 99)),
                    "lastUpdated": last_updated,
                }
            }
        )
    if draw(st.integers(0, 5)) == 0:
        actions.append(
            {
                "domainMetadata": {
                    "domain": draw(st.sampled_from(["d1", "d2"])),
                    "configuration": "{}",
                    "removed": draw(st.booleans()),
                }
            }
        )
    if draw(st.integers(0, 6)) == 0:
        actions.append({"metaData": _metadata({"k": str(draw(st.integers(0, 9)))})})
    if draw(st.integers(0, 8)) == 0:
        actions.append(
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": draw(st.integers(2, 4))}}
        )
    return actions


def first_commit() -> list[dict[str, Any]]:
    """Protocol and metadata of a new table."""
    return [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": _metadata({})},
    ]


@st.composite
def history(draw: st.DrawFn, max_commits: int = 8) -> list[list[dict[str, Any]]]:
    return [first_commit(), *draw(st.lists(commit(), min_size=1, max_size=max_commits))]


def write_log(table: Path, commits: list[list[dict[str, Any]]]) -> None:
    """Write ``commits`` as ``_delta_log/<v>.json`` files under ``table``."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits):
        text = "".join(json.dumps(action) + "\n" for action in actions)
        (log / commit_name(version)).write_text(text)


def versioned_actions(commits: list[list[dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    return [(version, action) for version, actions in enumerate(commits) for action in actions]


def normalized(rows: list[dict[str, Any]]) -> list[str]:
    """State rows as sorted JSON strings of the fields replay decides, for exact comparison."""
    out = []
    for row in rows:
        kind, action = next((k, v) for k, v in row.items() if v is not None and k in STATE_KINDS)
        out.append(json.dumps([kind, _essential(kind, action)], sort_keys=True))
    return sorted(out)


STATE_KINDS = ("txn", "add", "remove", "metaData", "protocol", "domainMetadata")


def state_counting_queries(snapshot: Any) -> tuple[Any, bool]:
    """The snapshot's state, and whether a state query ran for it (over every row: with a
    checkpoint, reading the checkpoint's rows again)."""
    with mock.patch.object(
        snapshot_module, "compute_state", wraps=snapshot_module.compute_state
    ) as query:
        state = snapshot.state
    return state, query.called


def _essential(kind: str, action: dict[str, Any]) -> Any:
    if kind == "add":
        return [
            action["path"],
            dv_unique_id(action.get("deletionVector")),
            action["size"],
            action["dataChange"],
            action.get("stats"),
        ]
    if kind == "remove":
        return [
            action["path"],
            dv_unique_id(action.get("deletionVector")),
            action.get("deletionTimestamp"),
            action["dataChange"],
        ]
    if kind == "txn":
        return [action["appId"], action["version"], action.get("lastUpdated")]
    if kind == "domainMetadata":
        return [action["domain"], action["configuration"], bool(action.get("removed"))]
    if kind == "metaData":
        configuration = action.get("configuration") or {}
        if isinstance(configuration, list):
            configuration = dict(configuration)
        return [action["id"], sorted(configuration.items())]
    return [action["minReaderVersion"], action["minWriterVersion"]]
