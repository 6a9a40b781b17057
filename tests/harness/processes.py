"""Watching processes from a test: which are alive, and waiting for a condition on them."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def processes_mentioning(*texts: str) -> list[int]:
    """PIDs of live processes (but this one) whose command line contains every one of `texts`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(text in cmdline for text in texts):
            found.append(int(entry.name))
    return found


def wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    """Whether `predicate()` came true within `seconds` (polled every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
