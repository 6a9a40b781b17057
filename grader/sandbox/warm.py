"""Warm sandbox servers, seen from the grader: each submission in a fresh child of a warm one.

A cold worker imports numpy, the case package and the adapter and collects its suite before
it loads the submission: about 0.2 s of CPU, four times per submission of both assignments.
For a class, `WarmServer.start` starts one long-lived bubblewrap sandbox per (assignment,
suite) and slot, whose first process (`grader.case.warm`) does that once and then forks one
child per submission. The child is exactly the cold worker from the point after collecting,
so `WarmChild` gives the engine the same interface as `WorkerProcess` (`receive` with a
deadline, `proceed`, `finish`, `close`, `pid` = the child's PID on the host, for its maps,
its threads and where it hung).

What keeps one student's child from the next one's: it is forked from a server that never
ran student code, so nothing of a previous child is in its memory; the server empties the
sandbox's /tmp and kills anything left after each child; the grader empties work/ (which
holds one submission at a time: `fill`, then `empty_work`); public and hidden never share a
server. A server that dies, or answers out of step or not at all, is killed at once (with
its PID namespace, everything in it) and the engine goes on with a cold worker on the same
directories; whoever lent it (`grader.classgrade.warm`) starts a fresh one. Servers die with
the process that started them: bwrap's `--die-with-parent`, and, for the moments that misses
(bwrap's own start, before its sandbox's first process has a parent-death signal), the
server's watch on its control socket (`grader.case.lifeline`), hung up once that process and
the pool slot it lent the server to are gone. Their directories are in that process's
locked scratch directory, swept after a SIGKILL.

`--user` works: the server runs as root inside its sandbox (with only CAP_SETUID and
CAP_SETGID, and never runs student code), each child and the cleaning helper become the
unprivileged user before doing anything else.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from grader.case import warm
from grader.sandbox import bwrap, scratch
from grader.sandbox.process import (
    PYTHON_FLAGS,
    STARTUP,
    CpuLedger,
    Fault,
    Limits,
    WorkerProcess,
    clean_env,
    cpu_seconds,
    describe_exit,
    stable_layout,
)
from grader.sandbox.root import SandboxError, copy_submission

#: seconds a server may take to answer a request (a fresh one is still importing numpy)
ANSWER = 60.0
#: seconds a healthy, idle server takes to answer a ping, at most
PING = 5.0
#: seconds the server may take to reap a child and clean up after it
REAP = 5.0


class ServerLost(Fault):
    """The warm server cannot serve: it died, or answered out of step or not at all."""


def _ns_pid(pid: int) -> int | None:
    """Process `pid`'s PID in its own (innermost) PID namespace."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def host_pid(parent: int, inner: int) -> int | None:
    """The host PID of the child of host process `parent` whose PID inside the sandbox is `inner`."""
    return next((c for c in _children(parent) if _ns_pid(c) == inner), None)


class WarmServer:
    """One warm server: started (and finally closed) by the class run's process, lent to a
    submission's process (it pickles: the control socket goes along as a descriptor)."""

    def __init__(
        self,
        root: Path,
        key: tuple[str, str, str],
        control: socket.socket,
        sandbox_init: int,
        proc: subprocess.Popen | None,
        user: tuple[int, int] | None,
    ) -> None:
        self.root, self.key, self.control = root, key, control
        self.lib, self.work = root / "lib", root / "work"
        self.sandbox_init, self.proc, self.user = sandbox_init, proc, user
        #: when the init started, to tell it from a later process that got its PID
        self.init_started = _started(sandbox_init)
        #: the server's PID on the host, once known
        self.server_pid: int | None = None
        #: False once this process gave up on it (killed it)
        self.usable = True
        #: whether it has answered a ping yet (then it is warm)
        self.answered = False

    @classmethod
    def start(
        cls, root: Path, assignment: str, suite: str, suites_dir: Path, user: tuple[int, int] | None
    ) -> WarmServer:
        """Build `root` (lib/ for this suite, an empty work/) and start the server in it."""
        from grader.sandbox.engine import hand_over
        from grader.sandbox.root import build

        root.mkdir()
        lib, work = build(root, root / "no-submission", suites_dir, suite, assignment)
        if user is not None:
            hand_over(root.parent, lib, work, user)
            os.chmod(root, 0o711)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = {"assignment": assignment, "suite": suite, "user": list(user) if user else None}
        command = [*PYTHON_FLAGS, "-c", warm.BOOT, str(lib), str(theirs.fileno()), json.dumps(spec)]
        env = clean_env(work)
        inside = {**env, "TMPDIR": "/tmp"}
        argv = [*bwrap.argv(lib, work, inside, user is not None), bwrap.interpreter(), *command]
        try:
            with open(root / "server.log", "wb") as log:  # beside lib/ and work/: not in the sandbox
                proc = subprocess.Popen(
                    argv,
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    preexec_fn=stable_layout,
                )
        finally:
            theirs.close()
        init = bwrap.first_process(proc, time.monotonic() + STARTUP)
        if init is None:
            proc.kill()
            proc.wait()
            ours.close()
            raise SandboxError(f"the warm sandbox server did not start: {cls._log_of(root)}")
        return cls(root, (assignment, suite, str(suites_dir)), ours, init, proc, user)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "proc": None}

    @staticmethod
    def _log_of(root: Path) -> str:
        try:
            return (root / "server.log").read_bytes()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    # ---- requests ----

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        try:
            socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
        except OSError as exc:
            raise self.lose(f"the warm sandbox server is gone ({exc})") from None

    def answer(self, seconds: float, kind: str) -> dict[str, Any]:
        """The server's next reply, which must be of `kind`; else it is lost."""
        ready, _, _ = select.select([self.control], [], [], seconds)
        if not ready:
            raise self.lose(f"the warm sandbox server did not answer in {seconds:g} s")
        try:
            data = self.control.recv(1 << 16)
            message = json.loads(data) if data else None
        except (OSError, ValueError):
            message = None
        if not isinstance(message, dict) or message.get("kind") != kind:
            reason = "is gone" if message is None else "answered out of step"
            raise self.lose(f"the warm sandbox server {reason}: {self._log_of(self.root)[-500:]}")
        return message

    def ready(self) -> bool:
        """Does the server answer a ping now (it is idle, in step and alive)?"""
        if not self.usable or (self.proc is not None and self.proc.poll() is not None):
            return False
        nonce = secrets.token_hex(8)
        try:
            self.send({"kind": "ping", "nonce": nonce})
            # a server that never answered may still be importing: it gets the start-up's time
            answered = self.answer(PING if self.answered else ANSWER, "pong").get("nonce") == nonce
        except ServerLost:
            return False
        self.answered = answered
        return answered

    def lose(self, reason: str) -> ServerLost:
        """Give up on the server: kill it and all in its sandbox; the reason, to raise."""
        self.kill()
        return ServerLost(reason)

    def kill(self) -> None:
        """SIGKILL the sandbox's init (its PID namespace goes with it), and wait until it is
        gone. Through a pidfd, and only if the PID is still that init's (same start time): a
        PID freed by a server that died may be another process's by now."""
        self.usable = False
        try:
            pidfd = os.pidfd_open(self.sandbox_init)
        except OSError:
            return  # gone already
        try:
            if _started(self.sandbox_init) != self.init_started:
                return
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [], REAP)  # readable once it has exited
        finally:
            os.close(pidfd)

    # ---- the submission in work/ ----

    def fill(self, submission: Path, assignment: str) -> None:
        """Put this submission's copy in work/ (emptied first), owned by the workers' user."""
        self.empty_work()
        copy_submission(submission, self.work, assignment)
        if self.user is not None:
            uid, gid = self.user
            for folder, dirs, files in os.walk(self.work):
                os.lchown(folder, uid, gid)
                for name in [*dirs, *files]:
                    os.lchown(os.path.join(folder, name), uid, gid)

    def empty_work(self) -> None:
        """Remove all a submission and its child left in work/ (the directory itself is bound
        into the sandbox and stays)."""
        os.chmod(self.work, 0o755)
        for entry in os.scandir(self.work):
            if entry.is_dir(follow_symlinks=False):
                scratch.remove(Path(entry.path))
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)

    def pid(self) -> int | None:
        """The server's PID on the host (bwrap's init may have other children: leftovers)."""
        if self.server_pid is None:
            self.server_pid = next((c for c in _children(self.sandbox_init) if c != self.sandbox_init), None)
        return self.server_pid

    # ---- the owner's side ----

    def close(self) -> None:
        """Account the server's CPU time (its children's too), kill it, reap bwrap, remove its directory."""
        found = self.pid()
        if found is not None:
            CpuLedger.seconds += cpu_seconds(found, reaped=True)
        self.kill()
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=REAP)
        self.control.close()
        with contextlib.suppress(OSError):
            scratch.remove(self.root)


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot): with the PID, names one process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class _Child:
    """What `WorkerProcess` asks of its `proc`, for a child of a warm server: its exit status
    comes from the server's `exited` reply."""

    def __init__(self, server: WarmServer, pidfd: int | None, stdin_fd: int) -> None:
        self.server, self.pidfd = server, pidfd
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._collect(REAP if timeout is None else timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("warm child", timeout or 0.0)
        return self.returncode

    def _collect(self, seconds: float) -> None:
        if not self.server.usable:  # the server was killed: so was its child
            self.returncode = -signal.SIGKILL
            return
        ready, _, _ = select.select([self.server.control], [], [], seconds)
        if not ready:
            return
        try:
            status = self.server.answer(0.0, "exited").get("status")
        except ServerLost:
            self.returncode = -signal.SIGKILL  # it died with the server
            return
        self.returncode = status if type(status) is int else -signal.SIGKILL

    def kill(self) -> None:
        if self.returncode is None and self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)


class WarmChild(WorkerProcess):
    """A child of a warm server running one submission's cases: a `WorkerProcess` to the engine."""

    def __init__(self, server: WarmServer, job: dict[str, Any], limits: Limits) -> None:
        self.limits = limits
        self.wrapped = False
        self.sandbox_init = None
        self.server = server
        result_r, result_w = os.pipe()
        noise_r, noise_w = os.pipe()
        stdin_r, stdin_w = os.pipe()
        try:
            try:
                server.send({"kind": "run", "job": job}, (stdin_r, noise_w, result_w))
            finally:
                for fd in (stdin_r, noise_w, result_w):  # the server holds its own copies now
                    os.close(fd)
            started = server.answer(ANSWER, "started")
        except ServerLost:
            for fd in (result_r, noise_r, stdin_w):
                os.close(fd)
            raise
        inner, server_inner = started.get("pid"), started.get("server")
        if server.server_pid is None and type(server_inner) is int:
            server.server_pid = host_pid(server.sandbox_init, server_inner)
        found = host_pid(server.pid() or -1, inner) if type(inner) is int else None
        self._worker_pid = found if found is not None else -1
        pidfd = None
        if found is not None:
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(found)
            if pidfd is not None and (_ns_pid(found) != inner or found not in _children(server.pid() or -1)):
                os.close(pidfd)  # no longer the server's child: its PID may be anyone's now
                pidfd = None
        self.proc = _Child(server, pidfd, stdin_w)  # type: ignore[assignment]
        self._listen(result_r, noise_r, limits)
        if found is None:  # it cannot be watched: give it up before it runs a case
            self.close()
            raise ServerLost("the warm sandbox server's child could not be found")

    @property
    def pid(self) -> int:
        return self._worker_pid

    def _exit_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=REAP)
        except subprocess.TimeoutExpired:
            return "the worker closed its result pipe"
        self._drain_noise()
        return describe_exit(code, self.noise.decode(errors="replace"), self.limits.memory)

    def _account(self) -> None:
        """Nothing: the server reaps its children, and its owner counts their CPU time with
        its own when it closes the server (`WarmServer.close`)."""

    def close(self) -> None:
        """Kill the child if it still runs, wait for the server to reap it and clean up (a
        server that does not is lost), close the pipes."""
        self._account()
        child: _Child = self.proc  # type: ignore[assignment]
        child.poll()  # an exit the server has told already: nothing to kill
        child.kill()
        with contextlib.suppress(OSError):
            child.stdin.close()  # one that could not be killed ends at its next wait for a go
        if child.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(REAP)
        if child.returncode is None and self.server.usable:
            self.server.kill()  # it did not reap its child in time: misbehaving
        if child.pidfd is not None:
            os.close(child.pidfd)
            child.pidfd = None
        for fd in (self.result_fd, self.noise_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
