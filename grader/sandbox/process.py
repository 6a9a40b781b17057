"""One worker process, watched from the grader's side.

The worker serves one assignment, running each phase (one suite's cases) in a child forked
from it (see `grader.case.worker`). The grader owns the clock and the kill switch. It waits
for the phase's messages with a deadline; when the deadline passes, or the child's memory
grows past the limit, or it dies, the grader says why in a `Fault` and kills the worker's
whole process group with SIGKILL (which no signal handler can ignore). Whatever the worker
prints goes to a pipe the grader drains, keeping only the last few KiB: 50 MB of output
costs a few reads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader import ONE_THREAD
from grader.case import hang
from grader.case.limits import Limits
from grader.case.quantity import MalformedResult
from grader.case.wire import ASK_TAPE, encode
from grader.case.worker import BOOT
from grader.sandbox import bwrap
from grader.sandbox.protocol import FrameReader, decode

NOISE_KEPT = 16 << 10
POLL = 0.05
PAGE = os.sysconf("SC_PAGE_SIZE")
#: seconds bwrap may take to set up the sandbox and report its first process
STARTUP = 10.0


class Fault(Exception):
    """The worker did not deliver: the reason, in words meant for the student; for a case
    that ran out of time, the function it was stuck in (`Run.stuck_in`)."""

    def __init__(self, reason: str, stuck_in: str = "") -> None:
        super().__init__(reason)
        self.stuck_in = stuck_in


class Timeout(Fault):
    pass


class Crash(Fault):
    """The worker exited or was killed by a signal it did not get from us."""


#: the interpreter's flags: like `-I` (no user site-packages, no script directory on the path)
#: but reading the environment, which `clean_env` makes in full, so that PYTHONHASHSEED holds
PYTHON_FLAGS = ("-s", "-P", "-S")
ADDR_NO_RANDOMIZE = 0x0040000
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def stable_layout() -> None:
    """Between fork and exec: turn off address randomization for the worker (inherited by
    bwrap and everything it starts). With string hashes seeded too, a worker that runs the
    same cases allocates the same addresses, so an engine whose result depends on the order
    of its own sets of nodes gets the same result on every regrade. Where the kernel refuses,
    nothing changes."""
    personality = getattr(_libc, "personality", None)
    if personality is not None:
        current = personality(0xFFFFFFFF)
        if current != -1:
            personality(current | ADDR_NO_RANDOMIZE)


def clean_env(work: Path) -> dict[str, str]:
    """Nothing of the grader's environment: no tokens, no paths, no PYTHON* settings."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(work),
        "TMPDIR": str(work),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        **ONE_THREAD,
    }


#: how a fault names the process the submission's code ran in (a student knows no "worker")
SUBMISSION_PROCESS = "the submission's process"


def describe_exit(returncode: int, noise: str, memory: int) -> str:
    if "MemoryError" in noise:
        return out_of_memory(memory)
    if returncode >= 0:
        return f"{SUBMISSION_PROCESS} exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = {
        "SIGSEGV": " (often a stack overflow from unbounded recursion)",
        "SIGXFSZ": " (it wrote a file larger than the limit)",
    }.get(name, "")
    return f"{SUBMISSION_PROCESS} was killed by {name}{hint}"


def out_of_memory(memory: int) -> str:
    return f"{SUBMISSION_PROCESS} ran out of memory (limit {memory} MiB)"


def malformed(what: str) -> str:
    """A message from the sandbox that breaks the protocol: forged, truncated or huge."""
    return f"{SUBMISSION_PROCESS} sent a malformed {what}"


def _before_exec(confine: Callable[[], None] | None) -> None:
    stable_layout()
    if confine is not None:
        confine()


class WorkerProcess:
    """A started worker: `begin` a phase, `receive` its messages in order, `end` it (then
    another may begin); `close` the worker (always)."""

    def __init__(
        self,
        lib: Path,
        work: Path,
        job: dict[str, Any],
        limits: Limits,
        preexec: Callable[[], None] | None = None,
        wrapped: bool = False,
        switch_user: bool = False,
        grader: Path | None = None,
    ) -> None:
        """`wrapped`: start the worker inside bubblewrap (see `bwrap`); else `preexec` (if
        any) confines it between fork and exec. `switch_user`: the job names a user the
        worker becomes (the grader is root). `grader` (wrapped only): the copy of the
        grader's modules bound as `lib/grader`."""
        self.limits = limits
        self.wrapped = wrapped
        #: bwrap's first process inside the PID namespace (the worker's parent), if wrapped
        self.sandbox_init: int | None = None
        #: the worker's PID and its phase's child's, as the grader sees them, once found
        self._worker_pid: int | None = None
        self._child_pid: int | None = None
        #: whether the worker runs this phase itself (its last), not in a child
        self._inline = False
        #: the phase's process's size when its maps were last read (see `SandboxEngine._check`)
        self.maps_read_at: int | None = None
        #: /proc file name -> its open descriptor (see `read_proc`)
        self._proc_fds: dict[str, int] = {}
        result_r, result_w = os.pipe()
        noise_r, noise_w = os.pipe()
        command = [sys.executable, *PYTHON_FLAGS, "-c", BOOT, str(lib), str(result_w), json.dumps(job)]
        env = clean_env(work)
        if wrapped:
            inside = {**env, "TMPDIR": "/tmp"}  # the sandbox's own tmpfs
            command = [*bwrap.argv(lib, work, inside, switch_user, grader), bwrap.interpreter(), *command[1:]]
        try:
            self.proc = subprocess.Popen(
                command,
                cwd=work,
                env=env,
                stdin=subprocess.PIPE,  # one byte per step: go on
                stdout=noise_w,
                stderr=noise_w,
                pass_fds=(result_w,),  # bwrap passes it on
                start_new_session=True,  # its own process group: one killpg reaches every child
                preexec_fn=functools.partial(_before_exec, preexec),
            )
        finally:
            for fd in (result_w, noise_w):
                os.close(fd)
        self.result_fd, self.noise_fd = result_r, noise_r
        if wrapped:
            try:
                self.sandbox_init = bwrap.first_process(self.proc, time.monotonic() + STARTUP)
            except BaseException:  # e.g. Ctrl-C while bwrap starts: leave no worker behind
                self.close()
                raise
        self._listen(result_r, noise_r, limits)

    def _listen(self, result_r: int, noise_r: int, limits: Limits) -> None:
        """Read the worker's results and its noise from these pipes, without blocking."""
        self.result_fd, self.noise_fd = result_r, noise_r
        for fd in (result_r, noise_r):
            os.set_blocking(fd, False)
        self.poller = select.poll()
        for fd in (result_r, noise_r):
            self.poller.register(fd, select.POLLIN)
        self.frames = FrameReader(limits.message)
        self.pending: deque[bytes] = deque()
        self.noise = bytearray()
        self.eof = False
        self.noise_eof = False

    @property
    def pid(self) -> int:
        """The PID of the process that runs the phase as the grader sees it (for /proc/PID/maps
        and statm), found once it exists (-1 until then): the worker's only child, or the
        worker for its last phase. Wrapped, the worker is not bwrap's PID but its init's only
        child."""
        if self._inline:
            worker = self._worker()
            return worker if worker is not None else -1
        if self._child_pid is None:
            worker = self._worker()
            if worker is not None:
                self._child_pid = bwrap.only_child(worker)
        return self._child_pid if self._child_pid is not None else -1

    def _worker(self) -> int | None:
        if not self.wrapped:
            return self.proc.pid
        if self._worker_pid is None and self.sandbox_init is not None:
            self._worker_pid = bwrap.only_child(self.sandbox_init)
        return self._worker_pid

    def begin(self, phase: dict[str, Any]) -> None:
        """Have the worker fork a child that runs this phase, or, with `last` in it, run the
        phase itself and exit (see `grader.case.worker`)."""
        self._child_pid = None
        self._inline = bool(phase.get("last"))
        for fd in self._proc_fds.values():
            os.close(fd)
        self._proc_fds.clear()
        self.maps_read_at = None
        self.noise.clear()  # a stack dump of the last phase is no clue to this one
        try:
            self.proc.stdin.write(encode(phase))
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone: the next `receive` says how

    def end(self, seconds: float) -> bool:
        """After a phase's last case: wait up to `seconds` for its child to exit. True if it
        did, and left no other process behind it: the worker can begin another phase."""
        try:
            message = self._next(time.monotonic() + seconds)
        except Fault:
            return False
        if message.get("kind") != "ended":
            return False
        worker = self._worker()
        self._child_pid = None
        return worker is not None and bwrap.children(worker) == []

    def _drain_noise(self) -> None:
        if self.noise_eof:
            return
        try:
            while chunk := os.read(self.noise_fd, 1 << 16):
                self.noise += chunk
                del self.noise[:-NOISE_KEPT]
            self.noise_eof = True  # nobody holds its write end any more: stop polling it
            self.poller.unregister(self.noise_fd)
        except BlockingIOError:
            pass

    def read_noise(self) -> str:
        """What the worker wrote to its stdout and stderr, the last NOISE_KEPT bytes of it."""
        self._drain_noise()
        return self.noise.decode(errors="replace")

    def ask_stacks(self) -> bool:
        """Have the process that runs the phase dump its stacks into its noise, which starts
        afresh (`grader.case.hang`). False: there is no such process to ask."""
        pid = self.pid
        if pid < 0:
            return False
        self._drain_noise()
        self.noise.clear()
        try:
            os.kill(pid, hang.DUMP_SIGNAL)
        except OSError:
            return False
        return True

    def wait_noise(self, deadline: float) -> bool:
        """Wait until the worker writes more noise, or `deadline`. False: it will write no more
        by then (the time is up, or its output is closed)."""
        left = deadline - time.monotonic()
        if self.noise_eof or left <= 0:
            return False
        return bool(select.select([self.noise_fd], [], [], left)[0])

    def _read_results(self) -> None:
        try:
            while chunk := os.read(self.result_fd, 1 << 20):
                self.pending.extend(self.frames.feed(chunk))
            self.eof = True
        except BlockingIOError:
            pass
        except MalformedResult as exc:
            raise Fault(f"{malformed('result')}: {exc}") from None

    def read_proc(self, name: str) -> bytes | None:
        """The worker's /proc/PID/`name` as it is now (None: it cannot be read). Each file is
        opened once and read again from its start: the grader reads `statm` on every wait
        and `maps` after every case, and opening a /proc file costs more than reading it.
        An open /proc file stays the process's own: once it has exited, it reads empty."""
        pid = self.pid
        if pid < 0:
            return None
        fd = self._proc_fds.get(name)
        try:
            if fd is None:
                fd = self._proc_fds[name] = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            chunks, offset = [], 0
            while chunk := os.pread(fd, 1 << 16, offset):
                chunks.append(chunk)
                offset += len(chunk)
        except OSError:
            return None
        return b"".join(chunks)

    def mapped_pages(self) -> int | None:
        """The size of the phase's process's address space, in pages (None: it is gone)."""
        try:
            return int((self.read_proc("statm") or b"").split()[0])
        except (ValueError, IndexError):
            return None

    def _resident_mib(self) -> float:
        try:
            return int((self.read_proc("statm") or b"").split()[1]) * PAGE / (1 << 20)
        except (ValueError, IndexError):
            return 0.0

    def _exit_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"{SUBMISSION_PROCESS} closed the grader's result pipe"
        self._drain_noise()
        if self.wrapped:
            code = bwrap.exit_status(code)
        return describe_exit(code, self.noise.decode(errors="replace"), self.limits.memory)

    def receive(self, deadline: float) -> dict[str, Any]:
        """The phase's next message, or `Fault`/`Timeout` (the worker is then good only for
        `close`)."""
        message = self._next(deadline)
        if message.get("kind") == "ended":  # the child exited before its phase was over
            status = message.get("status")
            code = status if type(status) is int else 1
            raise Crash(describe_exit(code, self.read_noise(), self.limits.memory))
        return message

    def _next(self, deadline: float) -> dict[str, Any]:
        while not self.pending:
            if self.eof or self.proc.poll() is not None:
                self._read_results()  # what it wrote before exiting still counts
                if self.pending:
                    break
                raise Crash(self._exit_reason())
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("timed out")
            self.poller.poll(min(left, POLL) * 1000)
            self._drain_noise()
            self._read_results()
            if self._resident_mib() > self.limits.memory:
                raise Fault(out_of_memory(self.limits.memory))
        try:
            return decode(self.pending.popleft())
        except MalformedResult as exc:
            raise Fault(f"{malformed('result')}: {exc}") from None

    def proceed(self) -> None:
        """Let the worker go on to its next case."""
        try:
            self.proc.stdin.write(b"g")
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone: the next `receive` says how

    def ask_tape(self) -> None:
        """Have the worker send the tape of the case it just ran (see `grader.case.worker`)."""
        try:
            self.proc.stdin.write(ASK_TAPE)
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone: the next `receive` says how

    def close(self) -> None:
        """Kill the whole process group (wrapped: the PID namespace too), reap, close the pipes."""
        if self.sandbox_init is not None and self.proc.poll() is None:
            try:  # bwrap has not reaped it yet: the PID is still its init's; with it goes all inside
                os.kill(self.sandbox_init, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process always goes
            pass
        for fd in (self.result_fd, self.noise_fd, *self._proc_fds.values()):
            try:
                os.close(fd)
            except OSError:
                pass
        self._proc_fds.clear()
        try:
            self.proc.stdin.close()  # the file object owns that descriptor: never close it by number
        except OSError:
            pass
