"""The embedded server's class archive: which option a start takes, and how an archive is built
and published (with a stand-in for ``java -Xshare:dump``; the real dump runs in
``tests/integration/test_server.py``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from delta_connect_py import class_archive as archives

#: Bytes a static archive starts with (``STATIC_ARCHIVE_MAGIC``, little-endian), in octal for sh.
MAGIC_OCTAL = r"\242\253\013\360"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(archives.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(archives.ENABLED_ENV, raising=False)
    return tmp_path / "cache" / "class-archives"


@pytest.fixture
def installation(tmp_path: Path) -> tuple[str, Path]:
    """A java binary with a ``release`` file, and a Spark home with two jars."""
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "release").write_text('JAVA_VERSION="17.0.15"\n')
    java = fake_java(jdk / "bin" / "java", writes=MAGIC_OCTAL)
    spark_home = tmp_path / "pyspark"
    (spark_home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (spark_home / "jars" / name).write_bytes(b"jar")
    return str(java), spark_home


def fake_java(path: Path, writes: str, exit_code: int = 0) -> Path:
    """A stand-in for ``java -Xshare:dump``: writes ``writes`` (printf escapes) to the file
    named by ``-XX:SharedArchiveFile=`` and exits with ``exit_code``."""
    path.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -XX:SharedArchiveFile=*) out="${a#*=}";; esac; done\n'
        f'printf "{writes}rest of the archive" > "$out"\n'
        f"exit {exit_code}\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def new_archive(installation: tuple[str, Path]) -> archives.ClassArchive:
    archive = archives.class_archive(*installation)
    assert archive is not None
    return archive


def marker_of(archive: archives.ClassArchive) -> Path:
    return archive.path.with_name(archive.path.name + archives.BUILDING_SUFFIX)


def age_past_the_build_timeout(path: Path) -> None:
    stale = time.time() - archives.BUILD_TIMEOUT_SECONDS - 1
    os.utime(path, (stale, stale))


def test_a_start_records_its_classes_until_an_archive_is_published(
    cache_dir: Path, installation: tuple[str, Path]
) -> None:
    archive = new_archive(installation)
    assert archive.java_option() == f"-XX:DumpLoadedClassList={archive.class_list}"
    assert archive.class_list.parent == archive.path.parent == cache_dir
    archive.path.write_bytes(b"archive")
    assert archive.java_option() == f"-XX:SharedArchiveFile={archive.path}"


def test_no_option_while_a_build_is_under_way(
    cache_dir: Path, installation: tuple[str, Path]
) -> None:
    archive = new_archive(installation)
    marker_of(archive).touch()
    assert archive.java_option() is None
    age_past_the_build_timeout(marker_of(archive))
    assert archive.java_option() == f"-XX:DumpLoadedClassList={archive.class_list}"


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no"])
def test_turned_off(
    value: str, cache_dir: Path, installation: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(archives.ENABLED_ENV, value)
    assert archives.class_archive(*installation) is None
    assert not cache_dir.exists()


def test_the_key_names_what_the_archive_is_made_from(
    installation: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java, spark_home = installation
    key = archives.installation_key(java, spark_home)
    assert archives.installation_key(java, spark_home) == key
    assert archives.installation_key(java, spark_home, "/opt/extra.jar") != key
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert archives.installation_key(java, spark_home) != key
    monkeypatch.delenv("HADOOP_CONF_DIR")
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"a rebuilt jar")
    assert archives.installation_key(java, spark_home) != key
    jar_key = archives.installation_key(java, spark_home)
    (Path(java).parent.parent / "release").write_text('JAVA_VERSION="17.0.16"\n')
    assert archives.installation_key(java, spark_home) != jar_key


def recorded(installation: tuple[str, Path]) -> archives.ClassArchive:
    """An archive whose server recorded a class list."""
    archive = new_archive(installation)
    archive.class_list.write_text("java/lang/Object id: 0\n")
    return archive


def test_a_build_publishes_a_whole_archive_and_leaves_nothing_else(
    cache_dir: Path, installation: tuple[str, Path]
) -> None:
    archive = recorded(installation)
    assert archives.build(installation[0], "/jars/a.jar", archive.class_list, archive.path)
    assert archive.path.read_bytes().startswith(b"\xa2\xab\x0b\xf0")
    assert sorted(p.name for p in cache_dir.iterdir()) == [archive.path.name]


@pytest.mark.parametrize(
    ("writes", "exit_code"),
    [(MAGIC_OCTAL, 1), ("not an archive", 0), ("", 0)],
    ids=["dump failed", "not an archive", "empty"],
)
def test_a_build_publishes_nothing_but_a_whole_archive(
    writes: str, exit_code: int, cache_dir: Path, installation: tuple[str, Path], tmp_path: Path
) -> None:
    archive = recorded(installation)
    java = fake_java(tmp_path / "broken-java", writes=writes, exit_code=exit_code)
    assert not archives.build(str(java), "/jars/a.jar", archive.class_list, archive.path)
    assert list(cache_dir.iterdir()) == []


def test_one_build_at_a_time(cache_dir: Path, installation: tuple[str, Path]) -> None:
    archive = recorded(installation)
    marker = marker_of(archive)
    marker.touch()
    assert not archives.build(installation[0], "/jars/a.jar", archive.class_list, archive.path)
    assert not archive.path.exists() and not archive.class_list.exists()
    assert marker.exists(), "the other build's marker is its own to remove"


def test_a_marker_left_by_a_dead_builder_does_not_block_builds(
    cache_dir: Path, installation: tuple[str, Path]
) -> None:
    archive = recorded(installation)
    marker_of(archive).touch()
    age_past_the_build_timeout(marker_of(archive))
    assert archives.build(installation[0], "/jars/a.jar", archive.class_list, archive.path)


def test_start_build_only_builds_from_a_recorded_list(
    cache_dir: Path, installation: tuple[str, Path]
) -> None:
    archive = new_archive(installation)
    assert not archives.start_build(archive, installation[0], "/jars/a.jar")  # nothing recorded
    archive = recorded(installation)
    archive.path.write_bytes(b"published meanwhile")
    assert not archives.start_build(archive, installation[0], "/jars/a.jar")
    assert not archive.class_list.exists()


def test_prune_keeps_the_newest_archives_and_removes_stale_leftovers(tmp_path: Path) -> None:
    now = time.time()
    ages = {
        "a.jsa": 30,
        "b.jsa": 20,
        "c.jsa": 10,
        "d.jsa": 5000,
        "old.1.classes": 5000,
        "fresh.2.classes": 10,
        "old.jsa.building": 5000,
        "x.3.partial": 5000,
    }
    for name, age in ages.items():
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (now - age, now - age))
    archives.prune(tmp_path, now=now)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.jsa", "c.jsa", "fresh.2.classes"]


def test_the_builder_runs_by_path_without_the_package(
    cache_dir: Path, installation: tuple[str, Path], tmp_path: Path
) -> None:
    """``start_build`` runs this file as a script, in a process where the package may not be
    importable: it must need the standard library only."""
    archive = recorded(installation)
    command = [sys.executable, "-I", archives.__file__, "build", installation[0], "/jars/a.jar"]
    done = subprocess.run(
        [*command, str(archive.class_list), str(archive.path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert archive.path.is_file() and not archive.class_list.exists()
