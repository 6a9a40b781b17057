"""The oracle's cache folder: the versions it holds, and the sweep that keeps it small.

Every change to a suite, to the grader's case or verdict code or to torch gives the oracle a
new key, and so a new file `<assignment>-<suite>-<key>.json` (a *version*); without a sweep
the old ones would stay forever and a CI runner or an instructor's laptop would fill up.

The policy: a version's modification time is its last use (the oracle writes it, and
touches it whenever a process reads it). Each time the oracle writes a version it sweeps the
folder: of each assignment's suite the `KEEP` most recently used versions stay, and every
other version unused for `IDLE` seconds is deleted; so is a writer's temporary file that no
rename took within `IDLE` (its writer was killed). Files not named as the oracle names them
are never touched. `python -m grader cache` shows the folder, and sweeps or clears it by hand.
Three: a branch switched back and forth, or two checkouts sharing the folder, find theirs.
An hour: a grader busy with an older checkout keeps its version while other suites change.

Why deleting is safe beside other graders: a version is one file, written to a temporary name
and renamed into place, so it is either whole or absent; a reader reads it in one go (an
unlinked file stays readable to whoever has it open) and takes a missing or unreadable file
as a miss, which only costs running PyTorch again. Two sweeps may race for the same file:
the loser finds it gone and moves on. At worst a sweep deletes a version just as another
grader renames a fresh copy of it into place: that write is lost, a later run misses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: the versions kept of each assignment's suite, however old
KEEP = 3
#: seconds without use after which a version beyond those is deleted (and a stray temporary file)
IDLE = 3600.0
#: hex digits of a suite's key in a version's name
KEY_CHARS = 24

_VERSION = re.compile(rf"(?P<assignment>[^-]+)-(?P<suite>.+)-(?P<key>[0-9a-f]{{{KEY_CHARS}}})\.json")
_TEMPORARY = re.compile(rf"\..+-[0-9a-f]{{{KEY_CHARS}}}\.json\..+")  # `mkstemp(prefix=".<version>.")`


@dataclass(frozen=True)
class Version:
    """One file of the cache: the expected runs of one suite at one key."""

    path: Path
    assignment: str
    suite: str
    key: str
    size: int
    used: float  # the file's modification time: its last write or read


def version_path(folder: Path, assignment: str, suite: str, key: str) -> Path:
    return folder / f"{assignment}-{suite}-{key}.json"


def _stat(folder: Path) -> list[tuple[os.DirEntry[str], os.stat_result]]:
    """The folder's files and their stats; a file that vanishes meanwhile is left out."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file(follow_symlinks=False):
                        found.append((entry, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue  # removed by another grader's sweep
    except OSError:
        return []  # no folder yet, or one this user cannot read: nothing to sweep
    return found


def versions(folder: Path) -> list[Version]:
    """The versions in the folder: by assignment and suite, the most recently used first."""
    found = []
    for entry, stat in _stat(folder):
        match = _VERSION.fullmatch(entry.name)
        if match:
            names = match["assignment"], match["suite"], match["key"]
            found.append(Version(Path(entry.path), *names, stat.st_size, stat.st_mtime))
    return sorted(found, key=lambda v: (v.assignment, v.suite, -v.used, v.key))


def temporaries(folder: Path) -> list[tuple[Path, int, float]]:
    """Writers' temporary files (path, size, modification time): in progress, or left by a
    writer killed before its rename."""
    return [
        (Path(entry.path), stat.st_size, stat.st_mtime)
        for entry, stat in _stat(folder)
        if _TEMPORARY.fullmatch(entry.name)
    ]


def stale(folder: Path, keep: int = KEEP, idle: float = IDLE, now: float | None = None) -> list[Path]:
    """What a sweep deletes now: see the module's docstring."""
    cutoff = (time.time() if now is None else now) - idle
    rank: Counter[tuple[str, str]] = Counter()  # a version's place in its suite, most recently used first
    doomed = []
    for version in versions(folder):
        rank[version.assignment, version.suite] += 1
        if rank[version.assignment, version.suite] > keep and version.used < cutoff:
            doomed.append(version.path)
    doomed += [path for path, _, used in temporaries(folder) if used < cutoff]
    return doomed


def sweep(folder: Path, keep: int = KEEP, idle: float = IDLE, now: float | None = None) -> list[Path]:
    """Delete what `stale` names; returns what this call deleted."""
    return [path for path in stale(folder, keep, idle, now) if _remove(path)]


def clear(folder: Path) -> list[Path]:
    """Delete every version and temporary file (nothing else in the folder); returns them.
    A grader running meanwhile keeps what it has read, and writes its version again."""
    every = [v.path for v in versions(folder)] + [path for path, _, _ in temporaries(folder)]
    return [path for path in every if _remove(path)]


def write_version(path: Path, fill: Callable[[Path], None]) -> bool:
    """Make the file `path` by having `fill` write a temporary file beside it, then renaming
    that into place: readers see the old file or the new one, never a part. Returns whether it
    was written; a failed write leaves nothing."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(fd)
        fill(Path(tmp))
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False  # a cache that cannot be written (a full disk, a cleared folder) only costs time
    finally:
        if tmp is not None:  # not renamed: the write failed, or was interrupted
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def copy_version(path: Path, folder: Path) -> bool:
    """The version file `path` copied into `folder` (`write_version`), its last use kept."""
    return write_version(folder / path.name, lambda tmp: shutil.copy2(path, tmp))


def touch(path: Path) -> None:
    """Mark a version used now (its reader found it), so that a sweep keeps it."""
    try:
        os.utime(path)
    except OSError:
        pass  # gone already, or a read-only cache: it is only swept sooner


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False  # another sweep took it first
    except OSError:
        return False  # a read-only shared cache: not ours to clean
    return True
