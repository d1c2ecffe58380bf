"""Our checkpoints and cleanups racing delta-rs's commits, checkpoints and cleanups, and each
other, over seeded interleavings (``make test-concurrency``).

How an interleaving is made: each of our operations runs in its own thread and stops at named
points (``worker.pauses``): on the client before the snapshot, the staging write, the publish
and the cleanup plan; on the server, inside the one publish or delete task, before each rename
of a part, before the top-level file of a V2 checkpoint, around the read and the replace of
``_last_checkpoint``, before each delete and before the sweeps. Whenever every running operation
of ours waits at a point, a seeded choice either lets one of them go on to its next point or
runs the next step of the other writer (delta-rs, in the test process: append, delete, compact,
checkpoint, cleanup, or "time passes": every log file two days older). The interleaving is thus
a function of the seed alone; a failing seed replays with ``-k 'seed-<n>]'``.

After each interleaving: no commit was lost or changed (every commit delta-rs made, byte for
byte); ``_delta_log`` holds nothing but Delta log files (no staging folder, no temporary file);
``_last_checkpoint`` names a complete checkpoint; every version from the earliest one the log
can still reconstruct to the latest loads in delta-rs with the files it had when committed,
and every version committed after the last "time passes" is among them (a cleanup deletes
only expired files); and our
reader loads the same files at the latest version, at the earliest retained one and at every
version with a checkpoint written during the interleaving.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py import checkpoints
from delta_connect_py.protocol.filenames import LogFile, LogFileKind, parse_log_file
from delta_connect_py.protocol.last_checkpoint import parse_last_checkpoint
from delta_connect_py.protocol.segment import CheckpointChoice, complete_checkpoints
from delta_connect_py.table import DeltaTable
from delta_connect_py.worker.pauses import pause_at

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.concurrency

#: Seeded interleavings run by ``make test-concurrency`` (seeds 0 to N - 1).
INTERLEAVINGS = int(os.environ.get("DELTA_CONCURRENCY_INTERLEAVINGS", "200"))
DAY_S = 86_400
#: Log files older than this are expired (both cleaners read it from the table).
RETENTION = {"delta.logRetentionDuration": "interval 1 days"}
#: Longest wait for our operations to reach their next point (a hung test fails instead).
#: The heaviest interleavings wait up to about 20 s at a load of 10-15 on 2 cores (seed 135,
#: two multi-part checkpoints starting together: 4-19 s); 300 s was once exceeded at a load of
#: 40. Shorter than a paused worker's wait for its go-ahead (``pauses.GO_AHEAD_TIMEOUT_S``).
SETTLE_TIMEOUT_S = 600.0

# --- Pauses: which operation of ours the current thread runs --------------------------------

_actor = threading.local()


def current_pause_dir() -> str | None:
    """The pause folder of the operation the calling thread runs; None outside one."""
    return getattr(_actor, "pause_dir", None)


def client_pause(point: str) -> None:
    pause_at(current_pause_dir(), f"client-{point}")


@pytest.fixture
def pausing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Client-side pause points in ``checkpoints``, and the worker requests carrying the
    calling operation's pause folder (threads outside an operation are not affected)."""

    def before(point: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def paused(*args: Any, **kwargs: Any) -> Any:
            client_pause(point)
            return function(*args, **kwargs)

        return paused

    def with_pauses(request_type: type) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            return dataclasses.replace(request_type(*args, **kwargs), pause_dir=current_pause_dir())

        return make

    monkeypatch.setattr(DeltaTable, "snapshot", before("snapshot", DeltaTable.snapshot))
    monkeypatch.setattr(checkpoints, "_write_staging", before("write", checkpoints._write_staging))
    monkeypatch.setattr(checkpoints, "_publish", before("publish", checkpoints._publish))
    monkeypatch.setattr(
        checkpoints, "plan_table_cleanup", before("plan", checkpoints.plan_table_cleanup)
    )
    monkeypatch.setattr(checkpoints, "PublishRequest", with_pauses(checkpoints.PublishRequest))
    monkeypatch.setattr(checkpoints, "DeleteRequest", with_pauses(checkpoints.DeleteRequest))


class Actor:
    """One operation of ours in its own thread, stopping at every pause point."""

    def __init__(self, name: str, pause_root: Path, work: Callable[[], Any]) -> None:
        self.name = name
        self.pause_dir = pause_root / name
        self.pause_dir.mkdir(parents=True)
        self.work = work
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        _actor.pause_dir = str(self.pause_dir)
        try:
            self.work()
        except BaseException as exc:
            self.error = exc
        finally:
            _actor.pause_dir = None
            self.done.set()

    def waiting_at(self) -> str | None:
        names = [p.name for p in self.pause_dir.iterdir() if p.name.endswith(".reached")]
        assert len(names) <= 1, names
        return names[0].removesuffix(".reached") if names else None

    def settled(self) -> bool:
        return self.done.is_set() or self.waiting_at() is not None

    def release(self, point: str) -> None:
        os.replace(self.pause_dir / f"{point}.reached", self.pause_dir / f"{point}.go")


# --- The other writer (delta-rs) and what it committed ---------------------------------------


@dataclasses.dataclass
class Model:
    """What delta-rs committed: per version, the live files and the commit file's bytes."""

    root: Path
    files: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    commits: dict[int, bytes] = dataclasses.field(default_factory=dict)
    #: The latest version when log files were last made old (none newer may be deleted).
    aged_up_to: int = -1
    #: The names in ``_delta_log`` before the interleaving.
    initial_names: frozenset[str] = frozenset()

    @property
    def log(self) -> Path:
        return self.root / "_delta_log"

    def record(self) -> None:
        """Record every version delta-rs committed since the last call."""
        latest = deltalake.DeltaTable(str(self.root)).version()
        for version in range(max(self.files, default=-1) + 1, latest + 1):
            self.files[version] = delta_rs_files(self.root, version)
            self.commits[version] = (self.log / f"{version:020d}.json").read_bytes()

    def copy_to(self, root: Path) -> Model:
        shutil.copytree(self.root, root)  # copy2: modification times kept
        names = frozenset(os.listdir(self.log))
        return Model(root, dict(self.files), dict(self.commits), self.aged_up_to, names)


def delta_rs_files(root: Path, version: int | None = None) -> list[str]:
    table = deltalake.DeltaTable(str(root), version=version)
    return sorted(table.get_add_actions(flatten=True).column("path").to_pylist())


def age_log(model: Model) -> None:
    """Time passes: every file in ``_delta_log`` (sidecars too) becomes two days older."""
    for path in model.log.rglob("*"):
        if path.is_file():
            stat = path.stat()
            os.utime(path, (stat.st_atime - 2 * DAY_S, stat.st_mtime - 2 * DAY_S))
    model.aged_up_to = max(model.files)


def delta_rs_step(kind: str, model: Model, rng: random.Random) -> Callable[[], None]:
    """One step of the other writer; commits are recorded in ``model`` as they are made."""
    root = str(model.root)

    def run() -> None:
        if kind == "append":
            ids = [rng.randrange(1000) for _ in range(rng.randint(1, 3))]
            data = pa.table({"id": ids, "part": [rng.choice("ab") for _ in ids]})
            deltalake.write_deltalake(root, data, mode="append")
        elif kind == "delete":
            deltalake.DeltaTable(root).delete(f"id < {rng.randrange(400)}")
        elif kind == "compact":
            deltalake.DeltaTable(root).optimize.compact()
        elif kind == "checkpoint":
            deltalake.DeltaTable(root).create_checkpoint()
        elif kind == "cleanup":
            deltalake.DeltaTable(root).cleanup_metadata()
        else:
            age_log(model)
        model.record()

    return run


OTHER_STEPS = ("append", "append", "append", "delete", "compact", "checkpoint", "checkpoint")
OTHER_STEPS += ("cleanup", "cleanup", "age")


@pytest.fixture(scope="module")
def template(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Model:
    """Eight versions, delta-rs's checkpoint at 3 and ours at 5, every file two days old."""
    model = Model(tmp_path_factory.mktemp("concurrent") / "template")
    for version in range(8):
        data = pa.table({"id": [version, version + 100], "part": ["a", "b"]})
        deltalake.write_deltalake(
            str(model.root), data, mode="append", partition_by=["part"], configuration=RETENTION
        )
        if version == 3:
            deltalake.DeltaTable(str(model.root)).create_checkpoint()
        if version == 5:
            DeltaTable.for_path(spark, str(model.root)).create_checkpoint()
    model.record()
    age_log(model)
    return model


# --- One interleaving -------------------------------------------------------------------------

OURS = (("checkpoint",), ("cleanup",), ("checkpoint", "checkpoint"), ("checkpoint", "cleanup"))


def our_operation(kind: str, spark: Any, root: Path, rng: random.Random) -> Callable[[], Any]:
    table = DeltaTable.for_path(spark, str(root))
    if kind == "cleanup":
        return lambda: table.cleanup_metadata()
    part_size = rng.choice([None, None, 2])
    return lambda: table.create_checkpoint(part_size=part_size)


@dataclasses.dataclass
class Interleaving:
    seed: int
    ours: tuple[str, ...]
    trace: list[str]
    #: The longest wait for our operations to reach their next points, and after what.
    slowest_settle: str


def interleave(
    rng: random.Random,
    actors: list[Actor],
    steps: list[tuple[str, Callable[[], None]]],
    settle_waits: list[float],
) -> list[str]:
    """Run ``actors`` and ``steps`` in a seeded order; the trace of what ran when. Each wait for
    our operations to reach their next points is added to ``settle_waits`` (seconds): the
    slowest tells a slow machine (near ``SETTLE_TIMEOUT_S``) from a hang."""
    trace: list[str] = []
    for actor in actors:
        actor.thread.start()
    while True:
        started = time.monotonic()
        while not all(actor.settled() for actor in actors):
            if time.monotonic() - started > SETTLE_TIMEOUT_S:
                running = [actor.name for actor in actors if not actor.settled()]
                raise AssertionError(
                    f"{running} never reached a point in {SETTLE_TIMEOUT_S} s: {trace}"
                )
            time.sleep(0.002)
        settle_waits.append(time.monotonic() - started)
        waiting = [actor for actor in actors if not actor.done.is_set()]
        choices: list[Any] = [*waiting, *(["step"] if steps else [])]
        if not choices:
            return trace
        choice = rng.choice(choices)
        if choice == "step":
            name, step = steps.pop(0)
            trace.append(f"delta-rs {name}")
            try:
                step()
            except Exception as exc:
                raise AssertionError(f"delta-rs failed after {trace}: {exc}") from exc
        else:
            point = choice.waiting_at()
            assert point is not None
            trace.append(f"{choice.name} {point}")
            choice.release(point)


def run_interleaving(
    spark: Any, template: Model, tmp_path: Path, seed: int
) -> tuple[Model, Interleaving]:
    rng = random.Random(seed)
    model = template.copy_to(tmp_path / "table")
    ours = rng.choice(OURS)
    actors = [
        Actor(f"{kind}-{i}", tmp_path / "pauses", our_operation(kind, spark, model.root, rng))
        for i, kind in enumerate(ours)
    ]
    kinds = [rng.choice(OTHER_STEPS) for _ in range(rng.randint(2, 5))]
    steps = [(kind, delta_rs_step(kind, model, rng)) for kind in kinds]
    settle_waits: list[float] = []
    try:
        trace = interleave(rng, actors, steps, settle_waits)
    except AssertionError as exc:
        log = model.log
        raise AssertionError(f"{exc}; log: {sorted(os.listdir(log))}") from exc
    finally:
        release_all(actors)
    for actor in actors:
        if actor.error is not None:
            raise AssertionError(f"{actor.name} failed after {trace}") from actor.error
    return model, Interleaving(seed, ours, trace, slowest_settle(settle_waits, trace))


def slowest_settle(settle_waits: list[float], trace: list[str]) -> str:
    """The longest wait and what was let go on before it (the first wait follows the start)."""
    index = max(range(len(settle_waits)), key=settle_waits.__getitem__)
    after = trace[index - 1] if index > 0 else "the start"
    return f"{settle_waits[index]:.1f} s after {after}"


def release_all(actors: list[Actor]) -> None:
    """Let every operation run to its end (after a failure: a task paused on the server would
    otherwise hold a slot the next interleavings need)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while not all(actor.done.is_set() for actor in actors) and time.monotonic() < deadline:
        for actor in actors:
            point = actor.waiting_at()
            if point is not None:
                actor.release(point)
        time.sleep(0.002)


# --- Checks -------------------------------------------------------------------------------------


def listed(log: Path) -> list[LogFile]:
    files = []
    for path in log.iterdir():
        if path.is_file():
            stat = path.stat()
            parsed = parse_log_file(path.name, stat.st_size, int(stat.st_mtime * 1000))
            if parsed is not None:
                files.append(parsed)
    return files


def check_only_log_files(log: Path) -> None:
    """Nothing but Delta's files: no staging folder, no temporary file, no stray name."""
    for path in log.iterdir():
        if path.name == "_last_checkpoint":
            continue
        if path.name == "_sidecars":
            assert all(p.suffix == ".parquet" for p in path.iterdir()), list(path.iterdir())
            continue
        parsed = parse_log_file(path.name, 1, 0)
        assert parsed is not None and path.is_file(), f"unexpected {path.name} in _delta_log"


def check_complete(log: Path, choice: CheckpointChoice) -> None:
    """Every file of the checkpoint reads whole (parquet footers; a V2 file's sidecars)."""
    for file in choice.files:
        if file.name.endswith(".parquet"):
            pq.read_metadata(log / file.name)
        else:
            for line in (log / file.name).read_text().splitlines():
                if '"sidecar"' in line:
                    sidecar = line.split('"path":"', 1)[1].split('"', 1)[0]
                    pq.read_metadata(log / "_sidecars" / sidecar)


def check_hint(log: Path, files: list[LogFile]) -> None:
    """``_last_checkpoint`` (when present) names a complete checkpoint with its part count."""
    hint_path = log / "_last_checkpoint"
    if not hint_path.exists():
        return
    hint = parse_last_checkpoint(hint_path.read_text())
    matching = [
        choice
        for choice in complete_checkpoints(files)
        if choice.version == hint.version
        and (hint.parts or 1) == (len(choice.files) if choice.files[0].num_parts else 1)
    ]
    assert matching, f"_last_checkpoint names version {hint.version} (parts {hint.parts})"
    for choice in matching:
        check_complete(log, choice)


def retained_versions(files: list[LogFile]) -> list[int]:
    """The versions the log can reconstruct: from a complete checkpoint (or commit 0) on,
    with every commit after it present."""
    commits = {f.version for f in files if f.kind is LogFileKind.COMMIT}
    latest = max(commits)
    starts = {choice.version for choice in complete_checkpoints(files)}
    starts |= {0} if 0 in commits else set()
    earliest = min(
        start for start in starts if all(v in commits for v in range(start + 1, latest + 1))
    )
    return list(range(earliest, latest + 1))


def our_files(spark: Any, root: Path, version: int) -> list[str]:
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot(version)
    try:
        return sorted(row["path"] for row in snapshot.all_files().select("path").collect())
    finally:
        snapshot.unpersist()


def check_table(spark: Any, model: Model) -> None:
    log = model.log
    check_only_log_files(log)
    files = listed(log)
    commits = {f.version: f for f in files if f.kind is LogFileKind.COMMIT}
    assert max(commits) == max(model.files), "a commit was lost"
    for version in commits:
        assert (log / commits[version].name).read_bytes() == model.commits[version]
    check_hint(log, files)
    for choice in complete_checkpoints(files):
        check_complete(log, choice)
    retained = retained_versions(files)
    # Versions committed after the last "time passes" are not expired: no cleaner may drop them.
    assert retained[0] <= model.aged_up_to + 1, (retained[0], model.aged_up_to)
    for version in retained:
        assert delta_rs_files(model.root, version) == model.files[version], version
    # Our reader where it starts from a checkpoint written during the interleaving, at the
    # earliest and at the latest version (every version between replays the same commits).
    written = {
        choice.version
        for choice in complete_checkpoints(files)
        if any(file.name not in model.initial_names for file in choice.files)
    }
    for version in sorted({retained[0], retained[-1], *(written & set(retained))}):
        assert our_files(spark, model.root, version) == model.files[version], version


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(INTERLEAVINGS)])
def test_interleaving(
    spark: Any, template: Model, tmp_path: Path, pausing: None, seed: int
) -> None:
    model, interleaving = run_interleaving(spark, template, tmp_path, seed)
    print(f"\nseed {seed}: the slowest wait for our operations: {interleaving.slowest_settle}")
    try:
        check_table(spark, model)
    except AssertionError as exc:
        raise AssertionError(f"{interleaving}: {exc}") from exc


def test_delta_rs_takes_a_part_of_an_incomplete_multipart_set_for_a_checkpoint(
    template: Model, tmp_path: Path
) -> None:
    """Why a multi-part publish pauses once, not between its parts: delta-rs 1.6's post-commit
    log cleanup counts one part of an incomplete multi-part set as a checkpoint, deletes the
    complete checkpoint before it and the expired commits, and then cannot load the table
    until the set is complete. When this starts to fail, delta-rs has been fixed: pause
    between the parts again (``worker.checkpoint_files._rename_all``)."""
    model = template.copy_to(tmp_path / "table")
    deltalake.DeltaTable(str(model.root)).cleanup_metadata()
    latest = max(model.files)
    one_part = model.log / f"{latest:020d}.checkpoint.{1:010d}.{8:010d}.parquet"
    shutil.copyfile(model.log / f"{5:020d}.checkpoint.parquet", one_part)
    with pytest.raises(Exception, match="didn't find any checkpoints"):
        deltalake.DeltaTable(str(model.root)).delete("id < 3")
    assert not (model.log / f"{5:020d}.checkpoint.parquet").exists()
