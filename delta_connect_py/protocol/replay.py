"""The reference log replay: a small, obviously correct port of delta-spark's InMemoryLogReplay.

Responsibility: reconcile a table's actions (checkpoint rows and commit actions, tagged with
their versions) into the table state, over plain Python dicts. It is the oracle the unit and
integration tests compare the distributed replay against, and it defines the checkpoint row
order.

Invariants (PROTOCOL.md "Action Reconciliation", delta-spark InMemoryLogReplay): actions are
applied in ascending version, stably (input order within a version is kept); the latest
``protocol`` and ``metaData`` win; per ``appId`` the latest ``txn`` wins; per ``domain`` the
latest ``domainMetadata`` wins and ``removed=true`` deletes it; an ``add`` makes its key live
(stored with ``dataChange=False``, path as written) and clears any tombstone of that key; a
``remove`` cancels a live ``add`` of the same key and becomes a tombstone (stored with
``dataChange=False``). Keys are :func:`~delta_connect_py.protocol.paths.file_key`. Tombstones are
kept iff ``(deletionTimestamp or 0) > min_file_retention_timestamp`` (all when that is None);
when ``min_set_transaction_retention_timestamp`` is set only txns with a ``lastUpdated`` after it
are kept. ``commitInfo``, ``cdc``, ``checkpointMetadata`` and ``sidecar`` are ignored. A key
live and a tombstone at once is impossible. Input rows are never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from delta_connect_py.protocol.paths import file_key

FileKey = tuple[str, str | None]
STATE_COLUMNS = ("txn", "add", "remove", "metaData", "protocol", "domainMetadata")


def _row(column: str, value: dict[str, Any]) -> dict[str, Any]:
    """A state row with exactly ``column`` set and every other state column None."""
    row: dict[str, Any] = dict.fromkeys(STATE_COLUMNS)
    row[column] = value
    return row


@dataclass(frozen=True)
class ReplayedState:
    """The reconciled state of a table version."""

    protocol: dict[str, Any] | None
    metadata: dict[str, Any] | None
    transactions: dict[str, dict[str, Any]] = field(default_factory=dict)
    domain_metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    adds: dict[FileKey, dict[str, Any]] = field(default_factory=dict)
    tombstones: dict[FileKey, dict[str, Any]] = field(default_factory=dict)

    def _file_rows(self) -> list[dict[str, Any]]:
        entries = [(key, "add", add) for key, add in self.adds.items()]
        entries += [(key, "remove", remove) for key, remove in self.tombstones.items()]
        entries.sort(key=lambda e: (e[2]["path"], e[0][0], e[0][1] or "", e[1]))
        return [_row(column, action) for _, column, action in entries]

    def to_rows(self) -> list[dict[str, Any]]:
        """Checkpoint-order rows: protocol, metadata, domain metadata (by domain), txns (by
        appId), then files sorted by path; each row has all state columns, one of them set."""
        rows: list[dict[str, Any]] = []
        if self.protocol is not None:
            rows.append(_row("protocol", self.protocol))
        if self.metadata is not None:
            rows.append(_row("metaData", self.metadata))
        rows += [
            _row("domainMetadata", self.domain_metadata[d]) for d in sorted(self.domain_metadata)
        ]
        rows += [_row("txn", self.transactions[a]) for a in sorted(self.transactions)]
        return rows + self._file_rows()


class _Replay:
    """Mutable replay state; :func:`reference_replay` is its only user."""

    def __init__(self, table_root: str) -> None:
        self.table_root = table_root
        self.protocol: dict[str, Any] | None = None
        self.metadata: dict[str, Any] | None = None
        self.transactions: dict[str, dict[str, Any]] = {}
        self.domains: dict[str, dict[str, Any]] = {}
        self.adds: dict[FileKey, dict[str, Any]] = {}
        self.tombstones: dict[FileKey, dict[str, Any]] = {}

    def _key(self, action: Mapping[str, Any]) -> FileKey:
        return file_key(action["path"], action.get("deletionVector"), self.table_root)

    def add(self, action: Mapping[str, Any]) -> None:
        key = self._key(action)
        self.tombstones.pop(key, None)
        self.adds[key] = {**action, "dataChange": False}

    def remove(self, action: Mapping[str, Any]) -> None:
        key = self._key(action)
        self.adds.pop(key, None)
        self.tombstones[key] = {**action, "dataChange": False}

    def domain_metadata(self, action: Mapping[str, Any]) -> None:
        if action.get("removed"):
            self.domains.pop(action["domain"], None)
        else:
            self.domains[action["domain"]] = dict(action)

    def apply(self, row: Mapping[str, Any]) -> None:
        if (txn := row.get("txn")) is not None:
            self.transactions[txn["appId"]] = dict(txn)
        if (domain := row.get("domainMetadata")) is not None:
            self.domain_metadata(domain)
        if (metadata := row.get("metaData")) is not None:
            self.metadata = dict(metadata)
        if (protocol := row.get("protocol")) is not None:
            self.protocol = dict(protocol)
        if (add := row.get("add")) is not None:
            self.add(add)
        if (remove := row.get("remove")) is not None:
            self.remove(remove)


def _tombstone_kept(remove: Mapping[str, Any], min_timestamp: int | None) -> bool:
    return min_timestamp is None or (remove.get("deletionTimestamp") or 0) > min_timestamp


def _txn_kept(txn: Mapping[str, Any], min_timestamp: int | None) -> bool:
    if min_timestamp is None:
        return True
    last_updated = txn.get("lastUpdated")
    return last_updated is not None and last_updated > min_timestamp


def reference_replay(
    actions: Iterable[tuple[int, Mapping[str, Any]]],
    *,
    table_root: str,
    min_file_retention_timestamp: int | None,
    min_set_transaction_retention_timestamp: int | None,
) -> ReplayedState:
    """Replay ``(version, action row)`` pairs (any order; sorted stably by version)."""
    replay = _Replay(table_root)
    for _, row in sorted(actions, key=lambda pair: pair[0]):
        replay.apply(row)
    return ReplayedState(
        protocol=replay.protocol,
        metadata=replay.metadata,
        transactions={
            app_id: txn
            for app_id, txn in replay.transactions.items()
            if _txn_kept(txn, min_set_transaction_retention_timestamp)
        },
        domain_metadata=replay.domains,
        adds=replay.adds,
        tombstones={
            key: remove
            for key, remove in replay.tombstones.items()
            if _tombstone_kept(remove, min_file_retention_timestamp)
        },
    )
