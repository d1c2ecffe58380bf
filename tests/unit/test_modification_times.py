"""Log files' modification times as the workers list them: pyarrow keeps nanoseconds in an
int64, which wraps a time after 2262 round to one before 1970."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyarrow import fs

from delta_connect_py.worker.log_files import modification_ms

AFTER_2262_NS = 10**19  # 2286-11-20


@pytest.fixture
def far_future_file(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.json"
    path.write_text("{}\n")
    os.utime(path, ns=(AFTER_2262_NS, AFTER_2262_NS))
    if os.stat(path).st_mtime_ns != AFTER_2262_NS:
        pytest.skip("this file system does not keep a time after 2262")
    return path


def test_a_local_time_after_2262_is_read_again_from_stat(far_future_file: Path) -> None:
    local = fs.LocalFileSystem()
    info = local.get_file_info(str(far_future_file))
    assert info.mtime_ns is not None and info.mtime_ns < 0  # pyarrow's wrapped value
    assert modification_ms(info, local) == AFTER_2262_NS // 1_000_000


def test_a_time_before_1970_stays_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text("{}\n")
    os.utime(path, ns=(-86_400 * 10**9, -86_400 * 10**9))
    local = fs.LocalFileSystem()
    assert modification_ms(local.get_file_info(str(path)), local) == -86_400_000


def test_no_time_is_zero() -> None:
    assert modification_ms(fs.FileInfo("x", fs.FileType.File)) == 0
