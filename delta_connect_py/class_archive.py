"""The embedded server's class archive: Java's class data sharing (AppCDS) for Spark's classes.

Responsibility: say where the archive of one Java and pyspark installation lives, which JVM
option a server start takes, and build the archive. A server that maps its classes from the
archive was ready in 2.7-2.9 s instead of 4.0-4.5 s (2-core machine, 2026-11-27): the JVM maps
Spark's classes, already parsed and verified, instead of reading them from some 300 jars.

How: while no archive exists, a server start records the classes its JVM loads
(``-XX:DumpLoadedClassList``, which costs nothing measurable). Once that server has exited by
itself, ``start_build`` runs ``java -Xshare:dump`` over the list in a process of its own, at
the lowest CPU priority, detached from the client (about 25 s of CPU, and a file of about
200 MB); later starts map the archive (``-XX:SharedArchiveFile``). No start or stop waits for
the build.

Invariants: stdlib only (the builder runs this file by path, without the package); the key
covers what the archive is made from (the Java build, pyspark's jars, the driver's extra class
path), so a changed installation builds a new archive instead of mapping a stale one, and the
JVM itself checks an archive against its class path and ignores one that does not match
(``-Xshare:auto``: it then starts as without one); an archive is published only whole (the dump
exited 0 and the file starts with the static archive's magic number), by an atomic rename; one
build at a time per archive (a marker file); at most ``KEPT_ARCHIVES`` archives stay in the
directory, and leftovers of builders or servers that died are removed after an hour.
``DELTA_CONNECT_CLASS_ARCHIVE=0`` turns all of it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ENABLED_ENV = "DELTA_CONNECT_CLASS_ARCHIVE"
#: Archives live in ``$DELTA_CONNECT_CACHE_DIR``, else ``$XDG_CACHE_HOME`` (else ``~/.cache``)
#: ``/delta_connect_py``, in a ``class-archives`` folder.
CACHE_DIR_ENV = "DELTA_CONNECT_CACHE_DIR"
_OFF = {"0", "false", "off", "no"}
ARCHIVE_SUFFIX = ".jsa"
CLASS_LIST_SUFFIX = ".classes"
PARTIAL_SUFFIX = ".partial"
BUILDING_SUFFIX = ".building"
#: HotSpot's CDS_ARCHIVE_MAGIC, the first 4 bytes (little-endian) of a static archive.
STATIC_ARCHIVE_MAGIC = 0xF00BABA2
#: Archives kept per directory (other installations, older Java builds), newest first.
KEPT_ARCHIVES = 2
#: A build still running after this long is killed; leftovers older than this are removed.
BUILD_TIMEOUT_SECONDS = 3600.0
#: Environment variables ``spark-class`` puts on the driver's class path.
CLASS_PATH_ENV = ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")
#: The module options Spark's launcher gives the driver JVM that matter to the archive.
MODULE_OPTIONS = ("--add-modules=jdk.incubator.vector",)


@dataclass(frozen=True)
class ClassArchive:
    """The archive of one installation (``path``) and where a server start records its
    loaded classes while there is none (``class_list``, one file per server)."""

    path: Path
    class_list: Path

    @property
    def published(self) -> bool:
        return self.path.is_file()

    @property
    def building(self) -> bool:
        """Whether a build of this archive is under way (its marker is fresh)."""
        return _younger_than(_marker(self.path), BUILD_TIMEOUT_SECONDS)

    def java_option(self) -> str | None:
        """A server JVM's option: map the archive, else record its classes for one (None
        while a build is under way)."""
        if self.published:
            return f"-XX:SharedArchiveFile={self.path}"
        if self.building:
            return None
        return f"-XX:DumpLoadedClassList={self.class_list}"

    def discard_class_list(self) -> None:
        """Remove this server's class list, if any (never raises: it runs at exit)."""
        _remove(self.class_list)


def class_archive(java: str, spark_home: Path, extra_class_path: str = "") -> ClassArchive | None:
    """The archive for a server run by ``java`` from ``spark_home``'s jars (None when turned
    off, or when its directory cannot be created)."""
    if os.environ.get(ENABLED_ENV, "1").strip().lower() in _OFF:
        return None
    directory = archive_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    key = installation_key(java, spark_home, extra_class_path)
    return ClassArchive(
        path=directory / f"{key}{ARCHIVE_SUFFIX}",
        class_list=directory / f"{key}.{os.getpid()}.{time.time_ns()}{CLASS_LIST_SUFFIX}",
    )


def archive_dir() -> Path:
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit) / "class-archives"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "delta_connect_py" / "class-archives"


def installation_key(java: str, spark_home: Path, extra_class_path: str = "") -> str:
    """A name for what an archive is made from: the Java build (its binary and ``release``
    file), the jars of ``spark_home`` (names and sizes), and the rest of the driver's class
    path (``extra_class_path``, ``CLASS_PATH_ENV``)."""
    digest = hashlib.sha256()
    java_binary = Path(java).resolve()
    digest.update(str(java_binary).encode())
    release = java_binary.parent.parent / "release"
    digest.update(release.read_bytes() if release.is_file() else b"no release file")
    for jar in sorted((spark_home / "jars").glob("*.jar")):
        digest.update(f"\n{jar.name} {jar.stat().st_size}".encode())
    digest.update(f"\nextra class path: {extra_class_path}".encode())
    for name in CLASS_PATH_ENV:
        digest.update(f"\n{name}={os.environ.get(name, '')}".encode())
    return f"spark-{digest.hexdigest()[:16]}"


def start_build(archive: ClassArchive, java: str, class_path: str) -> bool:
    """Build ``archive`` from the class list a server that exited by itself recorded, in a
    detached process at the lowest priority; whether one was started. Without a list to
    build from, or when the archive exists or is being built, the list is just removed."""
    if not archive.class_list.is_file() or archive.published or archive.building:
        archive.discard_class_list()
        return False
    command = [sys.executable, __file__, "build", java, class_path]
    subprocess.Popen(
        [*command, str(archive.class_list), str(archive.path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return True


def build(java: str, class_path: str, class_list: Path, archive: Path) -> bool:
    """Dump ``archive`` from ``class_list`` (the builder process's work); whether published.
    The list is removed either way."""
    marker = _marker(archive)
    prune(archive.parent)  # a marker left by a builder that died must not block this one
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:  # another build holds the marker
        _remove(class_list)
        return False
    os.close(fd)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}{PARTIAL_SUFFIX}")
    try:
        published = _dump(java, class_path, class_list, partial) and _publish(partial, archive)
    finally:
        for leftover in (partial, class_list, marker):
            _remove(leftover)
    prune(archive.parent)
    return published


def _dump(java: str, class_path: str, class_list: Path, partial: Path) -> bool:
    command = [
        java,
        "-Xshare:dump",
        f"-XX:SharedClassListFile={class_list}",
        f"-XX:SharedArchiveFile={partial}",
        "-cp",
        class_path,
        *MODULE_OPTIONS,
    ]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _publish(partial: Path, archive: Path) -> bool:
    """Rename ``partial`` to ``archive`` when it starts as a static archive does."""
    try:
        with open(partial, "rb") as file:
            if int.from_bytes(file.read(4), "little") != STATIC_ARCHIVE_MAGIC:
                return False
        os.replace(partial, archive)
    except OSError:
        return False
    return True


def prune(directory: Path, now: float | None = None) -> None:
    """Keep the ``KEPT_ARCHIVES`` newest archives of ``directory``; remove other files older
    than ``BUILD_TIMEOUT_SECONDS`` (class lists, partial dumps and markers of processes that
    died). Files another process removes first are skipped."""
    now = time.time() if now is None else now
    archives = []
    for entry in directory.iterdir():
        try:
            modified = entry.stat().st_mtime
            if entry.name.endswith(ARCHIVE_SUFFIX):
                archives.append((modified, entry))
            elif now - modified > BUILD_TIMEOUT_SECONDS:
                entry.unlink()
        except OSError:
            continue
    for _, old in sorted(archives, reverse=True)[KEPT_ARCHIVES:]:
        _remove(old)


def _marker(archive: Path) -> Path:
    return archive.with_name(archive.name + BUILDING_SUFFIX)


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _main(argv: list[str]) -> int:
    """``python class_archive.py build JAVA CLASS_PATH CLASS_LIST ARCHIVE``: the builder."""
    if len(argv) != 5 or argv[0] != "build":
        usage = "build JAVA CLASS_PATH CLASS_LIST ARCHIVE"
        print(f"usage: {Path(__file__).name} {usage}", file=sys.stderr)
        return 2
    os.nice(19)
    java, class_path, class_list, archive = argv[1:]
    return 0 if build(java, class_path, Path(class_list), Path(archive)) else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
