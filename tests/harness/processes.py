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


def cpu_seconds(pid: int) -> float:
    """The CPU time process `pid` has spent (user and system), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def process_group(pgid: int) -> list[int]:
    """PIDs of live processes (but this one) in process group `pgid`; zombies are dead."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            found.append(int(entry.name))
    return found


def parent_of(pid: int) -> int | None:
    """The PID of process `pid`'s parent, None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("PPid:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def grandchildren_in_group(leader: int) -> list[int]:
    """Processes of the group of `leader` (started in its own session) that are neither it
    nor its children: for a class run, what its fork server forked (the pool's slots)."""
    return [p for p in process_group(leader) if p != leader and parent_of(p) not in (leader, None)]
