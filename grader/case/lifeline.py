"""Ending a process together with the grader it serves, however the grader ends.

A process that holds one end of a pipe or socket whose other end only the grader holds
learns of the grader's end from the kernel: once every copy of that other end is closed
(the grader exited, or was SIGKILLed), `poll` reports a hang-up (a socket's peer is gone) or
an error (a pipe's write end has no reader left). `exit_with` waits for that in a thread,
so it works whatever the process is doing meanwhile: importing numpy, collecting a suite,
waiting for a child. Unlike a parent-death signal it does not depend on which process is
whose parent, nor on setting it before that parent dies (a hang-up that came first is
reported at once).

Runs inside the sandbox too (the warm server): imports nothing of the grader's.
"""

from __future__ import annotations

import os
import select
import threading

#: what poll reports, asked for or not, once the far end is gone (or the descriptor closed)
GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def exit_with(fd: int, status: int = 0) -> None:
    """From now on, `os._exit(status)` as soon as descriptor `fd` reports a hang-up or an
    error. The thread holds no lock while it waits: forking meanwhile is safe (the child
    has no such thread)."""

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, 0)  # no event asked for: only GONE can wake it
        while True:
            if any(events & GONE for _, events in poller.poll()):
                os._exit(status)

    threading.Thread(target=watch, name=f"exit-with-fd-{fd}", daemon=True).start()
