"""The class run's warm sandbox servers: per parallel slot, one per (assignment, suite).

The local pool runs at most `jobs` submissions at once, each in a slot; a slot keeps its own
warm servers (`grader.sandbox.warm`), started when a submission first needs them and lent to
each submission that runs there, one at a time. So each submission's workers start warm,
each in a fresh child that never ran another student's code, and no two submissions ever
share a server at the same moment.

After a submission, its slot's servers are checked before the next one gets them: a server
that does not answer a ping at once (it died, a child stopped it, it is out of step), or any
server of a slot whose submission's process was killed or died mid-way, is closed and a fresh
one started on the next need. The servers live in this process's locked scratch directory
and die with it: on the normal end and on Ctrl-C `close` ends them; after a SIGKILL bubblewrap's
`--die-with-parent` does, or the server itself once its control socket is hung up (this
process and the pool's slots, which end with it, are gone), and the next run sweeps the
directory.

Only where bubblewrap isolates workers: elsewhere (the home-made namespaces, none) every
worker starts cold, as `grade` starts them. On a Dask worker each of its threads is a slot
(`thread_slot`): the worker process keeps the servers, and they die with the thread that
started them, or with the process.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import threading
from pathlib import Path
from types import TracebackType

from grader.classgrade.runner import Job
from grader.sandbox import bwrap, scratch
from grader.sandbox.engine import resolve_user
from grader.sandbox.root import SandboxError
from grader.sandbox.warm import WarmServer

Key = tuple[str, str, str]  # (assignment, suite, suites directory)


class WarmSlots:
    """The warm servers of `slots` slots; use as a context manager (it owns their processes)."""

    def __init__(self, slots: int, user: str | None = None) -> None:
        self.user = resolve_user(user)
        self.enabled = bwrap.available(self.user is not None)
        self.slots: dict[int, dict[Key, WarmServer]] = {slot: {} for slot in range(slots)}
        self._names = itertools.count()
        self._stack = contextlib.ExitStack()
        self.folder: Path | None = None
        #: why servers could not start, if they could not (the submissions then start cold)
        self.failures: list[str] = []

    def __enter__(self) -> WarmSlots:
        if self.enabled:
            self.folder = self._stack.enter_context(scratch.run_directory())
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def lend(self, slot: int, job: Job) -> dict[Key, WarmServer]:
        """The slot's servers for the job's suites, started where missing (none if the sandbox
        is not bubblewrap's, or a server cannot start: those suites' workers start cold)."""
        if not self.enabled or self.folder is None:
            return {}
        servers = self.slots.setdefault(slot, {})
        lent: dict[Key, WarmServer] = {}
        for key in sorted({(c.assignment, c.suite, str(c.suites_dir)) for c in job.cases}):
            server = servers.get(key)
            if server is None or not server.usable:
                assignment, suite, suites_dir = key
                root = self.folder / f"slot{slot}-{suite}-{assignment}-{next(self._names)}"
                try:
                    server = WarmServer.start(root, assignment, suite, Path(suites_dir), self.user)
                except (SandboxError, OSError) as exc:
                    self.failures.append(str(exc))
                    continue
                servers[key] = server
            lent[key] = server
        return lent

    def give_back(self, slot: int, clean: bool) -> None:
        """The slot's submission is done: keep the servers that answer a ping now, close the
        others (all of them if its process did not end cleanly: they may be mid-child)."""
        servers = self.slots.setdefault(slot, {})
        for key, server in list(servers.items()):
            if not (clean and server.ready()):
                server.close()
                del servers[key]

    def close(self) -> None:
        """End every server, then remove the scratch directory."""
        try:
            for servers in self.slots.values():
                while servers:
                    _, server = servers.popitem()
                    server.close()
        finally:
            self._stack.close()


_process_slots: WarmSlots | None = None
_process_lock = threading.Lock()
_thread = threading.local()
_numbers = itertools.count()


def thread_slot(user: str | None) -> tuple[WarmSlots, int]:
    """For a process that grades in several threads at once (a Dask worker): this process's
    warm slots, made on first use and closed when it exits, and the calling thread's own slot
    (its servers are never lent to another thread)."""
    global _process_slots
    with _process_lock:
        if _process_slots is None:
            _process_slots = WarmSlots(0, user).__enter__()
            atexit.register(_process_slots.close)
    if not hasattr(_thread, "slot"):
        _thread.slot = next(_numbers)
    return _process_slots, _thread.slot
