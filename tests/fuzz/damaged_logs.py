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
    """What one reader made of a table: a value (for a snapshot its version and live files,
    for history the number of commits, for the change data feed its rows), or its error."""

    value: object = None
    error: str | None = None
    delta_error: bool = False

    @property
    def read(self) -> bool:
        return self.error is None


#: The reads compared: a snapshot's version and live files on every case; history and the
#: change data feed on the table with change data.
STATE, HISTORY, CDF = "state", "history", "load_cdf"
EXTRA_READS_TABLE = "kernel/cdf-table"


@dataclass
class Case:
    seed: int
    table: str
    damage: str
    #: Per read: (ours, delta-rs's, the undamaged table's) and the verdict.
    outcomes: dict[str, tuple[Outcome, Outcome, Outcome]] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)


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


def _delta_error(exc: DeltaError) -> Outcome:
    return Outcome(error=f"{exc.error_class}: {str(exc)[:300]}", delta_error=True)


def _raw_error(exc: BaseException) -> Outcome:
    return Outcome(error=f"{type(exc).__name__}: {str(exc)[:300]}")


def ours(spark: Any, table: Path, read: str, version: int | None = None) -> Outcome:
    """Our reader's outcome of ``read`` on ``table`` (at ``version``, else the latest)."""
    from delta_connect_py import DeltaTable

    try:
        dt = DeltaTable.for_path(spark, str(table))
        if read == HISTORY:
            return Outcome(value=dt.history().count())
        if read == CDF:
            return Outcome(value=dt.load_cdf(0).count())
        snapshot = dt.snapshot(version=version)
        rows = snapshot.all_files().select("path").collect()
        # A multiset: a path live twice (with two deletion vectors) counts twice, as in
        # num_of_files and in delta-rs's add actions.
        files = tuple(sorted(_normalised(row["path"]) for row in rows))
        if len(files) != snapshot.state.num_of_files:
            return Outcome(error="the state's num_of_files differs from its live files")
        return Outcome(value=(snapshot.version, files))
    except DeltaError as exc:
        return _delta_error(exc)
    except Exception as exc:  # a raw exception is what is being classified
        return _raw_error(exc)


def theirs(table: Path, read: str) -> Outcome:
    """delta-rs's outcome of ``read`` on ``table``."""
    import deltalake

    try:
        dt = deltalake.DeltaTable(str(table))
        if read == HISTORY:
            return Outcome(value=len(dt.history()))
        if read == CDF:
            return Outcome(value=dt.load_cdf(starting_version=0).read_all().num_rows)
        paths = dt.get_add_actions(flatten=True).column("path").to_pylist()
        return Outcome(value=(dt.version(), tuple(sorted(_normalised(p) for p in paths))))
    except BaseException as exc:  # delta-rs raises pyo3 panics as BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _raw_error(exc)


def classify(mine: Outcome, rs: Outcome, pristine: Outcome) -> str:
    """The class of our outcome given delta-rs's and the undamaged table's."""
    if not mine.read:
        if not mine.delta_error:
            return RAW
        return BOTH_FAIL if not rs.read else STRICTER
    if rs.read and mine.value == rs.value:
        return SAME
    # The undamaged table's answer: a damaged checkpoint or hint read around (an earlier
    # checkpoint or the commits, delta-spark's rule), a stray file ignored.
    if pristine.read and mine.value == pristine.value:
        return RECOVERED if not rs.read else RIGHT_NOT_RS
    return WRONG


@dataclass
class Fuzzer:
    """Cases over copies of ``TABLES`` under ``workdir``, against one Spark session."""

    spark: Any
    conformance: Path
    workdir: Path
    pristine: dict[str, dict[tuple[str, int | None], Outcome]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sources: dict[str, Path] = {}
        for name in TABLES:
            copy = self.workdir / "pristine" / name.replace("/", "__")
            if not copy.exists():
                shutil.copytree(self.conformance / name / "delta", copy)
            self.sources[name] = copy

    def _pristine(self, name: str, read: str, version: int | None) -> Outcome:
        """Our read of the undamaged table (kept per table, read and version)."""
        key = (read, version)
        known = self.pristine.setdefault(name, {})
        if key not in known:
            known[key] = ours(self.spark, self.sources[name], read, version)
        return known[key]

    def run(self, seed: int) -> Case:
        rng = random.Random(seed)
        name = rng.choice(TABLES)
        copy = self.workdir / f"case-{seed}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self.sources[name], copy)
        try:
            case = Case(
                seed=seed, table=name, damage=damage(copy, rng, list(self.sources.values()))
            )
            reads = (STATE, HISTORY, CDF) if name == EXTRA_READS_TABLE else (STATE,)
            for read in reads:
                mine = ours(self.spark, copy, read)
                version = None
                if read == STATE and mine.read:
                    version = mine.value[0]  # type: ignore[index]
                pristine = self._pristine(name, read, version)
                case.outcomes[read] = (mine, theirs(copy, read), pristine)
                case.verdicts[read] = classify(*case.outcomes[read])
            return case
        finally:
            shutil.rmtree(copy, ignore_errors=True)


#: Cases run at once (``DELTA_FUZZ_WORKERS``), each worker a thread with its own Connect
#: session on the one server: a case's reads are small Spark jobs whose round trips and
#: scheduling, more than the server's cores, bound them.
WORKERS = int(os.environ.get("DELTA_FUZZ_WORKERS", "2"))


def run_seeds(sessions: list[Any], conformance: Path, workdir: Path, seeds: range) -> list[Case]:
    """The cases of ``seeds``, in seed order, spread over one worker per session.

    Each worker has its own ``Fuzzer`` (its own session, so no setting or cache of one
    session's reads is another's), the undamaged tables' reads are shared (they are the
    same whoever reads them), and every case still reads its own copy.
    """
    from concurrent.futures import ThreadPoolExecutor

    pristine: dict[str, dict[tuple[str, int | None], Outcome]] = {}
    fuzzers = [Fuzzer(session, conformance, workdir, pristine) for session in sessions]
    share = [list(seeds)[i :: len(fuzzers)] for i in range(len(fuzzers))]
    with ThreadPoolExecutor(max_workers=len(fuzzers)) as pool:
        done = pool.map(lambda f, mine: [f.run(seed) for seed in mine], fuzzers, share)
        cases = [case for worker_cases in done for case in worker_cases]
    return sorted(cases, key=lambda case: case.seed)


def extra_sessions(remote: str, count: int) -> list[Any]:
    """``count`` more Connect sessions on the server at ``remote`` (stop them when done)."""
    from pyspark.sql import SparkSession

    return [SparkSession.builder.remote(remote).create() for _ in range(count)]


def report(cases: list[Case]) -> str:
    """The class counts per read, then every case that is not plainly explained."""
    counts = Counter((read, verdict) for case in cases for read, verdict in case.verdicts.items())
    lines = [f"{len(cases)} damaged-log cases (seeds {cases[0].seed}..{cases[-1].seed}):"]
    lines += [
        f"  {count:5d}  {read}: {verdict}" for (read, verdict), count in sorted(counts.items())
    ]
    for case in cases:
        for read, verdict in case.verdicts.items():
            if verdict in (*FAILURES, STRICTER):
                mine, rs, _ = case.outcomes[read]
                lines.append(
                    f"  [{verdict}] seed {case.seed} {case.table} {read}: {case.damage}\n"
                    f"      ours: {mine.error or mine.value}\n"
                    f"      delta-rs: {rs.error or rs.value}"
                )
    return "\n".join(lines)


def failures(cases: list[Case]) -> list[Case]:
    return [case for case in cases if any(v in FAILURES for v in case.verdicts.values())]


def main() -> None:
    import argparse
    import tempfile

    from delta_connect_py import connect

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--workers", type=int, default=WORKERS)
    args = parser.parse_args()
    spark = connect(os.environ["SPARK_REMOTE"])
    more = extra_sessions(os.environ["SPARK_REMOTE"], args.workers - 1)
    conformance = Path(os.environ.get("DELTA_CONFORMANCE_DIR", "../shared/conformance"))
    seeds = range(args.first_seed, args.first_seed + args.cases)
    try:
        with tempfile.TemporaryDirectory() as workdir:
            cases = run_seeds([spark, *more], conformance, Path(workdir), seeds)
    finally:
        for session in more:
            session.stop()
    print(report(cases))


if __name__ == "__main__":
    main()
