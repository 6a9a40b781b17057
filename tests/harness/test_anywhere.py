"""A student's own run works where Windows leaves it: no SIGALRM, no `setitimer`, no
`resource` module and no `fork`. The time limits then come from a watchdog thread.

Each test runs the student's loop (`python -m pytest` with the grader's plugin, on a graded
suite, without pytest-timeout) in a fresh interpreter whose `sitecustomize` takes those away
before anything else is imported, and asserts verdicts, never durations: a correct
submission passes every case, and one whose relu rule never returns fails exactly the cases
that run it, each as timed out, while the run ends.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.case import hang
from tests.harness.test_hang import relu_looping

REPO = Path(__file__).resolve().parents[2]

#: what the interpreter has taken away before the run starts
WINDOWS_LIKE = """
import os, signal, sys
for name in ("SIGALRM", "setitimer", "getitimer", "ITIMER_REAL", "alarm"):
    if hasattr(signal, name):
        delattr(signal, name)
for name in ("fork", "forkpty"):
    if hasattr(os, name):
        delattr(os, name)
sys.modules["resource"] = None  # `import resource` raises ImportError
"""

SUITE = "tests/public/micrograd/test_ops.py"


def student_run(tmp_path: Path, impl: Path) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
    """`python -m pytest SUITE --impl=IMPL` without pytest-timeout, in an interpreter without
    signals' alarms, `resource` or `fork`: how it ended, and each test's failure message
    ("" when it passed)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(WINDOWS_LIKE)
    env = {"PYTHONPATH": f"{site}:{REPO}", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    argv = [sys.executable, "-m", "pytest", SUITE, f"--impl={impl}", "-p", "no:timeout"]
    report = tmp_path / "report.xml"
    argv += ["-p", "no:cacheprovider", "-q", f"--junitxml={report}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    verdicts = {}
    if report.exists():
        for test in ET.parse(report).getroot().iter("testcase"):
            failure = test.find("failure")
            verdicts[test.get("name", "")] = "" if failure is None else failure.get("message", "failed")
    return done, verdicts


def test_where_no_signal_reaches_a_watchdog_thread_ends_the_code():
    """Outside the main thread, as where there is no SIGALRM at all, the limits still hold: a
    loop in Python code is stopped by its CPU budget and by its wall-clock limit alike, and
    nothing is raised once a block is over."""
    caught: list[type[BaseException]] = []

    def limited() -> None:
        started = time.process_time()
        try:
            with hang.cpu_budget(0.01):
                while time.process_time() - started < 5:
                    pass
        except hang.CaseTimedOut:
            caught.append(hang.CaseTimedOut)
        try:
            with hang.wall_limit(0.05):
                while True:
                    pass
        except hang.WallTimeout:
            caught.append(hang.WallTimeout)
        with hang.wall_limit(0.05):
            pass
        end = time.monotonic() + 0.2
        while time.monotonic() < end:  # an alarm of a block that is over never rings
            pass
        caught.append(type(None))

    thread = threading.Thread(target=limited)
    thread.start()
    thread.join(timeout=30)
    assert caught == [hang.CaseTimedOut, hang.WallTimeout, type(None)]


def test_without_signals_resource_or_fork_a_correct_submission_passes(tmp_path):
    done, verdicts = student_run(tmp_path, REPO / "reference")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert verdicts and not any(verdicts.values())


def test_without_signals_resource_or_fork_a_looping_rule_fails_only_its_cases(tmp_path):
    """relu's rule never returns: its cases fail as timed out within their budget, the run
    ends, and every other case passes."""
    (tmp_path / "sub").mkdir()
    done, verdicts = student_run(tmp_path, relu_looping(tmp_path / "sub"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    runs_relu = {name for name in verdicts if name.startswith(("test_backward[relu", "test_rule[relu"))}
    assert runs_relu and {name for name, message in verdicts.items() if message} == runs_relu
    for name in runs_relu:
        assert "timed out" in verdicts[name] and "relu._backward" in verdicts[name], verdicts[name]
    assert any(
        name.startswith("test_forward[relu") for name in verdicts
    )  # applies relu, runs no rule: passed


def test_without_signals_resource_or_fork_a_loop_at_import_fails_every_case_once(tmp_path):
    """engine.py loops at its top: the import's time limit (a watchdog thread here) ends it
    once, every case fails saying so, and the run ends."""
    shutil.copytree(REPO / "reference" / "micrograd", tmp_path / "sub" / "micrograd")
    engine = tmp_path / "sub" / "micrograd" / "engine.py"
    engine.write_text("while True:\n    pass\n" + engine.read_text())
    done, verdicts = student_run(tmp_path, tmp_path / "sub")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert verdicts and all(
        "importing micrograd failed: timed out after 10 s in <module> (engine.py, line" in message
        for message in verdicts.values()
    ), verdicts
