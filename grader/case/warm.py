"""The warm worker: a fork server inside the sandbox, for grading a class.

Started by the grader as `python -s -P -S -c BOOT LIB CONTROL SPEC` in the same bubblewrap
sandbox a cold worker gets (lib/ read-only, work/ writable, a scratch /tmp), but long-lived:
it imports numpy, the case package and the assignment's adapter and collects its suite's
cases once, makes itself undumpable (a process of its user without CAP_SYS_PTRACE can then
neither trace it nor read /proc/PID/mem), and never runs student code itself.

Per submission the grader sends, over the Unix socket CONTROL, a `run` request with the job
(the cold worker's JSON) and three descriptors (the child's stdin, its stdout+stderr, its
result pipe). The server forks one child that becomes exactly the cold worker from the point
after collecting (`worker.serve`: its user, its limits, the seccomp filter, the submission,
the cases, the same messages on the same pipe), answers `started` with the child's PID in
the sandbox, waits for it, then has a helper (of the child's user, so that it can undo what
the child locked) kill whatever else is left in the sandbox and empty /tmp, and answers
`exited` with the child's status. One child at a time; the grader empties work/.

Replies are one JSON object per datagram (the socket is SOCK_SEQPACKET). Once the grader's
end of CONTROL is closed everywhere (the grader and the pool slot it lent the server to
exited or were killed) the server exits at once, whatever it is doing (`lifeline`, watching
from BOOT's first line); its child dies with it (parent-death signal), and bubblewrap's init
with its last child.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from grader import assignments
from grader.case import worker

#: the server ends with its control socket's last holder outside (`lifeline`), from its first
#: line on: before that, while it imports numpy, and while a child runs
BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from grader.case.lifeline import exit_with; "
    "exit_with(int(sys.argv[2])); from grader.case.warm import main; main(sys.argv[1:])"
)
PR_SET_DUMPABLE = 4
#: the scratch file system every child shares with the next one
SCRATCH = Path("/tmp")
MAX_REQUEST = 1 << 20


def undumpable() -> None:
    """No process of our user may ptrace this one or read its memory from /proc."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> None:
    lib, control, spec = Path(argv[0]), int(argv[1]), json.loads(argv[2])
    undumpable()
    cases = worker.collected(lib, spec["assignment"], spec["suite"])
    assignments.get(spec["assignment"])  # the adapter, imported once for every child
    import numpy  # noqa: F401  (the cases import it; said here so that no child pays for it)

    gc.collect()
    gc.freeze()  # what every child shares: its collections never touch it (no copy-on-write)
    sock = socket.socket(fileno=control)
    user = spec.get("user")
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_REQUEST, 3)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the grader is gone
        try:
            request = json.loads(data)
        except ValueError:
            request = {}
        kind = request.get("kind") if isinstance(request, dict) else None
        if kind == "ping":
            _close(fds)
            _reply(sock, {"kind": "pong", "nonce": request.get("nonce")})
            continue
        if kind != "run" or len(fds) != 3:
            _close(fds)
            _reply(sock, {"kind": "refused"})
            continue
        child = _fork_child(sock, fds, request["job"], cases)
        _close(fds)  # the child holds them now: its exit closes the grader's pipes
        _reply(sock, {"kind": "started", "pid": child, "server": os.getpid()})
        _, status = os.waitpid(child, 0)
        _clean(user)
        _reply(sock, {"kind": "exited", "status": os.waitstatus_to_exitcode(status)})


def _reply(sock: socket.socket, message: dict[str, Any]) -> None:
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        os._exit(0)


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _fork_child(sock: socket.socket, fds: list[int], job: dict[str, Any], cases: dict[str, Any]) -> int:
    """Fork the child that runs one submission; in it, never return."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:
        sock.close()
        stdin, noise, result = fds
        os.dup2(stdin, 0)
        os.dup2(noise, 1)
        os.dup2(noise, 2)
        os.close(stdin)
        os.close(noise)
        worker.become(job.get("user"))
        worker.set_limits(job["memory_mib"], job["file_mib"])
        worker.serve(result, job, cases)
    finally:
        os._exit(70)


def _clean(user: list[int] | None) -> None:
    """After a child: in a helper of the child's user, kill every other process left in the
    sandbox (none should be: the filter forbids new ones) and empty /tmp."""
    pid = os.fork()
    if pid == 0:
        try:
            worker.become(user)
            spare = {1, os.getpid(), os.getppid()}
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and int(entry.name) not in spare:
                    try:
                        os.kill(int(entry.name), signal.SIGKILL)
                    except OSError:
                        pass
            empty(SCRATCH)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def empty(folder: Path) -> None:
    """Remove everything in `folder` that is on its own file system, giving back the
    permissions a child took away. What is mounted inside it is left alone: the sandbox's
    lib/ and work/ keep their host paths, which may well lie under /tmp."""
    try:
        device = os.lstat(folder).st_dev
    except OSError:
        return
    _empty(str(folder), device)


def _empty(folder: str, device: int) -> None:
    try:
        entries = list(os.scandir(folder))
    except PermissionError:  # a child took it away: give it back (it is the child's user's)
        with contextlib.suppress(OSError):
            os.chmod(folder, stat.S_IRWXU)
        entries = []
        with contextlib.suppress(OSError):
            entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_dev != device:
            continue  # a mount point (lib/, work/): not the child's
        if stat.S_ISDIR(info.st_mode):
            if not info.st_mode & stat.S_IWUSR:  # its entries could not be removed
                with contextlib.suppress(OSError):
                    os.chmod(entry.path, stat.S_IRWXU)
            _empty(entry.path, device)
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)  # fails where a mount point lies below: it stays
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
