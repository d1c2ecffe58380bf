"""A short soak (``bench/soak.py``): a reader polling with ``update()`` while delta-rs appends,
deletes, compacts and checkpoints. Every checked snapshot equals delta-rs's read of its version,
and neither the cached relations on the server nor its Python workers grow with the updates
(figures, not times; the full bench's 1,000 updates are in bench/README.md)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

pytestmark = pytest.mark.soak

UPDATES = 60
BENCH = Path(__file__).resolve().parents[2] / "bench" / "soak.py"


def _soak_module() -> Any:
    spec = importlib.util.spec_from_file_location("soak_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_short_soak(spark: Any, spark_remote: str) -> None:
    soak = _soak_module()
    jvm = soak.server_jvm(int(spark_remote.rsplit(":", 1)[1].split("/")[0]))
    if jvm is None:
        pytest.skip("the server is not a process on this machine (its JVM is not found)")
    result = soak.soak(spark, jvm, updates=UPDATES, check_every=10, sample_every=5, seed=1)
    assert result.mismatches == []
    assert result.checks >= UPDATES // 10
    assert result.new_versions >= UPDATES // 4, "the writer hardly committed: nothing was soaked"
    # The first samples see a fresh server filling its cache (3 -> 10 cached states over the
    # first 10 updates); after it, the counts vary by a few either way (7-13 in the 1,050-update
    # run) without a trend. A leak grows by about one per update (one state, one worker): the
    # means of the two halves of the warm samples, 25 updates apart, would differ by ~25.
    warm = [s for s in result.samples if s.update > 10]
    half = len(warm) // 2
    early, late = warm[:half], warm[half:]
    for figure in ("cached_relations", "python_workers"):
        early_mean = statistics.fmean(getattr(s, figure) for s in early)
        late_mean = statistics.fmean(getattr(s, figure) for s in late)
        assert late_mean <= early_mean + 2, (figure, [getattr(s, figure) for s in result.samples])
