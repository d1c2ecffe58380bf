"""The reference replay (notes 2.2), including the checkpoint round-trip property."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.protocol.actions import STATE_SCHEMA
from delta_connect_py.protocol.replay import ReplayedState, reference_replay

ROOT = "file:/tmp/t"
Row = dict[str, Any]


def add(path: str, dv: dict[str, Any] | None = None, **extra: Any) -> Row:
    action = {"path": path, "partitionValues": {}, "size": 1, "modificationTime": 1}
    return {"add": {**action, "dataChange": True, "deletionVector": dv, **extra}}


def remove(path: str, ts: int | None = 100, dv: dict[str, Any] | None = None) -> Row:
    action = {"path": path, "deletionTimestamp": ts, "dataChange": True, "deletionVector": dv}
    return {"remove": action}


def replay(
    actions: list[tuple[int, Row]], files: int | None = None, txns: int | None = None
) -> ReplayedState:
    return reference_replay(
        actions,
        table_root=ROOT,
        min_file_retention_timestamp=files,
        min_set_transaction_retention_timestamp=txns,
    )


DV1 = {"storageType": "u", "pathOrInlineDv": "dv1", "offset": 1, "sizeInBytes": 3}
DV2 = {"storageType": "u", "pathOrInlineDv": "dv2", "offset": None, "sizeInBytes": 3}


def test_add_then_remove_is_tombstone() -> None:
    state = replay([(0, add("a")), (0, add("b")), (1, remove("a", 50))])
    assert set(state.adds) == {("b", None)}
    assert state.adds[("b", None)]["dataChange"] is False
    assert state.tombstones[("a", None)]["deletionTimestamp"] == 50
    assert state.tombstones[("a", None)]["dataChange"] is False


def test_readd_clears_tombstone() -> None:
    state = replay([(0, add("a", size=1)), (1, remove("a")), (2, add("a", size=2))])
    assert state.adds[("a", None)]["size"] == 2
    assert state.tombstones == {}


def test_latest_add_wins_and_input_not_mutated() -> None:
    first = add("a", stats="old")
    state = replay([(1, add("a", stats="new")), (0, first)])
    assert state.adds[("a", None)]["stats"] == "new"
    assert first["add"]["dataChange"] is True


def test_remove_without_add_is_tombstone() -> None:
    state = replay([(0, remove("x", 10))])
    assert list(state.tombstones) == [("x", None)]


def test_dv_keys() -> None:
    state = replay(
        [
            (0, add("a")),
            (1, remove("a", 10)),
            (1, add("a", DV1)),
            (2, remove("a", 20, DV1)),
            (2, add("a", DV2)),
        ]
    )
    assert set(state.adds) == {("a", "udv2")}
    assert set(state.tombstones) == {("a", None), ("a", "udv1@1")}


def test_canonical_paths_match() -> None:
    state = replay([(0, add("/x/a%2fb")), (1, remove("file:///x/a%2Fb"))])
    assert state.adds == {}
    assert set(state.tombstones) == {("file:/x/a%2Fb", None)}
    kept = replay([(0, add("/x/a"))])
    assert kept.adds[("file:/x/a", None)]["path"] == "/x/a"  # path kept as written


def test_tombstone_retention() -> None:
    actions = [(0, remove("old", 100)), (0, remove("new", 101)), (0, remove("none", None))]
    assert set(replay(actions, files=100).tombstones) == {("new", None)}
    assert len(replay(actions, files=None).tombstones) == 3
    assert set(replay(actions, files=-1).tombstones) == {
        ("old", None),
        ("new", None),
        ("none", None),
    }


def test_txns() -> None:
    actions = [
        (0, {"txn": {"appId": "a", "version": 1, "lastUpdated": 10}}),
        (1, {"txn": {"appId": "a", "version": 2, "lastUpdated": 20}}),
        (1, {"txn": {"appId": "b", "version": 7, "lastUpdated": None}}),
        (1, {"txn": {"appId": "c", "version": 7, "lastUpdated": 15}}),
    ]
    assert replay(actions).transactions["a"]["version"] == 2
    assert set(replay(actions).transactions) == {"a", "b", "c"}
    assert set(replay(actions, txns=15).transactions) == {"a"}


def test_domain_metadata() -> None:
    def dm(domain: str, conf: str, removed: bool = False) -> Row:
        return {"domainMetadata": {"domain": domain, "configuration": conf, "removed": removed}}

    state = replay(
        [(0, dm("x", "1")), (1, dm("x", "2")), (1, dm("y", "1")), (2, dm("y", "", True))]
    )
    assert state.domain_metadata == {"x": {"domain": "x", "configuration": "2", "removed": False}}


def test_protocol_metadata_latest_and_ignored_actions() -> None:
    actions: list[tuple[int, Row]] = [
        (0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        (0, {"metaData": {"id": "m0", "configuration": {}}}),
        (3, {"metaData": {"id": "m3", "configuration": {}}}),
        (2, {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}}),
        (4, {"commitInfo": {"operation": "WRITE"}}),
        (4, {"cdc": {"path": "_change_data/x", "dataChange": False}}),
        (4, {"checkpointMetadata": {"version": 4}}),
        (4, {"sidecar": {"path": "s.parquet"}}),
    ]
    state = replay(actions)
    assert state.protocol == {"minReaderVersion": 3, "minWriterVersion": 7}
    assert state.metadata is not None and state.metadata["id"] == "m3"
    assert state.adds == {} and state.tombstones == {}


def test_same_version_keeps_input_order() -> None:
    state = replay([(1, add("a")), (1, remove("a", 5))])
    assert state.adds == {}
    state = replay([(1, remove("a", 5)), (1, add("a"))])
    assert state.tombstones == {}


def test_to_rows_order_and_shape() -> None:
    actions: list[tuple[int, Row]] = [
        (0, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        (0, {"metaData": {"id": "m", "configuration": {}}}),
        (0, {"txn": {"appId": "z", "version": 1, "lastUpdated": 1}}),
        (0, {"txn": {"appId": "a", "version": 1, "lastUpdated": 1}}),
        (0, {"domainMetadata": {"domain": "d", "configuration": "", "removed": False}}),
        (0, add("c")),
        (0, add("a")),
        (1, remove("b", 5)),
    ]
    rows = replay(actions).to_rows()
    columns = [next(k for k, v in row.items() if v is not None) for row in rows]
    assert columns == [
        "protocol",
        "metaData",
        "domainMetadata",
        "txn",
        "txn",
        "add",
        "remove",
        "add",
    ]
    assert [rows[3]["txn"]["appId"], rows[4]["txn"]["appId"]] == ["a", "z"]
    assert [r["add"] or r["remove"] for r in rows[5:]] == sorted(
        (r["add"] or r["remove"] for r in rows[5:]), key=lambda a: a["path"]
    )
    for row in rows:
        assert set(row) == set(STATE_SCHEMA.names)
        assert sum(v is not None for v in row.values()) == 1
    table = pa.Table.from_pylist(rows, schema=STATE_SCHEMA)
    assert table.num_rows == len(rows)


# --- property: checkpoint(prefix) + suffix == full history -------------------------------

_PATHS = st.sampled_from(["a", "b", "/abs/c", "file:///abs/c", "d%2a", "d%2A"])
_DVS = st.sampled_from([None, DV1, DV2])
_TS = st.one_of(st.none(), st.integers(0, 20))


def _action() -> st.SearchStrategy[Row]:
    return st.one_of(
        st.builds(lambda p, d, s: add(p, d, size=s), _PATHS, _DVS, st.integers(0, 5)),
        st.builds(lambda p, t, d: remove(p, t, d), _PATHS, _TS, _DVS),
        st.builds(
            lambda a, v, t: {"txn": {"appId": a, "version": v, "lastUpdated": t}},
            st.sampled_from(["x", "y"]),
            st.integers(0, 9),
            _TS,
        ),
        st.builds(
            lambda d, c, r: {"domainMetadata": {"domain": d, "configuration": c, "removed": r}},
            st.sampled_from(["p", "q"]),
            st.sampled_from(["1", "2"]),
            st.booleans(),
        ),
        st.builds(lambda i: {"metaData": {"id": i, "configuration": {}}}, st.integers(0, 3)),
        st.builds(
            lambda r: {"protocol": {"minReaderVersion": r, "minWriterVersion": 2}},
            st.integers(1, 3),
        ),
        st.just({"commitInfo": {"operation": "WRITE"}}),
    )


_HISTORY = st.lists(st.lists(_action(), max_size=6), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(_HISTORY, st.data(), _TS, _TS)
def test_checkpoint_round_trip(
    history: list[list[Row]], data: st.DataObject, files: int | None, txns: int | None
) -> None:
    actions = [(v, row) for v, rows in enumerate(history) for row in rows]
    split = data.draw(st.integers(0, len(history) - 1))
    full = replay(actions, files, txns)
    prefix = replay([(v, r) for v, r in actions if v <= split], files, txns)
    resumed = [(split, row) for row in prefix.to_rows()] + [(v, r) for v, r in actions if v > split]
    assert replay(resumed, files, txns) == full
    assert not set(full.adds) & set(full.tombstones)
