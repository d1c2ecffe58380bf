"""The damaged-log fuzzer's fixed seed set: no wrong answer, no raw exception.

``make test-fuzz`` runs it; ``DELTA_FUZZ_CASES`` and ``DELTA_FUZZ_FIRST_SEED`` choose other
seeds, ``DELTA_FUZZ_WORKERS`` how many run at once (default 2);
``python -m tests.fuzz.damaged_logs --first-seed N --cases M`` runs more outside pytest.
The class counts are printed whatever the outcome.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import CONFORMANCE
from tests.fuzz.damaged_logs import WORKERS, extra_sessions, failures, report, run_seeds

pytestmark = (
    pytest.mark.fuzz
)  # not "integration": make test-integration leaves it to make test-fuzz

CASES = int(os.environ.get("DELTA_FUZZ_CASES", "500"))
FIRST_SEED = int(os.environ.get("DELTA_FUZZ_FIRST_SEED", "0"))


def test_damaged_logs_give_no_wrong_answer(
    spark: object, spark_remote: str, tmp_path: Path
) -> None:
    pytest.importorskip("deltalake")
    more = extra_sessions(spark_remote, WORKERS - 1)
    try:
        seeds = range(FIRST_SEED, FIRST_SEED + CASES)
        cases = run_seeds([spark, *more], CONFORMANCE, tmp_path, seeds)
    finally:
        for session in more:
            session.stop()
    print(report(cases))
    failed = failures(cases)
    assert not failed, report(failed)
