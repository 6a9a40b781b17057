"""Warm sandbox servers (`grader.sandbox.warm`, `grader.classgrade.warm`): a class graded from
warm servers gets the verdicts cold workers give; nothing one student's child leaves reaches
the next one's; a lost server costs only its own submission; no server outlives the run.

Lean: a few public cases per topic, a 1 s timeout, one or two slots."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from grader.case.define import collect
from grader.classgrade.cli import case_chooser
from grader.classgrade.engine import GRACE, LocalBackend, grade_class
from grader.classgrade.gradebook import Gradebook
from grader.classgrade.layout import discover
from grader.classgrade.runner import CaseRef, Job, sandbox_runs
from grader.classgrade.warm import WarmSlots
from grader.pipeline import SUITES_DIR, Request
from grader.sandbox import Limits, bwrap
from grader.sandbox import warm as sandbox_warm
from grader.verdict.oracle import Oracle
from tests.harness.classroom import kind_of, make_class
from tests.harness.processes import (
    grandchildren_in_group,
    process_group,
    processes_mentioning,
    wait_for,
)

pytestmark = pytest.mark.skipif(not bwrap.available(), reason="warm servers need bubblewrap")

REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(timeout=1.0, budget=60.0, memory=512)
HOSTILE = sorted(
    f"hostile-{p.name}"
    for p in (REPO / "tests" / "harness" / "hostile").iterdir()
    if (p / "micrograd").is_dir()
)


def lean_ids(per_topic: int = 2) -> set[str]:
    taken: dict[tuple[str, str], int] = defaultdict(int)
    ids = set()
    for case in collect(SUITES_DIR, ("micrograd", "needle"), ("public",)):
        if case.topic not in ("deep", "random") and taken[case.assignment, case.topic] < per_topic:
            taken[case.assignment, case.topic] += 1
            ids.add(case.id)
    return ids


LEAN = lean_ids()
REQUEST = Request(limits=LIMITS, keep=lambda case: case.id in LEAN)
MICROGRAD = [c for c in collect(SUITES_DIR, ["micrograd"], ["public"]) if c.id in lean_ids(1)]


def verdicts(report) -> list[tuple[str, str, float]]:
    return [(r.id, str(r.status), r.points) for r in report.results]


def _grade(root: Path, oracle: Oracle, book_path: Path, warm: bool, jobs: int = 2):
    subs = discover(root, book_path.parent / f"work-{book_path.stem}")
    with Gradebook(book_path) as book:
        backend = LocalBackend(jobs, LIMITS.budget + GRACE, warm=warm)
        run = grade_class(subs, case_chooser(REQUEST), oracle, book, backend, LIMITS, force=True)
        return {s: book.report(s) for s in run.graded}, run


def test_warm_verdicts_equal_cold(tmp_path, oracle):
    """The reference, the template, bug-bank submissions and every hostile one (two slots: all
    but the first two run on servers that served other students before)."""
    kinds = ["reference", "template", "bug-no-seed", "bug-matmul-batched-not-summed", *HOSTILE]
    make_class(tmp_path / "class", len(kinds), only=kinds)
    warm, warm_run = _grade(tmp_path / "class", oracle, tmp_path / "warm.db", warm=True)
    cold, cold_run = _grade(tmp_path / "class", oracle, tmp_path / "cold.db", warm=False)
    assert sorted(warm) == sorted(cold) and not warm_run.failed and not cold_run.failed
    for student in sorted(cold):
        assert verdicts(warm[student]) == verdicts(cold[student]), student
        assert warm[student].errors == cold[student].errors, student
        if not kind_of(student).startswith("hostile-"):
            assert [r.message for r in warm[student].results] == [r.message for r in cold[student].results]
    reference = [r for s, r in warm.items() if kind_of(s) == "reference"]
    assert reference and all(r.score == r.max_score for r in reference)


LEAVER = """
import _imp, importlib.machinery, os, pathlib, tempfile, time
from micrograd.engine import Value
for where in (pathlib.Path(tempfile.gettempdir()), pathlib.Path.cwd(), pathlib.Path.home()):
    try:
        (where / "left-by-a").write_text("secret of a")
        locked = where / "locked-by-a"
        locked.mkdir()
        (locked / "inside").write_text("secret of a")
        os.chmod(locked, 0)
    except OSError:
        pass
try:
    os.fork()  # the filter refuses it
except OSError:
    pass
try:
    os.kill(os.getppid(), 9)  # the server (or the sandbox's init): refused too
except OSError:
    pass
fresh = _imp.create_builtin(importlib.machinery.ModuleSpec("_thread", None))  # round the refusal
fresh.start_new_thread(lambda: time.sleep(3600), ())
"""

LOOKER = """
import os, pathlib, tempfile
from micrograd.engine import Value
seen = []
for where in (pathlib.Path(tempfile.gettempdir()), pathlib.Path.cwd(), pathlib.Path.home()):
    for folder, dirs, files in os.walk(where):
        seen += [name for name in dirs + files if name.endswith("-by-a")]
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
if seen or others:  # (an __init__.py that raises is only noted): every case fails instead
    Value.__add__ = Value.__mul__ = lambda self, other: f"a's leftovers: {seen} {others}"
"""


def _student(root: Path, name: str, init: str) -> None:
    shutil.copytree(REPO / "reference" / "micrograd", root / name / "micrograd")
    (root / name / "micrograd" / "__init__.py").write_text(init)


USERS = [None] + (["nobody"] if os.geteuid() == 0 else [])  # Gradescope: the grader is root


@pytest.mark.parametrize("user", USERS)
def test_nothing_a_child_leaves_reaches_the_next_student(tmp_path, oracle, user):
    """One slot: a writes files to /tmp, work/ and its home (some locked), tries to fork and to
    kill its server, and leaves a thread; b, graded next on the same servers, looks for all
    that (at import: seeing any breaks its engine) and must get full marks. Also where the
    grader is root and the children become an unprivileged user."""
    root = tmp_path / "class"
    _student(root, "a-leaver", LEAVER)
    _student(root, "b-looker", LOOKER)
    _student(root, "c-looker", LOOKER)
    subs = discover(root, tmp_path / "work")
    request = Request(limits=LIMITS, keep=lambda case: case.id in {c.id for c in MICROGRAD})
    with Gradebook(tmp_path / "book.db") as book:
        backend = LocalBackend(1, 120.0)
        run = grade_class(subs, case_chooser(request), oracle, book, backend, LIMITS, user=user)
        reports = {s: book.report(s) for s in run.graded}
    assert not run.failed
    for looker in ("b-looker", "c-looker"):
        results = [r for r in reports[looker].results if r.assignment == "micrograd"]
        assert results and all(r.passed for r in results), [r.message for r in results]
    assert (root / "a-leaver" / "micrograd").is_dir() and not list(root.rglob("*-by-a"))


def _job(path: Path) -> Job:
    return Job(path.name, path, tuple(CaseRef.of(c) for c in MICROGRAD), {}, LIMITS)


def test_a_lost_server_costs_only_its_own_submission(tmp_path, monkeypatch):
    """The server killed while its child loads a submission: that submission's cases fault
    with the reason; the slot's next submission gets a fresh server and full marks. A
    stopped server (it answers nothing): the submission goes on with cold workers."""
    slow = tmp_path / "slow"
    _student(tmp_path, "slow", "import time\ntime.sleep(5)\nfrom micrograd.engine import Value\n")
    good = tmp_path / "good"
    shutil.copytree(REPO / "reference" / "micrograd", good / "micrograd")
    with WarmSlots(1) as slots:
        lent = slots.lend(0, _job(good))
        (server,) = lent.values()
        assert all(
            r.fault is None and r.failure is None for r in sandbox_runs(_job(good), lent).runs.values()
        )
        slots.give_back(0, True)
        assert slots.slots[0] and server.ready()

        def kill_the_server_once_its_child_runs() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pid = server.pid()
                if pid and sandbox_warm._children(pid):
                    time.sleep(0.3)  # it has collected, and sleeps in the submission's import
                    os.kill(pid, signal.SIGKILL)
                    return
                time.sleep(0.01)

        killer = threading.Thread(target=kill_the_server_once_its_child_runs)
        killer.start()
        lent = slots.lend(0, _job(slow))
        faulted = sandbox_runs(_job(slow), lent).runs
        killer.join()
        assert faulted and all(r.fault and "SIGKILL" in r.fault for r in faulted.values()), faulted
        slots.give_back(0, True)
        assert not slots.slots[0]  # closed: it did not answer the ping
        lent = slots.lend(0, _job(good))
        (fresh,) = lent.values()
        assert fresh is not server
        runs = sandbox_runs(_job(good), lent).runs
        assert all(r.fault is None and r.failure is None for r in runs.values())

        monkeypatch.setattr(sandbox_warm, "ANSWER", 2.0)
        stopped = fresh.pid()
        os.kill(stopped, signal.SIGSTOP)
        try:
            runs = sandbox_runs(_job(good), lent).runs  # goes on cold
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        assert all(r.fault is None and r.failure is None for r in runs.values())
        assert not fresh.usable
        slots.give_back(0, True)
        assert not slots.slots[0]


def _servers(marker: str) -> list[int]:
    """Live warm servers (and their bwrap) whose command line mentions `marker`."""
    return processes_mentioning(marker, "grader.case.warm")


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


#: a grader SIGKILLed as soon as bwrap runs: before bwrap sets its own parent-death signal,
#: and before it lets its sandbox's first process (which has none) go on
KILLED_AS_IT_STARTS = """
import os, signal, subprocess, sys
from pathlib import Path
from grader.pipeline import SUITES_DIR
from grader.sandbox.warm import WarmServer
start = subprocess.Popen
def start_and_die(*args, **kwargs):
    start(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
subprocess.Popen = start_and_die
WarmServer.start(Path(sys.argv[1]), "micrograd", "public", SUITES_DIR, None)
"""


def test_a_server_whose_grader_is_killed_as_it_starts_ends(tmp_path):
    """Each time (bwrap used to report the sandbox's first process, to a grader that was gone,
    before letting it go on: it exited on the failed write, and that process waited for ever):
    the sandbox starts, its server finds its control socket hung up and ends, bwrap with it."""
    for attempt in range(3):
        root = tmp_path / f"server-{attempt}"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-c", KILLED_AS_IT_STARTS, str(root)], env=env, timeout=120)
        assert done.returncode == -signal.SIGKILL
        try:
            assert wait_for(lambda: not _servers(str(root)), 10), "the sandbox outlived the grader"  # noqa: B023
        finally:
            _kill(_servers(str(root)))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_server_outlives_the_run(tmp_path, oracle, sig):
    """Ctrl-C and SIGTERM end the servers on the way out; after a SIGKILL they die with the
    grader (and the next run sweeps their directory); a run that ends normally leaves none."""
    make_class(tmp_path / "class", 6, only=["reference", "hostile-loop_in_backward", "bug-no-seed"])
    private = tmp_path / "tmp"
    private.mkdir()
    argv = [
        sys.executable,
        "-m",
        "grader",
        "grade-class",
        str(tmp_path / "class"),
        "--out",
        str(tmp_path / "out"),
    ]
    argv += ["--jobs", "2", "--timeout", "1", "--cache-dir", str(oracle.cache_dir)]
    argv += [arg for case in MICROGRAD for arg in ("--only-cases", case.id.replace("[", "[[]"))]
    env = {**os.environ, "TMPDIR": str(private), "PYTHONPATH": str(REPO)}
    grader = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)  # fmt: skip
    working = lambda: bool(_servers(str(private))) and bool(grandchildren_in_group(grader.pid))  # noqa: E731
    try:
        assert wait_for(working, 120), "no warm server and pool slot started"
        grader.send_signal(sig)
        grader.communicate(timeout=30)  # its stderr: also the fork server's and the slots'
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()
    try:  # all end at once: each watches its link to the grader
        assert wait_for(lambda: _servers(str(private)) == [], 10), "a warm server outlived the grader"
        assert wait_for(lambda: process_group(grader.pid) == [], 10), "the pool outlived the grader"
    finally:
        _kill(_servers(str(private)) + process_group(grader.pid))
    if sig != signal.SIGKILL:
        assert grader.returncode == 128 + sig
        assert not list(private.glob("grader-sandbox-*/slot*")), "the servers' directories were left"
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _servers(str(private)) == [] and not list(private.glob("grader-sandbox-*"))


def test_dask_workers_fork_from_warm_servers(tmp_path, oracle, monkeypatch):
    """Each Dask worker thread keeps its own warm servers between tasks: the verdicts are
    those of cold workers, and the servers end with the cluster."""
    distributed = pytest.importorskip("distributed")
    from grader.classgrade.dask import DaskBackend

    make_class(tmp_path / "class", 8, only=["reference", "template", "bug-no-seed", "hostile-fake_results"])
    cold, _ = _grade(tmp_path / "class", oracle, tmp_path / "cold.db", warm=False)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))  # the workers' sandboxes, and nothing else, go here
    subs = discover(tmp_path / "class", tmp_path / "work-dask")
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client, Gradebook(tmp_path / "dask.db") as book:
            run = grade_class(
                subs, case_chooser(REQUEST), oracle, book, DaskBackend(client), LIMITS, force=True
            )
            warm = {s: book.report(s) for s in run.graded}
            assert not run.failed and _servers(str(private)), "no warm server kept between tasks"
    assert wait_for(lambda: _servers(str(private)) == [], 10), "a warm server outlived the cluster"
    assert sorted(warm) == sorted(cold)
    for student in sorted(cold):
        assert verdicts(warm[student]) == verdicts(cold[student]), student
