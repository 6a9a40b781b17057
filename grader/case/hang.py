"""Where a timed-out case was stuck, so its message can say `in Value.backward (engine.py, line 42)`.

Each worker has `faulthandler` dump every thread's stack to its stderr when DUMP_SIGNAL
comes (`listen`, once). faulthandler's handler is C code, so the dump comes even from a loop
that never returns to Python's own signal handlers. The grader, when a case's time is up,
sends the signal, reads the dump from the worker's output, keeps the innermost frame of the
submission's own files in the thread that runs the cases, and only then kills the worker.
(Asked for at the timeout, the dump costs nothing until then; a watchdog armed before each
case, `faulthandler.dump_traceback_later`, started and joined a thread per case.)

Everything here is read from untrusted output: a submission can print a fake dump, and then
misleads only the message of a case that scores zero anyway. Names are bounded in length.
"""

from __future__ import annotations

import contextlib
import faulthandler
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

#: what asks a worker for its stacks
DUMP_SIGNAL = signal.SIGUSR1
#: a case within this many CPU seconds of its budget when the alarm rings has used it
CPU_SLACK = 0.0005
#: seconds after which an alarm whose exception was lost rings again
AGAIN = 0.05
FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)\s*$')
#: the worker's own frame, at the bottom of the stack of the thread that runs the cases
CASES_THREAD = "grader/case/worker.py"


def listen() -> None:
    """Worker side, once: on DUMP_SIGNAL, dump every thread's stack to stderr (the noise the
    grader reads). A child forked later inherits it."""
    faulthandler.register(DUMP_SIGNAL, file=sys.__stderr__, all_threads=True)


def where(dump: str, work: Path, given: frozenset[str] = frozenset()) -> tuple[str, int, str] | None:
    """Grader side: (file relative to the submission, line, function) of the innermost frame
    inside `work` in the dump's thread that runs the cases that is not one of the functions
    the template gives whole (`given`, the assignment's `GIVEN`), else of the innermost
    there, or None. A rule that loops making tensors is interrupted, as often as not, inside
    Tensor's constructor, which no student should change: the frame that called it is where
    the loop is, and what the message and the blame name (`run.describe_exception` says
    the same of a case out of CPU). Frames come innermost first, so a dump still being
    written already holds the one that counts, if it has it."""
    prefix = str(work).rstrip("/") + "/"
    frames = []
    for block in dump.split("\n\n"):
        if CASES_THREAD not in block:
            continue
        for line in block.splitlines():
            match = FRAME.match(line)
            if match and match["file"].startswith(prefix):
                file, number = match["file"][len(prefix) :], int(match["line"])
                frames.append((file[:200], number, qualified(work / file, number, match["func"])[:100]))
                if frames[-1][2] not in given:
                    return frames[-1]
    return frames[0] if frames else None


#: the largest source file whose functions `qualified` reads
MAX_SOURCE = 1 << 20


def qualified(path: Path, line: int, name: str) -> str:
    """`Value.backward` for the function `backward` running `line` of `path`. A dump names a
    function by its code's name alone, where a traceback names it with its class and the
    functions around it (`run.function_name`): read off the source, the message and the part
    the failure is laid at are the same from every front end. `name` where the file cannot
    tell (it is gone, too large, not Python, or holds no such function there)."""
    import ast  # only for a case that timed out

    try:
        if path.stat().st_size > MAX_SOURCE:
            return name
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return name
    found, todo = name, [(tree, "")]
    while todo:
        node, outer = todo.pop()
        for child in ast.iter_child_nodes(node):
            inside = outer
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not child.lineno <= line <= (child.end_lineno or child.lineno):
                    continue
                inside = f"{outer}{child.name}."
                if child.name == name and not isinstance(child, ast.ClassDef):
                    found = inside[:-1]  # the innermost such function is visited last
            todo.append((child, inside))
    return found


def complete(dump: str) -> bool:
    """Has the dump's thread that runs the cases been written out? Its bottom frames, the
    worker's own, come last."""
    at = dump.find(CASES_THREAD)
    return at >= 0 and "\n" in dump[at:]


def describe(location: tuple[str, int, str] | None) -> str:
    if location is None:
        return ""
    file, line, func = location
    return f" in {func} ({Path(file).name}, line {line})"


class CaseTimedOut(BaseException):
    """Raised inside the submission's code when a case has used its CPU budget. A
    BaseException, so that `except Exception` in the submission does not swallow it."""


class WallTimeout(BaseException):
    """Raised inside the code that runs when a case's wall-clock time is up (in-process
    grading, where no grader stands outside to kill a worker). A BaseException, as above."""


#: what a limit answers when its time comes: the exception to raise in the code that runs,
#: or the seconds to wait before it is asked again
Due = Callable[[], "type[BaseException] | float"]


def _signals_here() -> bool:
    """Can a limit use SIGALRM here? Not where the platform has none (Windows), nor outside
    the main thread (signals reach only that)."""
    has = hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")
    return has and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _alarm(seconds: float, due: Due) -> Iterator[None]:
    """`due()` is asked once `seconds` of wall time have passed, and its exception raised in
    the code that runs; it may ask to be asked again later instead. SIGALRM where there is
    one, else a watchdog thread (`_thread_alarm`): the same limits wherever students run.

    Should the exception be lost (raised while a `__del__` or a weakref callback runs, which
    Python only prints), it is raised again AGAIN seconds later, and so on until the block is
    over: a one-shot alarm would leave the code it should stop running for ever."""
    alarm = _signal_alarm if _signals_here() else _thread_alarm
    with alarm(seconds, due):
        yield


@contextlib.contextmanager
def _signal_alarm(seconds: float, due: Due) -> Iterator[None]:
    """`_alarm` with SIGALRM. An alarm set outside (pytest-timeout's, or an outer limit's)
    keeps its time: should it fall due first, its own handler runs then, as if this limit were
    not there. Afterwards all is as before: the outer alarm, if it has not rung, is set again
    for what is left of it, or to ring at once if it fell due meanwhile."""
    on = True
    outer_rang = False

    def ring(signum: int, frame: object) -> None:
        nonlocal outer_rang
        if not on:
            return
        if outer_due is not None and not outer_rang and time.monotonic() >= outer_due:
            outer_rang = True
            signal.setitimer(signal.ITIMER_REAL, max(started + seconds - time.monotonic(), 1e-6))
            previous(signum, frame)  # the outer alarm's own handler: it raises what it raises
            return
        answer = due()
        if isinstance(answer, float):
            signal.setitimer(signal.ITIMER_REAL, until_outer(answer))
            return
        signal.setitimer(signal.ITIMER_REAL, AGAIN)  # again, should this one be lost
        raise answer

    def until_outer(wait: float) -> float:
        """`wait`, or less if the outer alarm falls due sooner."""
        if outer_due is None or outer_rang:
            return wait
        return max(min(wait, outer_due - time.monotonic()), 1e-6)

    previous = signal.signal(signal.SIGALRM, ring)
    outer, repeat = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()
    # an outer alarm that rings first, with a handler to hand it to
    outer_due = started + outer if 0 < outer < seconds and callable(previous) else None
    signal.setitimer(signal.ITIMER_REAL, outer if outer_due is not None else seconds)
    try:
        yield
    finally:
        on = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0 and not outer_rang:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-6), repeat)


def _raise_in(thread: int, exception: type[BaseException]) -> None:
    """Have `exception` raised in `thread` at its next function call or loop iteration. (ctypes
    is imported here: only where there are no signals, and a student's run starts sooner.)"""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exception))


def _settle() -> None:
    """A function call: an exception the watchdog set and that was not raised yet is raised
    here. (Never drop it with `PyThreadState_SetAsyncExc(id, NULL)`: that leaves every thread
    checking for one at each bytecode, which slows the whole interpreter down for good.)"""


@contextlib.contextmanager
def _thread_alarm(seconds: float, due: Due) -> Iterator[None]:
    """`_alarm` without signals: a watchdog thread waits, asks `due()` and raises its answer in
    the thread that runs the block, between two of its bytecodes (a loop in Python code stops
    at once; code inside one long C call, when the call returns)."""
    target = threading.get_ident()
    over = threading.Event()

    def watch() -> None:
        wait = seconds
        while not over.wait(wait):
            answer = due()
            if isinstance(answer, float):
                wait = answer
                continue
            _raise_in(target, answer)
            wait = AGAIN

    watchdog = threading.Thread(target=watch, name="time limit", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        while True:  # a limit raised this late is over with its block: it must not escape
            try:
                over.set()
                watchdog.join()
                _settle()
                break
            except (CaseTimedOut, WallTimeout):
                continue


def _cpu_clock() -> Callable[[], float]:
    """The CPU time of the thread that runs the case, readable from any thread (the watchdog's
    too): other threads of the process are not the case's. In a student's own pytest, PyTorch
    has just answered in the same process and its thread pool spins on for a while, which
    the process's clock would charge to the case. Where a thread's clock cannot be read
    (Windows), the process's."""
    try:
        clock = time.pthread_getcpuclockid(threading.get_ident())
        time.clock_gettime(clock)
    except (AttributeError, OSError):
        return time.process_time
    return lambda: time.clock_gettime(clock)


@contextlib.contextmanager
def cpu_budget(seconds: float | None, wall: float | None = None) -> Iterator[None]:
    """Worker side: raise `CaseTimedOut` in whatever runs once this thread has used
    `seconds` of CPU time (None: no budget; `_cpu_clock`). CPU time, not wall time, so that a machine
    busy with other work does not cut a case short; the grader's wall-clock deadline stays
    behind it for code that swallows the exception or loops outside Python. In process,
    where no grader stands outside, `wall` is that deadline: `WallTimeout` once `wall`
    seconds have passed, whatever the CPU.

    The alarm is a wall-clock timer all the same. The kernel looks at CPU timers only at
    its tick (4 ms here), so a CPU timer of 10 ms rings after 12 to 16 ms, and a hung
    engine pays that on every case. A wall timer rings on time; the handler then reads the
    CPU clock and, if the case has had less CPU than its budget (the machine was busy),
    waits on for what is still due. Inside `wall_limit` (both use SIGALRM), the outer limit
    waits until this one is over. Where there is no SIGALRM (Windows), a watchdog thread does
    the same (`_thread_alarm`)."""
    if not seconds:
        yield
        return
    cpu = _cpu_clock()
    deadline = cpu() + seconds
    wall_deadline = time.monotonic() + wall if wall else None

    def due() -> type[BaseException] | float:
        left = deadline - cpu()
        if left <= CPU_SLACK:
            return CaseTimedOut
        if wall_deadline is not None:
            if wall_deadline - time.monotonic() <= 0:
                return WallTimeout
            left = min(left, wall_deadline - time.monotonic())
        return max(left, CPU_SLACK)

    with _alarm(seconds, due):
        yield


@contextlib.contextmanager
def wall_limit(seconds: float) -> Iterator[None]:
    """Raise `WallTimeout` in whatever runs once `seconds` of wall time have passed (with
    `seconds` <= 0, there is no limit)."""
    if seconds <= 0:
        yield
        return
    with _alarm(seconds, lambda: WallTimeout):
        yield
