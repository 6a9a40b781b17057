"""No threads for the submission: its verdict must be a function of its code alone.

A thread the submission starts runs beside the cases, and what it does to them (rewrite
gradients, print, write to the worker's descriptors) depends on when the scheduler lets it
run: two copies of one submission would get different verdicts. So the worker refuses
every Python thread from the moment the submission is imported: starting one raises
`ThreadsRefused` where the submission calls it, and the case that tried fails with that
reason, the same in every run. (The grader's own timers are C threads, untouched.)

This is the deterministic first line. A thread started around it (through ctypes) is seen
from outside by the grader, which counts the live worker's threads after every case
(`grader.verdict.integrity.extra_threads`) and faults the case.
"""

from __future__ import annotations

import _thread
import sys
from typing import NoReturn

MESSAGE = "starting a thread is not allowed in graded code: the grader runs every case in one thread"


class ThreadsRefused(RuntimeError):
    """Raised where the submission starts a thread."""


def _refuse(*args: object, **kwargs: object) -> NoReturn:
    raise ThreadsRefused(MESSAGE)


def refuse() -> None:
    """From now on, in this process, starting a Python thread raises `ThreadsRefused`."""
    for name in ("start_new_thread", "start_joinable_thread", "start_new"):
        if hasattr(_thread, name):
            setattr(_thread, name, _refuse)
    threading = sys.modules.get("threading")  # it keeps its own reference, taken at import
    if threading is not None:
        for name in ("_start_new_thread", "_start_joinable_thread"):
            if hasattr(threading, name):
                setattr(threading, name, _refuse)
