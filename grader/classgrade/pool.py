"""Fresh worker processes forked from a warm one, each with a deadline.

A fork server (multiprocessing's `forkserver`, started once per class) imports numpy, the
case package and the pipeline; every submission then runs in a new process forked from it,
so it starts warm, and never in a process that served another student. Each process gets a
wall-clock deadline: past it, or when it dies without an answer, the submission gets a
fault with the reason and the others go on; a slow or hostile submission holds one slot
for at most its deadline. A submission's process ends with the class run, even SIGKILLed:
nothing else would end it before its submission is done (it is the fork server's child, and
the fork server stays while its children hold a copy of its own lifeline), so it watches its
result pipe and exits once no one is left to read it (`exit_with`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.util
import os
import select
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

#: imported once, in the fork server, before any submission's process is forked from it
PRELOAD = ["numpy", "grader.pipeline", "grader.classgrade.runner", "grader.classgrade.warm"]


@dataclass
class Finished:
    """One task's end: its value, or why there is none (`fault`)."""

    key: str
    value: Any = None
    fault: str | None = None
    seconds: float = 0.0  # wall time from start to answer


#: what poll reports, asked for or not, once the far end is gone (or the descriptor closed)
GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def exit_with(fd: int) -> None:
    """From now on, exit as soon as descriptor `fd` reports a hang-up or an error: once every
    copy of a pipe's other end is closed (the class run exited, or was SIGKILLed), `poll`
    says so. A thread waits for it, whatever the process does meanwhile; it holds no lock
    while it waits, so forking meanwhile is safe (the child has no such thread)."""

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, 0)  # no event asked for: only GONE can wake it
        while True:
            if any(events & GONE for _, events in poller.poll()):
                os._exit(0)

    threading.Thread(target=watch, name=f"exit-with-fd-{fd}", daemon=True).start()


def _serve(conn: Connection, fn: Callable[[Any], Any], arg: Any) -> None:
    """In the forked process: run, send the value (or the grader's own traceback), exit.
    It ends at once if the class run does (its end of `conn` closes, even on SIGKILL): it is
    the fork server's child, and nothing else would stop it before its submission is done."""
    exit_with(conn.fileno())
    try:
        result: tuple[str, Any] = ("ok", fn(arg))
    except BaseException as exc:  # the grader's failure in this worker: reported, not raised
        result = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"[-4000:])
    try:
        conn.send(result)
    finally:
        conn.close()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the grader's worker for this submission stopped answering"
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the grader's worker for this submission was killed by {name}"
    return f"the grader's worker for this submission exited with status {code} before answering"


#: the longest temporary directory under which the fork server's socket still fits: a Unix
#: socket's path has room for 107 bytes, and multiprocessing adds `/pymp-*/listener-*` (33)
LONGEST_TMPDIR = 107 - 34


@contextlib.contextmanager
def _socket_room() -> Iterator[None]:
    """Where $TMPDIR is too long a path for the fork server's socket ("AF_UNIX path too
    long": a CI runner's or pytest's nested temporary directory), have multiprocessing put
    its own directory under /tmp instead; the grader's other files stay under $TMPDIR."""
    if len(tempfile.gettempdir()) <= LONGEST_TMPDIR:
        yield
        return
    previous = tempfile.tempdir
    tempfile.tempdir = next((d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.access(d, os.W_OK)), None)
    try:
        multiprocessing.util.get_temp_dir()  # made now, and kept for the process's lifetime
        yield
    finally:
        tempfile.tempdir = previous


class ForkPool:
    """Runs `fn(arg)` for each task in a fresh process forked from a warm fork server."""

    def __init__(self, jobs: int, deadline: float, preload: list[str] | None = None) -> None:
        self.jobs = max(1, jobs)
        self.deadline = deadline
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD if preload is None else preload)
        with _socket_room():
            multiprocessing.forkserver.ensure_running()

    def run(self, fn: Callable[[Any], Any], tasks: Iterable[tuple[str, Any]]) -> Iterator[Finished]:
        """Yield each task's `Finished` as it comes (not in order); at most `jobs` at once.
        `tasks` is read as slots free up: the first task runs while the next are being made."""
        todo = iter(tasks)
        running: dict[Connection, tuple[str, Any, float]] = {}
        started: dict[str, float] = {}

        def start_some() -> None:
            while len(running) < self.jobs and (task := next(todo, None)) is not None:
                key, arg = task
                receiver, sender = self.ctx.Pipe(duplex=False)
                process = self.ctx.Process(target=_serve, args=(sender, fn, arg), daemon=True)
                started[key] = time.monotonic()
                process.start()
                sender.close()
                running[receiver] = (key, process, time.monotonic() + self.deadline)

        try:
            start_some()
            while running:
                soonest = min(end for _, _, end in running.values())
                ready = wait(list(running), timeout=max(0.0, min(soonest - time.monotonic(), 1.0)))
                done = []
                for conn in ready:
                    key, process, _ = running.pop(conn)
                    finished = self._collect(key, conn, process)
                    finished.seconds = time.monotonic() - started[key]
                    done.append(finished)
                now = time.monotonic()
                for conn, (key, process, end) in list(running.items()):
                    if now > end:
                        del running[conn]
                        process.kill()
                        process.join()
                        conn.close()
                        late = f"grading took longer than {self.deadline:g} s and was stopped"
                        done.append(Finished(key, fault=late, seconds=self.deadline))
                start_some()  # the freed slots work while the caller scores what came back
                yield from done
        finally:
            for conn, (_, process, _) in running.items():
                process.kill()
                process.join()
                conn.close()

    @staticmethod
    def _collect(key: str, conn: Connection, process: Any) -> Finished:
        try:
            status, value = conn.recv()
        except (EOFError, OSError):
            process.join(5)
            return Finished(key, fault=_exit_reason(process.exitcode))
        finally:
            conn.close()
        process.join(5)
        if process.exitcode is None:
            process.kill()
            process.join()
        if status != "ok":
            return Finished(key, fault=f"the grader failed on this submission: {value}")
        return Finished(key, value)
