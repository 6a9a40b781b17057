"""The sandbox's directories on disk: one per grading run, gone even after a SIGKILL.

A run's directory (`$TMPDIR/grader-sandbox-*`) holds a copy of the submission and, while
the hidden suite runs, of that suite. Ctrl-C and SIGTERM remove it on the way out; SIGKILL
(the out-of-memory killer, a scheduler's hard stop, `kill -9`) leaves no chance to. So each
run holds an exclusive `flock` on a `.lock` file inside its directory, and every run sweeps
the directories whose lock nobody holds before it makes its own: the kernel releases a
dead process's locks, whatever killed it, so a held lock means a live grader and a free
one means a leftover. Workers die with the grader (bubblewrap's `--die-with-parent`, the
worker's own parent-death signal), so a leftover has no process left writing into it.

Making a directory and locking it are two steps, and a run sweeping between them would take
a starting run's fresh directory for a leftover (grade-class starts many runs at once). So
a directory is made under a name the sweep does not take (`.grader-new-*`), its lock is
taken, and only then is it renamed to `grader-sandbox-*`: every directory of that name has
had its lock held from the start. A `.grader-new-*` left by a run killed within those steps
is swept once it is old (`UNLOCKED_GRACE`) and unlocked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "grader-sandbox-"
#: a directory being made: not yet locked, never swept while young
NEW_PREFIX = ".grader-new-"
LOCK = ".lock"
#: how old an unlocked directory must be before it counts as a leftover when it may be a run
#: between making it and taking its lock (a `.grader-new-*`, or one without its lock file)
UNLOCKED_GRACE = 600.0  # seconds


def remove(path: Path) -> None:
    """Remove a tree the submission wrote into: it may have taken its own permissions away."""

    top = os.path.abspath(path)

    def again(func, name, _exc) -> None:
        with contextlib.suppress(OSError):
            if os.path.abspath(name) != top:  # never the mode of what holds the tree ($TMPDIR)
                os.chmod(os.path.dirname(name), stat.S_IRWXU)
            os.chmod(name, stat.S_IRWXU)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            if os.path.isdir(name) and not os.path.islink(name):
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)

    handler = {"onexc": again} if sys.version_info >= (3, 12) else {"onerror": again}
    shutil.rmtree(path, **handler)


def _old(folder: Path) -> bool:
    try:
        return time.time() - folder.stat().st_mtime > UNLOCKED_GRACE
    except OSError:
        return False


def _abandoned(folder: Path) -> bool:
    """Nobody holds the folder's lock (and, for one still being made, it is old)."""
    if folder.name.startswith(NEW_PREFIX) and not _old(folder):
        return False
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return _old(folder)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live grader holds it
    finally:
        os.close(fd)  # closing drops the lock we may have taken
    return True


def sweep(parent: Path | None = None) -> list[Path]:
    """Remove the directories that dead graders left in `parent` ($TMPDIR); return them."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    for folder in sorted([*parent.glob(PREFIX + "*"), *parent.glob(NEW_PREFIX + "*")]):
        if folder.is_dir() and not folder.is_symlink() and _abandoned(folder):
            with contextlib.suppress(OSError):
                remove(folder)
                removed.append(folder)
    return removed


@contextlib.contextmanager
def run_directory() -> Iterator[Path]:
    """A fresh directory for one grading run, locked while it lasts, removed afterwards.
    Leftovers of killed runs are swept first."""
    sweep()
    folder, fd = _locked_directory(Path(tempfile.gettempdir()))
    try:
        yield folder
    finally:
        try:
            remove(folder)
        finally:
            os.close(fd)


def _locked_directory(parent: Path) -> tuple[Path, int]:
    """A new `grader-sandbox-*` in `parent` and the descriptor holding its lock: made under a
    name no sweep takes while young, locked, then renamed (the lock is the inode's: it stays)."""
    new = Path(tempfile.mkdtemp(prefix=NEW_PREFIX, dir=parent))
    try:
        fd = os.open(new / LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError:
        remove(new)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        folder = parent / (PREFIX + new.name[len(NEW_PREFIX) :])
        os.rename(new, folder)  # mkdtemp's suffix is unique; a stale same name makes this fail
    except BaseException:
        os.close(fd)
        remove(new)
        raise
    return folder, fd
