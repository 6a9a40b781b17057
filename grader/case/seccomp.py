"""A seccomp filter the worker installs on itself before the submission's code runs.

Kernel-enforced, irrevocable, inherited by every thread: the submission cannot start a
process (no fork, no exec: nothing escapes the process group the grader kills), signal
any process but its own (it cannot kill the grader), trace or read another process's
memory, raise its resource limits (the memory limit holds), or build namespaces and
mounts. Denied calls fail with EPERM; threads still work. Linux on x86-64 and AArch64;
elsewhere `install` returns False and the other layers remain.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import struct

# BPF opcodes and seccomp constants (linux/filter.h, linux/seccomp.h)
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
CLONE_THREAD = 0x00010000
NR, ARCH, ARG0, ARG2_LO, ARG2_HI = 0, 4, 16, 32, 36

#: machine -> (audit arch, denied calls, clone, clone3, kill, tgkill, prlimit64)
TABLES = {
    "x86_64": (
        0xC000003E,
        # fork vfork execve execveat ptrace process_vm_readv/writev tkill setrlimit
        # unshare setns mount umount2 pivot_root chroot reboot setpgid setsid bpf
        [57, 58, 59, 322, 101, 310, 311, 200, 160, 272, 308, 165, 166, 155, 161, 169, 109, 112, 321],
        56,
        435,
        62,
        234,
        302,
    ),
    "aarch64": (
        0xC00000B7,
        [221, 281, 117, 270, 271, 130, 164, 97, 268, 40, 39, 41, 51, 142, 154, 157, 280],
        220,
        435,
        129,
        131,
        261,
    ),
}


def _program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    arch, denied, clone, clone3, kill, tgkill, prlimit = TABLES[machine]
    deny, enosys, allow = "deny", "enosys", "allow"
    code: list[tuple] = [(LD_ABS, 0, 0, ARCH), (JEQ, 0, deny, arch), (LD_ABS, 0, 0, NR)]
    if machine == "x86_64":
        code.append((JGE, deny, 0, 0x40000000))  # the x32 ABI's numbers
    code += [(JEQ, deny, 0, nr) for nr in denied]
    code += [
        (JEQ, enosys, 0, clone3),
        (JEQ, "clone", 0, clone),
        (JEQ, "self", 0, kill),
        (JEQ, "self", 0, tgkill),
    ]
    code += [(JEQ, "prlimit", 0, prlimit), (RET, 0, 0, ALLOW)]
    labels = {"clone": len(code)}
    code += [(LD_ABS, 0, 0, ARG0), (JSET, allow, deny, CLONE_THREAD)]  # threads only
    labels["self"] = len(code)
    code += [(LD_ABS, 0, 0, ARG0), (JEQ, allow, deny, pid)]  # signals to itself only
    labels["prlimit"] = len(code)
    code += [
        (LD_ABS, 0, 0, ARG2_LO),
        (JEQ, 0, deny, 0),
        (LD_ABS, 0, 0, ARG2_HI),
        (JEQ, allow, deny, 0),
    ]  # reads
    labels |= {allow: len(code), deny: len(code) + 1, enosys: len(code) + 2}
    code += [(RET, 0, 0, ALLOW), (RET, 0, 0, ERRNO | errno.EPERM), (RET, 0, 0, ERRNO | errno.ENOSYS)]
    resolved = []
    for i, (op, jt, jf, k) in enumerate(code):
        jt, jf = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        resolved.append((op, jt, jf, k))
    return resolved


def install() -> bool:
    """Confine the calling process (and its future threads) for good. False if unsupported."""
    machine = platform.machine()
    if machine not in TABLES or not hasattr(os, "getpid"):
        return False
    program = _program(machine, os.getpid())
    raw = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(raw)

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Prog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
