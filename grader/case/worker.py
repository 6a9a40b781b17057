"""The sandbox worker: runs cases on the submission and sends back plain numbers.

Started by the grader as `python -s -P -S -c BOOT LIB FD JOB` in a private copy of the
submission, with only the stdlib, numpy and LIB (a copy of the few grader modules it
needs and of the suite files) importable. It never sees an expected value: it gets case
ids, collects those cases itself, runs them, and writes one message per case to the pipe
FD. Everything it sends is untrusted by the grader, which parses it strictly.

One worker serves one assignment. It sets itself up once (its user, its limits, these
modules and the assignment's adapter imported) and then runs each *phase* the grader sends
on its stdin (one suite's cases: the public ones, then the hidden ones; the worker moves that
pipe off descriptor 0 first, and the submission's stdin is /dev/null) in a child forked
from it, one phase at a time: each phase starts from the same clean state, as a fresh
process would, for the cost of a fork instead of an interpreter's start. The worker itself
runs no student code and cannot be reached by it: the child installs the seccomp filter (no
signals to other processes, no tracing) before the submission is imported, and the worker
is not dumpable (no writing to its memory through /proc). When the child has exited, the
worker says so (`ended`, with the child's exit status) and waits for the next phase. The
last phase (the grader says which) the worker runs itself, and then exits: no fork, and no
copy of each page of the worker's memory the child writes to (Python writes reference
counts everywhere).

A phase's messages, in order: `collected` (before any student code runs; it also says
whether the seccomp filter is in force), then `ready` or `load_error`, then one `run` per
case id. After `ready` and after each `run` the child waits for a byte on that pipe: the grader
checks the live child (its memory map) before it accepts a result and lets it go on.

A `run` holds the case's named results but not its tape (every node's value and gradient):
only a diagnosis needs that, and only a case whose results are wrong gets one. So the grader,
which alone knows the expected results, answers a wrong case's `run` with ASK_TAPE, and the
child reads the tape of the case it just ran and sends it as a `tape` message. A deep case
of a correct submission thus never pays for reading, sending and parsing its tape.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource  # imported before the worker becomes its user, who may not read it
import signal
import site
import sys
from pathlib import Path
from typing import Any, NoReturn

from grader import assignments
from grader.case import hang, seccomp, threads
from grader.case.define import collect
from grader.case.limits import PROBE_CPU, case_garbage, probe, settle_garbage
from grader.case.loading import SubmissionError, running
from grader.case.run import Bounded, Run, describe_exception, exit_failure, exit_fault, run_case
from grader.case.wire import (
    ASK_TAPE,
    HEADER,
    MAX_NOTE,
    MAX_NOTES,
    MAX_TEXT,
    encode,
    run_to_wire,
    tape_to_wire,
)

BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from grader.case.worker import main; main(sys.argv[1:])"


def set_limits(memory_mib: int, file_mib: int) -> None:
    """Address space (numpy imports in ~100 MiB) and the size of any file written; no core dumps."""
    for which, mib in ((resource.RLIMIT_AS, memory_mib), (resource.RLIMIT_FSIZE, file_mib)):
        if mib:
            resource.setrlimit(which, (mib << 20, mib << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


PR_SET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_DUMPABLE = 1, 3, 4


def _prctl(option: int, value: int = 0) -> int:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        return -1


def die_with_parent() -> None:
    """Die with the parent process, however it dies (even SIGKILL leaves no worker spinning);
    exit now if it is gone already."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # not Linux: the grader's process-group kill still applies
    if os.getppid() != parent:  # the parent died before the signal was set
        os._exit(0)


def become(user: list[int] | None) -> None:
    """Before anything else: where the grader is root and names a user (Gradescope), become
    that unprivileged user for good, so the submission can read and write only what anyone
    may; then die with the grader. The death signal is set after the switch, which would
    clear it."""
    if user is not None:
        uid, gid = user
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)  # also drops every capability: root-ness cannot come back
        if os.getuid() != uid or os.geteuid() != uid:
            os._exit(125)
    die_with_parent()


class Channel:
    """The pipes to the grader: whole frames written in full to `fd`; its go-aheads read
    from `control` (see `take_control`)."""

    def __init__(self, fd: int, control: int) -> None:
        self.fd = fd
        self.control = control

    def send(self, obj: dict[str, Any]) -> None:
        data = memoryview(encode(obj))
        while data:
            data = data[os.write(self.fd, data) :]

    def wait(self) -> bytes:
        """Until the grader has checked this process (alive, no torch mapped) and says go on
        (or, after a run, asks for its tape): the byte it sent."""
        byte = os.read(self.control, 1)
        if not byte:
            os._exit(0)
        return byte


def take_control() -> int:
    """The grader's phases and go-aheads arrive on stdin: moved to another descriptor, and
    stdin becomes /dev/null. A submission that asks for input (`input()` left in a rule) then
    meets end of file at once, an EOFError its cases report, instead of waiting, case after
    case, on the grader's own pipe until each case's time is up."""
    control = os.dup(0)
    empty = os.open(os.devnull, os.O_RDONLY)
    os.dup2(empty, 0)
    os.close(empty)
    return control


def main(argv: list[str]) -> None:
    """The worker: its own process, set up once, then one forked child per phase."""
    lib, fd, job = Path(argv[0]), int(argv[1]), json.loads(argv[2])
    control = take_control()
    become(job.get("user"))
    set_limits(job["memory_mib"], job["file_mib"])
    hang.listen()  # the stacks, when the grader asks where a case is stuck
    assignments.get(job["assignment"])  # its adapter (and numpy, if it needs it) imported once
    site.setquit()  # exit() and quit(), which `-S` leaves out and every other Python has
    channel = Channel(fd, control)
    dumpable = _prctl(PR_GET_DUMPABLE)
    _prctl(PR_SET_DUMPABLE, 0)
    while (phase := read_phase(control)) is not None:
        child = 0 if phase.get("last") else os.fork()  # the last phase: this process runs it
        if child == 0:
            status = 1
            try:
                if dumpable > 0:
                    _prctl(PR_SET_DUMPABLE, dumpable)  # the child is as the worker was
                die_with_parent()
                both = {**job, **phase}
                serve(channel, both, collected(lib, both["assignment"], both["suite"]))
            except BaseException as exc:
                status = exit_status(exc)
            finally:
                os._exit(status)  # never back into this loop, whatever happened

        _, status = os.waitpid(child, 0)
        channel.send({"kind": "ended", "status": os.waitstatus_to_exitcode(status)})
    os._exit(0)


def exit_status(exc: BaseException) -> int:
    """What the interpreter would have exited with, had `exc` ended it (the child exits with
    `os._exit`, never into the worker's loop): `sys.exit`'s code, else the traceback printed
    to the output the grader keeps, and 1."""
    code = exc.code if isinstance(exc, SystemExit) else 1
    if not isinstance(exc, SystemExit):
        sys.excepthook(type(exc), exc, exc.__traceback__)
    elif code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    return (code or 0) & 0xFF


def read_phase(control: int) -> dict[str, Any] | None:
    """The grader's next phase (a framed JSON object on `control`), or None: no more."""
    header = _read_exactly(control, HEADER.size)
    if header is None:
        return None
    data = _read_exactly(control, HEADER.unpack(header)[0])
    return None if data is None else json.loads(data)


def _read_exactly(control: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = os.read(control, size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def collected(lib: Path, assignment: str, suite: str) -> dict[str, Any]:
    """The suite's cases by id, as the worker collects them from its own lib/."""
    return {c.id: c for c in collect(lib / "suites", [assignment], [suite])}


def serve(channel: Channel, job: dict[str, Any], cases: dict[str, Any]) -> NoReturn:
    """Everything after collecting, in the process that then runs the submission (already its
    user, within its limits): the filter, the submission's import, the cases, then exit."""
    name, ids = job["assignment"], job["ids"]
    filtered = seccomp.install()  # from here on: no new processes, no signals but to itself
    channel.send({"kind": "collected", "missing": [i for i in ids if i not in cases], "seccomp": filtered})

    work = Path.cwd()
    assignment = assignments.get(name)
    threads.refuse()  # before any of the submission's code: its verdict must not hang on timing
    try:
        modules = assignment.load(work)
    except SubmissionError as exc:
        channel.send({"kind": "load_error", "message": str(exc)[:MAX_TEXT]})
        os._exit(0)
    except BaseException as exc:  # sys.exit() at a module's top; a KeyboardInterrupt, its own here
        why = f"importing {name} failed: {import_stopped(exc, work)}"
        channel.send({"kind": "load_error", "message": why[:MAX_TEXT]})
        os._exit(0)
    told = len(modules.notes)
    channel.send({"kind": "ready", "notes": [n[:MAX_NOTE] for n in modules.notes[:MAX_NOTES]]})
    channel.wait()
    if job.get("probe"):
        try:
            hung, rules = probe(assignment, modules, job["probe"])
        except KeyboardInterrupt:  # a rule's own (no one presses Ctrl-C here): the cases say it
            hung, rules = False, []
        channel.send({"kind": "probe", "hung": hung, "rules": rules})
        channel.wait()
    budgets = job.get("cpu") or {}
    for case_id in ids:
        case = cases[case_id]
        if case_id in budgets:
            settle_garbage()
        buffer = Bounded()
        lib = None  # the case's backend, kept for ASK_TAPE
        with case_garbage(not case.trace):
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), running(modules):
                try:
                    with hang.cpu_budget(budgets.get(case_id)):
                        lib = assignment.engine(modules, trace=case.trace)
                        run = run_case(case, lib, [work], tape=False, given=assignment.given)
                except SystemExit as exc:  # the case's fault, as in process: the worker goes on
                    run = Run(failure=exit_failure(exc, [work]))
                except BaseException as exc:  # out of CPU; or a KeyboardInterrupt, the submission's own here
                    run = Run(failure=describe_exception(exc, [work], assignment.given))
            run.output = buffer.getvalue()
            run.notes, told = modules.notes[told:], len(modules.notes)
            channel.send(run_to_wire(case_id, run, tape=None))
            while channel.wait() == ASK_TAPE:
                tape = read_tape(lib, modules, values=run.failure is not None) if lib is not None else []
                channel.send(tape_to_wire(case_id, tape))
    os._exit(0)  # no atexit handlers, no waiting for the submission's threads


def import_stopped(exc: BaseException, work: Path) -> str:
    """What stopped the submission's import, in the in-process engine's words: the same
    submission gets the same message from every front end."""
    if isinstance(exc, SystemExit):
        return exit_fault(exit_failure(exc, [work]), during="")
    failure = describe_exception(exc, [work])
    said = f"{failure.type}: {failure.message}" if failure.message else failure.type
    return f"{said}{hang.describe(failure.where)}"


def read_tape(lib: Any, modules: Any, values: bool = False) -> list[dict[str, Any]]:
    """The tape of the case `lib` just ran, read as the case's own end would have read it:
    its reading may run the submission's code (each rule probed alone), so it prints nowhere
    and gets the case's timeout (the grader's wait), each rule PROBE_CPU of it; a tape that
    cannot be read is empty (the diagnosis says less). `values`: the nodes' values alone (a
    case that raised)."""
    lib.probe_cpu = PROBE_CPU
    with contextlib.redirect_stdout(Bounded()), contextlib.redirect_stderr(Bounded()), running(modules):
        try:
            return lib.read_values() if values else lib.read_tape()
        except BaseException:
            return []
