"""A seccomp filter the worker installs on itself before the submission's code runs.

Kernel-enforced, irrevocable, inherited by every thread: the submission cannot start a
process (no fork, no exec: nothing escapes the process group the grader kills), signal
any process but its own (it cannot kill the grader), trace or read another process's
memory, raise its resource limits (the memory limit holds), build namespaces and
mounts, or keep anything in the kernel's keyrings: a worker that runs as a user of the
machine (a root grader's `--user`, without a user namespace of its own) shares that user's
keyring with every later worker of the same user, another student's too, and a key that a
hidden phase left there could be read back by a public one. Denied calls fail with EPERM;
threads still work (clone only with CLONE_THREAD; clone3, whose flags sit in memory a
filter cannot read, fails with ENOSYS so that glibc falls back to clone).

The filter is built by libseccomp (through `pyseccomp`, a ctypes binding the sandbox
ships in its `lib/`), which knows every architecture's system-call numbers and ABIs: no
hand-written BPF. Without libseccomp, or off Linux, `install` returns False, the report
says so, and the other layers remain.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
import types
from collections.abc import Iterator

#: denied outright (EPERM)
DENIED = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "tkill",
    "setrlimit",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "reboot",
    "setpgid",
    "setsid",
    "bpf",
    "add_key",
    "keyctl",
    "request_key",
)
CLONE_THREAD = 0x00010000
#: sonames of the libraries pyseccomp looks up (a stable ABI): `find_library` would run
#: `ldconfig` in a subprocess, which the sandbox need not have
SONAMES = {"c": "libc.so.6", "seccomp": "libseccomp.so.2"}


@contextlib.contextmanager
def _known_sonames() -> Iterator[None]:
    """While pyseccomp is imported, `ctypes.util` is a stand-in whose `find_library` knows
    SONAMES: the real module runs `ldconfig` to look them up, and importing it (subprocess,
    shutil, tempfile) was about half of the 25 ms this and the plain import guard took off
    each worker's start."""
    real = sys.modules.get("ctypes.util")
    stand_in = types.ModuleType("ctypes.util")
    stand_in.find_library = lambda name: SONAMES.get(name) or (real.find_library(name) if real else None)  # type: ignore[attr-defined]
    sys.modules["ctypes.util"] = ctypes.util = stand_in  # type: ignore[attr-defined]
    try:
        yield
    finally:
        if real is None:
            del sys.modules["ctypes.util"], ctypes.util  # type: ignore[attr-defined]
        else:
            sys.modules["ctypes.util"] = ctypes.util = real  # type: ignore[attr-defined]


def build(pid: int):
    """The filter for process `pid` (a `pyseccomp.SyscallFilter`, not yet loaded)."""
    with _known_sonames():
        import pyseccomp as sc

    deny = sc.ERRNO(errno.EPERM)
    rules = sc.SyscallFilter(sc.ALLOW)
    rules.set_attr(sc.Attr.ACT_BADARCH, deny)  # another ABI's numbers (x32, i386 on x86-64)
    rules.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread of the process, not just this one
    for name in DENIED:
        rules.add_rule(deny, name)
    rules.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))  # a process, not a thread
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    rules.add_rule(deny, "kill", sc.Arg(0, sc.NE, pid))
    rules.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, pid))
    rules.add_rule(deny, "prlimit64", sc.Arg(2, sc.NE, 0))  # reading limits (new_limit NULL) only
    return rules


def install() -> bool:
    """Confine the calling process (and all its threads) for good. False if unsupported."""
    if not hasattr(os, "getpid"):
        return False
    try:
        rules = build(os.getpid())
        rules.load()
    except (ImportError, RuntimeError, OSError, AttributeError):
        return False
    return True
