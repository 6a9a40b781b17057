"""The sandbox's run directories (`grader.sandbox.scratch`) under many runs at once, as
grade-class starts them: a run's sweep never takes another live run's directory, not even
one made a moment ago, while leftovers of dead runs still go."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import threading
import time
from pathlib import Path

from grader.sandbox import scratch

RUNS = 8  # threads making directories, each sweeping first, as every run does
ROUNDS = 150
SWEEPERS = 2  # and threads that do nothing but sweep


def test_no_run_loses_its_directory_to_a_concurrent_sweep(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    lost: list[str] = []
    made: list[int] = [0]
    stop = threading.Event()

    def run() -> None:
        for i in range(ROUNDS):
            try:
                with scratch.run_directory() as folder:
                    mark = folder / "mark"
                    mark.write_text(str(i))  # fails when a sweep took the directory already
                    time.sleep(0.0005)
                    if mark.read_text() != str(i) or not (folder / scratch.LOCK).is_file():
                        lost.append(f"{folder}: changed while in use")
                    made[0] += 1
            except OSError as exc:
                lost.append(f"{type(exc).__name__}: {exc}")

    def sweeper() -> None:
        while not stop.is_set():
            scratch.sweep(tmp_path)

    sweepers = [threading.Thread(target=sweeper) for _ in range(SWEEPERS)]
    runs = [threading.Thread(target=run) for _ in range(RUNS)]
    for thread in (*sweepers, *runs):
        thread.start()
    for thread in runs:
        thread.join()
    stop.set()
    for thread in sweepers:
        thread.join()
    assert lost == [], f"{len(lost)} of {RUNS * ROUNDS} runs lost their directory, e.g. {lost[0]}"
    assert made[0] == RUNS * ROUNDS
    assert list(tmp_path.iterdir()) == []


def test_leftovers_go_but_a_young_directory_being_made_stays(tmp_path):
    dead = Path(tempfile.mkdtemp(prefix=scratch.PREFIX, dir=tmp_path))
    (dead / scratch.LOCK).touch()  # its grader was killed: the lock is free
    young = Path(tempfile.mkdtemp(prefix=scratch.NEW_PREFIX, dir=tmp_path))
    (young / scratch.LOCK).touch()  # a run between making it and taking its lock
    old = Path(tempfile.mkdtemp(prefix=scratch.NEW_PREFIX, dir=tmp_path))
    (old / scratch.LOCK).touch()  # a run killed between those steps, long ago
    past = time.time() - scratch.UNLOCKED_GRACE - 60
    os.utime(old, (past, past))
    held = Path(tempfile.mkdtemp(prefix=scratch.PREFIX, dir=tmp_path))
    with open(held / scratch.LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a live run
        assert scratch.sweep(tmp_path) == sorted([dead, old])
    assert sorted(tmp_path.iterdir()) == sorted([young, held])


def test_removing_a_tree_never_changes_the_mode_of_its_parent(tmp_path, monkeypatch):
    """$TMPDIR holds every run's tree: a failure at the tree's own top must not close it."""
    parent = tmp_path / "tmp"
    tree = parent / "grader-sandbox-x"
    (tree / "work").mkdir(parents=True)
    parent.chmod(0o1777)
    real_rmdir, failed = os.rmdir, []

    def rmdir_failing_once_at_the_top(path, *args, **kwargs):
        if os.path.abspath(path) == str(tree) and not failed:
            failed.append(path)
            raise PermissionError(13, "Permission denied", path)
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir_failing_once_at_the_top)
    scratch.remove(tree)
    assert failed and not tree.exists()
    assert stat.S_IMODE(parent.stat().st_mode) == 0o1777
