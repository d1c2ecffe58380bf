"""Expired-log cleanup decisions (notes 2.6) on synthetic and random listings."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.protocol.cleanup import (
    MS_PER_DAY,
    SidecarFile,
    cutoff_timestamp,
    find_boundary,
    monotonized_times,
    needs_compat_checkpoint,
    plan_cleanup,
    truncate_to_utc_midnight,
    unreferenced_sidecars,
    walked_files,
)
from delta_connect_py.protocol.filenames import (
    LogFile,
    checkpoint_name,
    checksum_name,
    commit_name,
    compaction_name,
    multipart_checkpoint_name,
    parse_log_file,
    uuid_checkpoint_name,
)
from delta_connect_py.protocol.last_checkpoint import LastCheckpoint
from delta_connect_py.protocol.segment import build_log_segment, complete_checkpoints

DAY = MS_PER_DAY
NOW = 100 * DAY + 12 * 3_600_000  # noon UTC of day 100
RETENTION = {"delta.logRetentionDuration": "interval 30 days"}
CUTOFF = 70 * DAY


def log_file(name: str, mtime: int, size: int = 10) -> LogFile:
    parsed = parse_log_file(f"file:/t/_delta_log/{name}", size, mtime)
    assert parsed is not None
    return parsed


def names(files: Iterable[LogFile]) -> list[str]:
    return sorted(f.name for f in files)


def table(versions: int, checkpoints: Iterable[int], mtime_of: dict[int, int]) -> list[LogFile]:
    files = [log_file(commit_name(v), mtime_of[v]) for v in range(versions)]
    files += [log_file(checkpoint_name(v), mtime_of[v] + 1) for v in checkpoints]
    return files


def test_cutoff_is_utc_midnight() -> None:
    assert truncate_to_utc_midnight(DAY + 5) == DAY
    assert cutoff_timestamp(NOW, RETENTION) == CUTOFF


def test_deletes_only_before_a_checkpoint_older_than_cutoff() -> None:
    mtimes = {v: (50 + v) * DAY for v in range(30)}  # v20 at day 70, v21 at day 71
    files = table(30, [10, 20, 25], mtimes)
    files.append(log_file(checksum_name(5), mtimes[5]))
    plan = plan_cleanup(
        files, last_checkpoint=LastCheckpoint(25, 1), configuration=RETENTION, now_ms=NOW
    )
    # checkpoint 20 was written at day 70 + 1 ms: after the cutoff, so 10 is the boundary.
    assert plan.boundary == 10
    assert names(plan.delete) == names(
        [f for f in files if f.version < 10 and f.kind.value != "compaction"]
    )
    assert checkpoint_name(10) not in names(plan.delete)


def test_nothing_without_last_checkpoint_or_when_disabled() -> None:
    mtimes = {v: v for v in range(20)}
    files = table(20, [10], mtimes)
    none = plan_cleanup(files, last_checkpoint=None, configuration=RETENTION, now_ms=NOW)
    assert none.delete == ()
    disabled = plan_cleanup(
        files,
        last_checkpoint=LastCheckpoint(10, 1),
        configuration={**RETENTION, "delta.enableExpiredLogCleanup": "false"},
        now_ms=NOW,
    )
    assert disabled.delete == ()


def test_boundary_not_after_last_checkpoint() -> None:
    mtimes = {v: v for v in range(20)}
    files = table(20, [5, 10, 15], mtimes)
    assert find_boundary(files, CUTOFF, last_checkpoint_version=10) == 10
    assert find_boundary(files, CUTOFF, last_checkpoint_version=9) == 5


def test_monotonized_times_bump_older_later_versions() -> None:
    files = [log_file(commit_name(0), 100), log_file(commit_name(1), 50)]
    files.append(log_file(commit_name(2), 300))
    times = monotonized_times(walked_files(files))
    assert [times[commit_name(v)] for v in range(3)] == [100, 101, 300]


def test_a_late_file_time_protects_everything_after_it() -> None:
    # Commit 3 was touched after the cutoff: checkpoint 5 then counts as newer than the cutoff.
    mtimes = {v: v for v in range(10)}
    mtimes[3] = CUTOFF + DAY
    files = table(10, [5], mtimes)
    assert find_boundary(files, CUTOFF, last_checkpoint_version=5) is None


def test_incomplete_multipart_is_no_boundary_and_compactions_go() -> None:
    mtimes = {v: v for v in range(12)}
    files = table(12, [], mtimes)
    files.append(log_file(multipart_checkpoint_name(4, 1, 2), 5))
    files += [log_file(multipart_checkpoint_name(8, p, 2), 9) for p in (1, 2)]
    files.append(log_file(compaction_name(2, 5), 6))
    files.append(log_file(compaction_name(6, 9), 10))
    plan = plan_cleanup(
        files, last_checkpoint=LastCheckpoint(8, 1, parts=2), configuration=RETENTION, now_ms=NOW
    )
    assert plan.boundary == 8
    deleted = names(plan.delete)
    assert multipart_checkpoint_name(4, 1, 2) in deleted
    assert compaction_name(2, 5) in deleted
    assert compaction_name(6, 9) not in deleted
    assert not any(f.version >= 8 and f.kind.value != "compaction" for f in plan.delete)


def test_checkpoint_protection_is_conservative() -> None:
    mtimes = {v: v for v in range(20)}
    files = table(20, [10], mtimes)
    config = {**RETENTION, "delta.requireCheckpointProtectionBeforeVersion": "15"}
    plan = plan_cleanup(
        files, last_checkpoint=LastCheckpoint(10, 1), configuration=config, now_ms=NOW
    )
    assert plan.delete == ()
    config["delta.requireCheckpointProtectionBeforeVersion"] = "10"
    plan = plan_cleanup(
        files, last_checkpoint=LastCheckpoint(10, 1), configuration=config, now_ms=NOW
    )
    assert plan.boundary == 10


def test_unreferenced_sidecars() -> None:
    sidecars = [SidecarFile("a.parquet", 1), SidecarFile("b.parquet", 1), SidecarFile("c", CUTOFF)]
    garbage = unreferenced_sidecars(sidecars, ["a.parquet"], CUTOFF)
    assert [s.name for s in garbage] == ["b.parquet"]


def test_compat_checkpoint_only_for_a_uuid_named_checkpoint_without_classic_sibling() -> None:
    uuid_file = log_file(uuid_checkpoint_name(5, "a1b2", "json"), 1)
    commits = [log_file(commit_name(v), 1) for v in range(6)]
    segment = build_log_segment("file:/t", "file:/t/_delta_log", [*commits, uuid_file])
    uuid_choice = segment.checkpoint
    assert uuid_choice is not None
    assert needs_compat_checkpoint(uuid_choice, [*commits, uuid_file], True)
    # Not on a table without v2Checkpoint, nor without a checkpoint, nor for a classic one.
    assert not needs_compat_checkpoint(uuid_choice, [*commits, uuid_file], False)
    assert not needs_compat_checkpoint(None, commits, True)
    classic = log_file(checkpoint_name(5), 1)
    classic_choice = build_log_segment("file:/t", "file:/t/_delta_log", [*commits, classic])
    assert not needs_compat_checkpoint(classic_choice.checkpoint, [*commits, classic], True)
    # A complete classic or multi-part sibling of the same version makes it unneeded; an
    # incomplete multi-part set, a zero-byte file or another version's classic one does not.
    parts = [log_file(multipart_checkpoint_name(5, p, 2), 1) for p in (1, 2)]
    for sibling, needed in [
        ([classic], False),
        (parts, False),
        (parts[:1], True),
        ([log_file(checkpoint_name(5), 1, size=0)], True),
        ([log_file(checkpoint_name(4), 1)], True),
    ]:
        files = [*commits, uuid_file, *sibling]
        assert needs_compat_checkpoint(uuid_choice, files, True) is needed, sibling


@st.composite
def listings(draw: st.DrawFn) -> tuple[list[LogFile], LastCheckpoint | None, int]:
    latest = draw(st.integers(1, 40))
    steps = draw(st.lists(st.integers(-3 * DAY, 3 * DAY), min_size=latest + 1, max_size=latest + 1))
    time = 40 * DAY
    mtimes = {}
    for version, step in enumerate(steps):
        time += step
        mtimes[version] = time
    files = [log_file(commit_name(v), mtimes[v]) for v in range(latest + 1)]
    checkpoint_versions = draw(st.sets(st.integers(0, latest), max_size=8))
    for version in sorted(checkpoint_versions):
        kind = draw(st.sampled_from(["classic", "multi", "partial", "empty"]))
        late = mtimes[version] + draw(st.integers(0, 2 * DAY))
        if kind == "classic":
            files.append(log_file(checkpoint_name(version), late))
        elif kind == "empty":
            files.append(log_file(checkpoint_name(version), late, size=0))
        else:
            parts = 3 if kind == "multi" else 2
            files += [
                log_file(multipart_checkpoint_name(version, p, 3), late)
                for p in range(1, parts + 1)
            ]
        if draw(st.booleans()):
            files.append(log_file(checksum_name(version), late))
    complete = [c.version for c in complete_checkpoints(files)]
    hint = (
        LastCheckpoint(draw(st.sampled_from(complete)), 1)
        if complete and draw(st.booleans())
        else None
    )
    now = draw(st.integers(40 * DAY, 130 * DAY))
    return files, hint, now


@settings(max_examples=400, deadline=None)
@given(listings())
def test_every_version_from_earliest_retained_checkpoint_stays_reconstructable(
    case: tuple[list[LogFile], LastCheckpoint | None, int],
) -> None:
    files, hint, now = case
    plan = plan_cleanup(files, last_checkpoint=hint, configuration=RETENTION, now_ms=now)
    deleted = {f.name for f in plan.delete}
    remaining = [f for f in files if f.name not in deleted]
    latest = max(f.version for f in files)
    if not plan.delete:
        return
    assert hint is not None and plan.boundary is not None
    assert plan.boundary <= hint.version
    assert all(f.version < plan.boundary for f in plan.delete)
    # The boundary checkpoint and the hinted checkpoint survive.
    survivors = {c.version for c in complete_checkpoints(remaining)}
    assert plan.boundary in survivors and hint.version in survivors
    # Nothing deleted is newer than the cutoff (after monotonizing).
    times = monotonized_times(walked_files(files))
    cutoff = cutoff_timestamp(now, RETENTION)
    assert all(times[f.name] <= cutoff for f in plan.delete if f.name in times)
    earliest = min(survivors)
    for version in range(earliest, latest + 1):
        segment = build_log_segment(
            "file:/t", "file:/t/_delta_log", remaining, version=version, last_checkpoint=hint
        )
        assert segment.version == version
