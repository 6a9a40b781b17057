"""Stopping `python -m grader grade` with Ctrl-C (SIGINT) or SIGTERM while a worker spins:
the grader exits 130 or 143 with one line on stderr, and leaves no sandbox directory and no
process behind."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.case.define import collect
from grader.verdict.oracle import Oracle
from tests.harness.processes import cpu_seconds, processes_mentioning, wait_for

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
#: an import that never ends (with --timeout 600): the grader is busy until it is stopped (a
#: backward() that never returns would not do: the probe finds it, and grading ends in a second)
LOOP = ("import math\n", "import math\n\nwhile True:\n    pass\n")
STARTUP = 60.0  # seconds the grader may take to start its first worker (the oracle is cached)
MARGIN = 10.0  # seconds for killing the worker and removing its directory
#: CPU seconds a worker has spent once it is surely in the submission's loop: several times
#: what starting it costs
IN_THE_LOOP = 1.0


def spinning(private: Path) -> bool:
    """Whether a worker of the grader whose TMPDIR is `private` spins in the loop."""
    return any(cpu_seconds(pid) >= IN_THE_LOOP for pid in processes_mentioning(str(private)))


@pytest.fixture(scope="module")
def oracle(oracle_cache):
    """The run's oracle cache, holding the small suite's runs too: the commands these tests
    run read it (an oracle of its own, so that it writes what this process already knew)."""
    oracle = Oracle(oracle_cache)
    oracle.prepare(collect(SMALL, ["micrograd"], ["public"]), SMALL)
    return oracle


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    "sig, status, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_signal_stops_grading_cleanly(tmp_path, oracle, sig, status, word):
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    engine = sub / "micrograd" / "engine.py"
    engine.write_text(engine.read_text().replace(*LOOP))
    private = tmp_path / "tmp"  # the grader's TMPDIR: its sandboxes, and nothing else, go here
    private.mkdir()
    argv = [sys.executable, "-m", "grader", "grade", str(sub), "--assignment", "micrograd"]
    argv += ["--suite", "public", "--suites", str(SMALL), "--cache-dir", str(oracle.cache_dir)]
    argv += ["--timeout", "600"]
    grader = subprocess.Popen(
        argv,
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(private)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        started = wait_for(
            lambda: bool(list(private.glob("grader-sandbox-*")) and processes_mentioning(str(private))),
            STARTUP,
        )
        assert started, "no worker started"
        assert wait_for(lambda: spinning(private), STARTUP), "no worker reached the loop"
        grader.send_signal(sig)
        _, stderr = grader.communicate(timeout=MARGIN)
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()
    lines = stderr.decode().strip().splitlines()
    assert grader.returncode == status, stderr.decode()
    assert len(lines) == 1 and word in lines[0], lines
    assert list(private.iterdir()) == []
    assert wait_for(lambda: processes_mentioning(str(private)) == [], MARGIN), "a worker outlived the grader"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_after_a_sigkill_no_worker_spins_and_the_next_run_sweeps_the_directory(tmp_path, oracle):
    """SIGKILL gives the grader no chance to clean up: its workers die with it, and the next
    grading run removes the directory it left (its lock is free); a live run's is kept."""
    from grader.sandbox import scratch

    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    engine = sub / "micrograd" / "engine.py"
    engine.write_text(engine.read_text().replace(*LOOP))
    private = tmp_path / "tmp"
    private.mkdir()
    argv = [sys.executable, "-m", "grader", "grade", str(sub), "--assignment", "micrograd"]
    argv += ["--suite", "public", "--suites", str(SMALL), "--cache-dir", str(oracle.cache_dir)]
    argv += ["--timeout", "600"]
    env = {**os.environ, "TMPDIR": str(private)}
    grader = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = wait_for(
            lambda: bool(list(private.glob("grader-sandbox-*")) and processes_mentioning(str(private))),
            STARTUP,
        )
        assert started, "no worker started"
        assert wait_for(lambda: spinning(private), STARTUP), "no worker reached the loop"
    finally:
        grader.kill()
        grader.wait()
    assert wait_for(lambda: processes_mentioning(str(private)) == [], MARGIN), "a worker outlived the grader"
    (left,) = private.glob("grader-sandbox-*")
    assert any(left.rglob("engine.py"))  # the copy of the submission is still there

    live = Path(tempfile.mkdtemp(prefix=scratch.PREFIX, dir=private))  # as a running grader holds it
    with open(live / scratch.LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert scratch.sweep(private) == [left]
        assert live.exists()
    assert scratch.sweep(private) == [live]  # its grader gone, it goes too

    dead = Path(tempfile.mkdtemp(prefix=scratch.PREFIX, dir=private))
    (dead / scratch.LOCK).touch()
    argv[4] = str(REPO / "reference")
    argv[-1] = "10"
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True)  # a real run sweeps too
    assert done.returncode == 0, done.stderr
    assert list(private.iterdir()) == []
