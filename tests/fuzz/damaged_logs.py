"""A seeded fuzzer of damaged Delta logs: our reader against delta-rs on the same damage.

Responsibility: copy small conformance tables, damage one copy per case (a log file truncated
or deleted; bytes flipped in a commit, a checkpoint, a sidecar or ``_last_checkpoint``; a
checkpoint taken from another table; a version duplicated; a stray file with a log-like
name), read it with our reader and with delta-rs, and classify the pair of outcomes.

Invariants: a case is fully determined by its seed; every case reads its own copy (caches
keyed by path never see another case's files); the class ``WRONG`` (a state that differs from
delta-rs's and from the undamaged table's) and ``RAW`` (an exception that is not a
``DeltaError``) are the failures; every other class is an outcome a rule explains.
"""

from __future__ import annotations

import os
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from delta_connect_py.errors import DeltaError

#: Small conformance tables delta-rs reads: classic, multi-part and V2 checkpoints (with
#: sidecars), many commits, change data.
TABLES = (
    "golden/checkpoint",
    "golden/multi-part-checkpoint",
    "golden/v2-checkpoint-parquet",
    "golden/v2-checkpoint-json",
    "golden/basic-with-inserts-deletes-checkpoint",
    "kernel/cdf-table",
    "kernel/v2-checkpoints-parquet-with-sidecars",
    "kernel/app-txn-checkpoint",
)

SAME = "same as delta-rs"
BOTH_FAIL = "DeltaError, delta-rs fails too"
STRICTER = "DeltaError where delta-rs reads"
RECOVERED = "state where delta-rs refuses: the undamaged table's state"
RIGHT_NOT_RS = "state differs from delta-rs's: ours is the undamaged table's"
WRONG = "WRONG ANSWER"
RAW = "RAW EXCEPTION"
FAILURES = (WRONG, RAW)


@dataclass(frozen=True)
class Outcome:
    """What one reader made of a table: its version and live files, or its error."""

    version: int | None = None
    files: frozenset[str] = frozenset()
    error: str | None = None
    delta_error: bool = False

    @property
    def read(self) -> bool:
        return self.error is None


@dataclass
class Case:
    seed: int
    table: str
    damage: str
    ours: Outcome = field(default_factory=Outcome)
    theirs: Outcome = field(default_factory=Outcome)
    pristine: Outcome = field(default_factory=Outcome)
    verdict: str = ""


def log_files(table: Path) -> list[Path]:
    log = table / "_delta_log"
    return sorted(p for p in log.rglob("*") if p.is_file())


def _kind(path: Path) -> str:
    name = path.name
    if path.parent.name == "_sidecars":
        return "sidecar"
    if name == "_last_checkpoint":
        return "last_checkpoint"
    if ".checkpoint." in name:
        return "checkpoint"
    if name.endswith(".json"):
        return "commit"
    return "other"


def damage(table: Path, rng: random.Random, donors: list[Path]) -> str:
    """Damage the copy ``table`` one way; a description of what was done."""
    files = log_files(table)
    by_kind: dict[str, list[Path]] = {}
    for path in files:
        by_kind.setdefault(_kind(path), []).append(path)
    kinds = ["truncate", "delete", "flip", "flip", "flip", "swap", "duplicate", "stray"]
    action = rng.choice(kinds)
    if action == "flip":
        kind = rng.choice(sorted(by_kind))
        target = rng.choice(by_kind[kind])
        data = bytearray(target.read_bytes())
        if not data:
            return f"flip: {target.name} is empty, nothing done"
        flips = rng.choice((1, 1, 2, 3))
        offsets = [rng.randrange(len(data)) for _ in range(flips)]
        for offset in offsets:
            data[offset] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(data))
        return f"flip {flips} bit(s) of {kind} {target.name} at {offsets}"
    target = rng.choice(files)
    if action == "truncate":
        data = target.read_bytes()
        keep = rng.randrange(len(data)) if data else 0
        target.write_bytes(data[:keep])
        return f"truncate {target.name} to {keep} of {len(data)} bytes"
    if action == "delete":
        target.unlink()
        return f"delete {target.name}"
    if action == "swap":
        checkpoints = by_kind.get("checkpoint")
        donor_checkpoints = [
            p for d in donors if d != table for p in log_files(d) if _kind(p) == "checkpoint"
        ]
        if not checkpoints or not donor_checkpoints:
            return "swap: no checkpoint, nothing done"
        target = rng.choice(checkpoints)
        donor = rng.choice(donor_checkpoints)
        shutil.copyfile(donor, target)
        return f"swap {target.name} for {donor.parent.parent.parent.name}'s {donor.name}"
    commits = sorted(by_kind.get("commit", []))
    if action == "duplicate" and commits:
        source = rng.choice(commits)
        newest = commits[-1]
        version = int(newest.name.split(".")[0]) + 1
        duplicate = newest.with_name(f"{version:020d}.json")
        shutil.copyfile(source, duplicate)
        return f"duplicate {source.name} as {duplicate.name}"
    stray_names = (
        "{v:020d}.json.tmp",
        ".{v:020d}.json.crc",
        "{v:020d}.checkpoint.parquet.bak",
        "{v:020d}.json~",
        "{v:020d}.jsn",
        "_commit_{v:020d}.json.tmp",
    )
    version = rng.randrange(0, 30)
    name = rng.choice(stray_names).format(v=version)
    (table / "_delta_log" / name).write_bytes(rng.randbytes(rng.randrange(1, 64)))
    return f"stray file {name}"


def _normalised(path: str) -> str:
    """A live file's path as both readers can be compared on (delta-rs unescapes it)."""
    return unquote(path)


def ours(spark: Any, table: Path) -> Outcome:
    from delta_connect_py import DeltaTable

    try:
        snapshot = DeltaTable.for_path(spark, str(table)).snapshot()
        rows = snapshot.all_files().select("path").collect()
        files = frozenset(_normalised(row["path"]) for row in rows)
        if len(files) != snapshot.state.num_of_files:
            return Outcome(error="num_of_files differs from the live files", delta_error=False)
        return Outcome(version=snapshot.version, files=files)
    except DeltaError as exc:
        return Outcome(error=f"{exc.error_class}: {str(exc)[:300]}", delta_error=True)
    except Exception as exc:  # a raw exception is what is being classified
        return Outcome(error=f"{type(exc).__name__}: {str(exc)[:300]}")


def theirs(table: Path) -> Outcome:
    import deltalake

    try:
        dt = deltalake.DeltaTable(str(table))
        paths = dt.get_add_actions(flatten=True).column("path").to_pylist()
        return Outcome(version=dt.version(), files=frozenset(_normalised(p) for p in paths))
    except BaseException as exc:  # delta-rs raises pyo3 panics as BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Outcome(error=f"{type(exc).__name__}: {str(exc)[:300]}")


def classify(case: Case) -> str:
    mine, rs, pristine = case.ours, case.theirs, case.pristine
    if not mine.read:
        if not mine.delta_error:
            return RAW
        return BOTH_FAIL if not rs.read else STRICTER

    def same_as(other: Outcome) -> bool:
        return other.read and (mine.version, mine.files) == (other.version, other.files)

    if same_as(rs):
        return SAME
    # The undamaged table at the version we read: a damaged checkpoint or hint rebuilt from
    # commits (delta-spark's rule), a stray file ignored.
    if pristine.read and mine.version == pristine.version and mine.files == pristine.files:
        return RECOVERED if not rs.read else RIGHT_NOT_RS
    return WRONG


@dataclass
class Fuzzer:
    """Cases over copies of ``TABLES`` under ``workdir``, against one Spark session."""

    spark: Any
    conformance: Path
    workdir: Path
    pristine: dict[str, dict[int, Outcome]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sources = {}
        for name in TABLES:
            copy = self.workdir / "pristine" / name.replace("/", "__")
            if not copy.exists():
                shutil.copytree(self.conformance / name / "delta", copy)
            self.sources[name] = copy

    def _pristine_at(self, name: str, version: int | None) -> Outcome:
        """Our read of the undamaged table at ``version`` (kept per table and version)."""
        if version is None:
            return Outcome(error="no version")
        known = self.pristine.setdefault(name, {})
        if version not in known:
            from delta_connect_py import DeltaTable

            try:
                snapshot = DeltaTable.for_path(self.spark, str(self.sources[name])).snapshot(
                    version=version
                )
                rows = snapshot.all_files().select("path").collect()
                known[version] = Outcome(
                    version=version, files=frozenset(_normalised(r["path"]) for r in rows)
                )
            except DeltaError as exc:
                known[version] = Outcome(error=str(exc), delta_error=True)
        return known[version]

    def run(self, seed: int) -> Case:
        rng = random.Random(seed)
        name = rng.choice(TABLES)
        copy = self.workdir / f"case-{seed}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.sources[name], copy)
        try:
            description = damage(copy, rng, list(self.sources.values()))
            case = Case(seed=seed, table=name, damage=description)
            case.theirs = theirs(copy)
            case.ours = ours(self.spark, copy)
            case.pristine = self._pristine_at(name, case.ours.version)
            case.verdict = classify(case)
            return case
        finally:
            shutil.rmtree(copy, ignore_errors=True)


def report(cases: list[Case]) -> str:
    counts = Counter(case.verdict for case in cases)
    lines = [f"{len(cases)} damaged-log cases:"]
    lines += [f"  {count:5d}  {verdict}" for verdict, count in counts.most_common()]
    for case in cases:
        if case.verdict in (*FAILURES, STRICTER):
            lines.append(
                f"  [{case.verdict}] seed {case.seed} {case.table}: {case.damage}\n"
                f"      ours: {case.ours}\n      delta-rs: {case.theirs}"
            )
    return "\n".join(lines)


def main() -> None:
    import argparse
    import tempfile

    from delta_connect_py import connect

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=500)
    args = parser.parse_args()
    spark = connect(os.environ["SPARK_REMOTE"])
    conformance = Path(os.environ.get("DELTA_CONFORMANCE_DIR", "../shared/conformance"))
    with tempfile.TemporaryDirectory() as workdir:
        fuzzer = Fuzzer(spark, conformance, Path(workdir))
        cases = [fuzzer.run(seed) for seed in range(args.first_seed, args.first_seed + args.cases)]
    print(report(cases))


if __name__ == "__main__":
    main()
