"""The fallback confinement of a worker where bubblewrap cannot start (Linux, root).

Run between fork and exec (`preexec_fn`), so the worker never learns the paths involved:
an empty network namespace (nothing can be sent anywhere), and
a private mount namespace in which every mount is read-only except the sandbox root, the
grader's secrets (the suites, `reference/`, the oracle cache) are covered by empty
read-only tmpfs, and then every capability is dropped, so the worker, although root,
cannot undo any of it. Without this layer the worker can still write where its user may
write (files it plants are never read by the grader, but they exist); `available()`
says whether it is in force, and the report says when it is not.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 3, 4, 24, 38
FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(
        _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {target}",
    )


def _mounts() -> list[tuple[str, int]]:
    """(mount point, flags to keep) for every mount, from /proc/self/mountinfo."""
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            keep = sum(flag for name, flag in FLAGS.items() if name in fields[5].split(","))
            found.append((point, keep))
    return found


def confine(writable: str, hidden: list[str], user: tuple[int, int] | None = None) -> None:
    """In the child, before exec: everything read-only but `writable`; `hidden` emptied; then,
    with `user` (uid, gid), become that user (the worker could not: it has no capability
    left once it runs)."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")  # and no network at all
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(writable, writable, None, MS_BIND | MS_REC)
    for point, keep in _mounts():
        if point == writable or point.startswith(writable.rstrip("/") + "/"):
            continue
        try:
            _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except OSError:
            if point == "/":
                raise
    for path in hidden:
        _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # past the last capability: EINVAL, ignored
    if user is not None:
        uid, gid = user
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)


def preexec(
    writable: Path, hidden: Iterable[Path], user: tuple[int, int] | None = None
) -> Callable[[], None]:
    """The `preexec_fn` for a worker; `hidden` keeps only directories outside `writable`;
    `user`: the worker runs as this (uid, gid)."""
    root = writable.resolve()
    # never the interpreter's own environment: a virtual environment made inside the
    # submission's directory (a student's repository) must stay visible, or no worker starts
    interpreter = Path(sys.prefix).resolve()
    dirs = {
        p
        for p in (Path(h).resolve() for h in hidden)
        if p.is_dir() and not root.is_relative_to(p) and not interpreter.is_relative_to(p)
    }
    outer = [p for p in dirs if not any(p != q and p.is_relative_to(q) for q in dirs)]  # covered with them
    return functools.partial(confine, str(root), sorted(map(str, outer)), user)


@functools.cache
def available() -> bool:
    """Can this process confine a child? Tried once, on a throwaway child."""
    if not hasattr(_libc, "unshare") or not Path("/proc/self/mountinfo").exists():
        return False
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as probe:
        try:
            done = subprocess.run(["/bin/true"], preexec_fn=preexec(Path(probe), []), timeout=10)
        except (subprocess.SubprocessError, OSError):
            return False
    return done.returncode == 0


@contextlib.contextmanager
def undumpable() -> Iterator[None]:
    """While workers run, the grader's memory (/proc/PID/mem, ptrace) is closed to processes
    without CAP_SYS_PTRACE, which a confined worker has dropped."""
    before = _libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield
    finally:
        if before > 0:
            _libc.prctl(PR_SET_DUMPABLE, before, 0, 0, 0)
