"""The sandbox worker: runs cases on the submission and sends back plain numbers.

Started by the grader as `python -s -P -S -c BOOT LIB FD JOB` in a private copy of the
submission, with only the stdlib, numpy and LIB (a copy of the few grader modules it
needs and of the suite files) importable. It never sees an expected value: it gets case
ids, collects those cases itself, runs them, and writes one message per case to the pipe
FD. Everything it sends is untrusted by the grader, which parses it strictly.

Messages, in order: `collected` (before any student code runs; it also says whether the
seccomp filter is in force), then `ready` or `load_error`, then one `run` per case id.
After `ready` and after each `run` the worker waits for a byte on stdin: the grader
checks the live worker (its memory map) before it accepts a result and lets it go on.

A `run` holds the case's named results but not its tape (every node's value and gradient):
only a diagnosis needs that, and only a case whose results are wrong gets one. So the grader,
which alone knows the expected results, answers a wrong case's `run` with ASK_TAPE, and the
worker reads the tape of the case it just ran and sends it as a `tape` message. A deep case
of a correct submission thus never pays for reading, sending and parsing its tape.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource  # imported before the worker becomes its user, who may not read it
import signal
from pathlib import Path
from typing import Any, NoReturn

from grader import assignments
from grader.case import hang, seccomp, threads
from grader.case.define import collect
from grader.case.limits import PROBE_CPU, deep_case, probe, settle_garbage
from grader.case.loading import SubmissionError, running
from grader.case.run import Bounded, Run, describe_exception, run_case
from grader.case.wire import ASK_TAPE, MAX_NOTE, MAX_NOTES, MAX_TEXT, encode, run_to_wire, tape_to_wire

BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from grader.case.worker import main; main(sys.argv[1:])"


def set_limits(memory_mib: int, file_mib: int) -> None:
    """Address space (numpy imports in ~100 MiB) and the size of any file written; no core dumps."""
    for which, mib in ((resource.RLIMIT_AS, memory_mib), (resource.RLIMIT_FSIZE, file_mib)):
        if mib:
            resource.setrlimit(which, (mib << 20, mib << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


PR_SET_PDEATHSIG = 1


def become(user: list[int] | None) -> None:
    """Before anything else: where the grader is root and names a user (Gradescope), become
    that unprivileged user for good, so the submission can read and write only what anyone
    may; then die with the grader, however it dies (even SIGKILL leaves no worker spinning).
    The death signal is set after the switch, which would clear it."""
    parent = os.getppid()
    if user is not None:
        uid, gid = user
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)  # also drops every capability: root-ness cannot come back
        if os.getuid() != uid or os.geteuid() != uid:
            os._exit(125)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the grader's process-group kill still applies
    if os.getppid() != parent:  # the grader died before the signal was set
        os._exit(0)


class Channel:
    """The pipe to the grader: whole frames, written in full."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, obj: dict[str, Any]) -> None:
        data = memoryview(encode(obj))
        while data:
            data = data[os.write(self.fd, data) :]

    def wait(self) -> bytes:
        """Until the grader has checked this process (alive, no torch mapped) and says go on
        (or, after a run, asks for its tape): the byte it sent."""
        byte = os.read(0, 1)
        if not byte:
            os._exit(0)
        return byte


def main(argv: list[str]) -> None:
    """The worker: its own process, collecting the suite, then serving the job."""
    lib, fd, job = Path(argv[0]), int(argv[1]), json.loads(argv[2])
    become(job.get("user"))
    set_limits(job["memory_mib"], job["file_mib"])
    serve(fd, job, collected(lib, job["assignment"], job["suite"]))


def collected(lib: Path, assignment: str, suite: str) -> dict[str, Any]:
    """The suite's cases by id, as the worker collects them from its own lib/."""
    return {c.id: c for c in collect(lib / "suites", [assignment], [suite])}


def serve(fd: int, job: dict[str, Any], cases: dict[str, Any]) -> NoReturn:
    """Everything after collecting, in the process that then runs the submission (already its
    user, within its limits): the filter, the submission's import, the cases, then exit."""
    channel = Channel(fd)
    name, ids = job["assignment"], job["ids"]
    filtered = seccomp.install()  # from here on: no new processes, no signals but to itself
    channel.send({"kind": "collected", "missing": [i for i in ids if i not in cases], "seccomp": filtered})

    work = Path.cwd()
    assignment = assignments.get(name)
    hang.arm(job["load_timeout"])
    threads.refuse()  # before any of the submission's code: its verdict must not hang on timing
    try:
        modules = assignment.load(work)
    except SubmissionError as exc:
        channel.send({"kind": "load_error", "message": str(exc)[:MAX_TEXT]})
        os._exit(0)
    hang.disarm()
    told = len(modules.notes)
    channel.send({"kind": "ready", "notes": [n[:MAX_NOTE] for n in modules.notes[:MAX_NOTES]]})
    channel.wait()
    if job.get("probe"):
        hung, rules = probe(assignment, modules, job["probe"])
        channel.send({"kind": "probe", "hung": hung, "rules": rules})
        channel.wait()
    budgets = job.get("cpu") or {}
    for case_id in ids:
        case = cases[case_id]
        if case_id in budgets:
            settle_garbage()
        buffer = Bounded()
        hang.arm(job["timeouts"][case_id])
        lib = None  # the case's backend, kept for ASK_TAPE
        with deep_case(not case.trace):
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), running(modules):
                try:
                    with hang.cpu_budget(budgets.get(case_id)):
                        lib = assignment.engine(modules, trace=case.trace)
                        run = run_case(case, lib, [work], tape=False)
                except hang.CaseTimedOut as exc:
                    run = Run(failure=describe_exception(exc, [work]))
            hang.disarm()
            run.output = buffer.getvalue()
            run.notes, told = modules.notes[told:], len(modules.notes)
            channel.send(run_to_wire(case_id, run, tape=None))
            while channel.wait() == ASK_TAPE:
                tape = read_tape(lib, modules, job["timeouts"][case_id]) if lib is not None else []
                channel.send(tape_to_wire(case_id, tape))
    os._exit(0)  # no atexit handlers, no waiting for the submission's threads


def read_tape(lib: Any, modules: Any, seconds: float) -> list[dict[str, Any]]:
    """The tape of the case `lib` just ran, read as the case's own end would have read it:
    its reading may run the submission's code (each rule probed alone), so it prints nowhere
    and gets the case's timeout, each rule PROBE_CPU of it; a tape that cannot be read is
    empty (the diagnosis says less)."""
    lib.probe_cpu = PROBE_CPU
    hang.arm(seconds)
    with contextlib.redirect_stdout(Bounded()), contextlib.redirect_stderr(Bounded()), running(modules):
        try:
            return lib.read_tape()
        except BaseException:
            return []
        finally:
            hang.disarm()
