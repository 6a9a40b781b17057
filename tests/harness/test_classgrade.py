"""Grading a whole class (`grader.classgrade`): verdicts, the gradebook, resumption, shards,
Dask, layouts and exports.

The class is generated (tests/harness/classroom.py): the reference, the template, every bug
of both banks, every hostile submission and the layouts, one student of each kind and a
second of each kind that could tell one student's grading from another's (`TWICE`). To keep
CI lean it is graded on a lean selection of the real public suites (two cases per topic, no
deep chain or random search: each submission then costs two sandbox workers) with a 1 s
timeout; the kill test grades hidden cases too. A sample of kinds is graded alone with
`grade` and must get the same verdicts, and every student of a kind the same ones: the
grader fixes the order in which a micrograd node's children are visited, so even a bug whose
result depends on that order gets one verdict.
"""

from __future__ import annotations

import csv
import json
import operator
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from contextlib import ExitStack, closing
from functools import partial
from pathlib import Path

import pytest

from grader import intake
from grader.case.define import collect
from grader.classgrade.cli import case_chooser
from grader.classgrade.engine import GRACE, LocalBackend, grade_class
from grader.classgrade.exports import NBGRADER_COLUMNS, export_all
from grader.classgrade.gradebook import Gradebook
from grader.classgrade.layout import LayoutError, discover
from grader.classgrade.pool import Finished, ForkPool
from grader.classgrade.runner import cpu_count, sandbox_runs
from grader.pipeline import SUITES_DIR, Request, grade_submission, missing_assignments
from grader.report.model import Status
from grader.sandbox import Limits
from grader.sandbox.root import copy_grader
from tests.harness.classroom import SLOW, kind_of, kinds, make_class
from tests.harness.grading import grade
from tests.harness.processes import grandchildren_in_group, process_group, wait_for

REPO = Path(__file__).resolve().parents[2]
LIMITS = Limits(timeout=1.0, budget=60.0, memory=512)
#: the kinds a class holds two copies of, which must agree: every hostile and layout kind but
#: the slow ones (whatever one student's grading leaves behind would show in a copy's), and
#: the bugs whose result depends on the order of a node's children, which the grader fixes.
#: The other bugs are plain code, graded once.
ORDER_DEPENDENT = ("bug-mul-assigns", "bug-add-assigns", "bug-breadth-first-order")
TWICE = [k for k in kinds() if k not in SLOW and (not k.startswith("bug-") or k in ORDER_DEPENDENT)]
SIZE = len(kinds()) + len(TWICE)


def lean_ids() -> set[str]:
    """Two public cases of each (assignment, topic); no deep chain, no random search."""
    taken: dict[tuple[str, str, str], int] = defaultdict(int)
    ids = set()
    for case in collect(SUITES_DIR, ("micrograd", "needle"), ("public",)):
        group = (case.assignment, case.suite, case.topic)
        if case.topic not in ("deep", "random") and taken[group] < 2:
            taken[group] += 1
            ids.add(case.id)
    return ids


LEAN = lean_ids()
REQUEST = Request(limits=LIMITS, keep=lambda case: case.id in LEAN)


def verdicts(report) -> list[tuple[str, str, float]]:
    return [(r.id, str(r.status), r.points) for r in report.results]


@pytest.fixture(scope="module")
def klass(tmp_path_factory, oracle):
    root = tmp_path_factory.mktemp("class")
    students = make_class(root / "class", len(kinds()))
    students.update(make_class(root / "class", len(TWICE), only=TWICE, first=len(students)))
    subs = discover(root / "class", root / "work")
    book = Gradebook(root / "gradebook.db")
    backend = LocalBackend(cpu_count(), LIMITS.budget + GRACE)
    run = grade_class(subs, case_chooser(REQUEST), oracle, book, backend, LIMITS)
    yield root, students, subs, book, run
    book.close()


def test_every_student_is_graded_once(klass):
    root, students, subs, book, run = klass
    assert sorted(book.students()) == sorted(students)
    assert len(run.graded) == SIZE and not run.skipped
    for student, report in book.reports():
        count = book.db.execute("SELECT COUNT(*) FROM results WHERE student = ?", (student,)).fetchone()[0]
        assert count == len(report.results) > 0, student
    reference = [r for s, r in book.reports() if kind_of(s) == "reference"]
    assert reference and all(r.score == r.max_score for r in reference)
    empty = [r for s, r in book.reports() if kind_of(s) == "empty"]
    assert empty and all(r.score == 0 and r.results for r in empty)


def test_same_kind_same_verdicts(klass):
    """No student's grading leaks into another's: copies of one submission agree exactly."""
    _, students, _, book, _ = klass
    by_kind = defaultdict(list)
    for student, report in book.reports():
        by_kind[kind_of(student)].append(verdicts(report))
    repeated = [k for k, v in by_kind.items() if len(v) > 1]
    assert sorted(repeated) == sorted(TWICE)
    for kind in repeated:
        assert all(v == by_kind[kind][0] for v in by_kind[kind]), kind


SAMPLE = [
    "reference", "template", "nested", "empty", "needle-only", "bug-tanh-no-square", "bug-no-seed",
    "bug-matmul-batched-not-summed", "bug-topo-pre-order", "hostile-exit_in_backward", "hostile-fake_results",
    "hostile-torch_import", "hostile-unbounded_recursion", "hostile-output_flood", "hostile-loop_in_backward",
    "hostile-background_thread", "hostile-thread_around_refusal",
    # bugs whose result depends on the order of a node's children, which the grader fixes
    "bug-mul-assigns", "bug-add-assigns", "bug-breadth-first-order",
]  # fmt: skip


def test_class_grades_as_each_alone(klass, oracle):
    _, students, subs, book, _ = klass
    first = {}
    for sub in subs:
        first.setdefault(kind_of(sub.student), sub)
    for kind in SAMPLE:
        sub = first[kind]
        alone = grade(sub.path, "all", None, SUITES_DIR, oracle, limits=LIMITS, keep=REQUEST.keep)
        together = book.report(sub.student)
        assert verdicts(together) == verdicts(alone), kind
        if not kind.startswith("hostile-"):
            assert [r.message for r in together.results] == [r.message for r in alone.results], kind
        assert together.errors == alone.errors, kind


def test_hostile_submissions_stall_no_one(klass):
    _, _, _, book, run = klass
    for student in run.graded:
        info = book.info(student)
        assert info["state"] == "graded", (student, info["errors"])
        assert float(info["seconds"]) < LIMITS.budget + GRACE


def test_unchanged_is_skipped_changed_is_regraded(klass, oracle):
    root, students, subs, book, _ = klass
    target = [s for s in subs if kind_of(s.student) == "bug-tanh-no-square"][-1]
    engine = target.path / "micrograd" / "engine.py"
    engine.write_text(
        engine.read_text().replace("(1.0 - out.data) * out.grad", "(1.0 - out.data**2) * out.grad")
    )
    again = discover(root / "class", root / "work")
    run = grade_class(again, case_chooser(REQUEST), oracle, book, LocalBackend(2, 120.0), LIMITS)
    assert list(run.graded) == [target.student]
    assert len(run.skipped) == SIZE - 1
    fixed, before = run.graded[target.student], verdicts(book.report(subs[0].student))
    assert all(r.passed for r in fixed.results if r.assignment == "micrograd")  # needle is missing
    assert (
        book.report(target.student).score == fixed.score and verdicts(book.report(subs[0].student)) == before
    )


def test_exports(klass, tmp_path):
    _, students, _, book, _ = klass
    written = export_all(book, tmp_path)
    with (tmp_path / "grades.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == NBGRADER_COLUMNS
    reference = next(s for s in students if kind_of(s) == "reference")
    mine = {r["assignment"]: r for r in rows if r["student_id"] == reference}
    report = book.report(reference)
    assert set(mine) == {"micrograd", "needle"}
    assert sum(float(r["score"]) for r in mine.values()) == report.score == report.max_score
    with (tmp_path / "cases.csv").open() as fh:
        cases = list(csv.DictReader(fh))
    assert len(cases) == book.counts()[1]
    # each failure's row says where it is laid and the mistake it names, as its report does
    said = {(r["student_id"], r["case_id"]): (r["laid_at"], r["slip"]) for r in cases}
    failed = [(s, r) for s in students for r in book.report(s).results if not r.passed]
    assert failed and any(r.slip for _, r in failed)
    assert all(said[s, r.id] == (r.blame, r.slip) for s, r in failed)
    results = json.loads((tmp_path / "results" / reference / "results.json").read_text())
    assert results["score"] == report.score and len(results["tests"]) == len(report.results)
    assert len([p for p in written if p.name == "results.json"]) == SIZE
    assert (tmp_path / "pages" / "index.html").is_file() and len(
        list((tmp_path / "pages" / "students").iterdir())
    ) == SIZE


def test_dask_local_cluster_grades_like_the_pool(klass, oracle, tmp_path):
    distributed = pytest.importorskip("distributed")
    from grader.classgrade.dask import DaskBackend

    _, _, subs, book, _ = klass
    chosen = [
        s
        for s in subs
        if kind_of(s.student) in ("reference", "template", "bug-no-seed", "hostile-exit_at_import")
    ]
    chosen = list({kind_of(s.student): s for s in chosen}.values())
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            with Gradebook(tmp_path / "dask.db") as dask_book:
                run = grade_class(
                    chosen, case_chooser(REQUEST), oracle, dask_book, DaskBackend(client), LIMITS
                )
                assert sorted(run.graded) == sorted(s.student for s in chosen) and not run.failed
                for sub in chosen:
                    assert verdicts(dask_book.report(sub.student)) == verdicts(book.report(sub.student))


def test_shards_merge_without_loss_or_duplicates(klass, oracle, tmp_path):
    _, _, subs, book, _ = klass
    chosen = [s for s in subs if kind_of(s.student) in ("reference", "template", "micrograd-only", "empty")][
        :12
    ]
    shards = []
    for index in range(3):
        path = tmp_path / f"shard{index}.db"
        with Gradebook(path) as shard_book:
            grade_class(
                chosen,
                case_chooser(REQUEST),
                oracle,
                shard_book,
                LocalBackend(2, 120.0),
                LIMITS,
                shard=(index, 3),
            )
        shards.append(path)
    parts = [set(Gradebook(p).students()) for p in shards]
    assert sum(map(len, parts)) == len(chosen) and set().union(*parts) == {s.student for s in chosen}
    out = tmp_path / "merged.db"
    command = [sys.executable, "-m", "grader", "merge", str(out), *map(str, shards)]
    for _ in range(2):  # merging again adds nothing
        done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=REPO)
        assert done.returncode == 0, done.stderr
    with Gradebook(out) as merged:
        assert sorted(merged.students()) == sorted(s.student for s in chosen)
        assert merged.counts()[1] == sum(len(merged.report(s).results) for s in merged.students())
        for sub in chosen:
            assert verdicts(merged.report(sub.student)) == verdicts(book.report(sub.student))


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


KILL_CASES = ["micrograd/test_accumulation::*", "needle/test_matmul::*", "*/test_hidden_ops::*"]


def _rows(db: Path) -> dict[str, tuple[str, int]]:
    """student -> (graded_at, its result rows), read as another process would."""
    if not db.exists():
        return {}
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            subs = dict(conn.execute("SELECT student, graded_at FROM submissions"))
            counts = dict(conn.execute("SELECT student, COUNT(*) FROM results GROUP BY student"))
        except sqlite3.OperationalError:
            return {}
    return {s: (at, counts.get(s, 0)) for s, at in subs.items()}


def test_kill_9_then_resume(tmp_path, oracle_cache):
    students = make_class(
        tmp_path / "class", 8, only=["reference", "template", "bug-no-seed", "micrograd-only"]
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "grader", "grade-class", str(tmp_path / "class"), "--out", str(out),
               "--jobs", "2", "--timeout", "2", "--cache-dir", str(oracle_cache)]  # fmt: skip
    for pattern in KILL_CASES:
        command += ["--only-cases", pattern]
    db = out / "gradebook.db"
    proc = subprocess.Popen(command, env=_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: len(_rows(db)) >= 3 or proc.poll() is not None, 600)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what it had forked (they would end on their own)
        except ProcessLookupError:
            pass
    before = _rows(db)
    assert 3 <= len(before) < len(students), "the run was not stopped in the middle"
    expected_rows = {s: n for s, (_, n) in before.items()}
    assert all(n > 0 for n in expected_rows.values())  # whole submissions only
    done = subprocess.run(command, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    after = _rows(db)
    assert sorted(after) == sorted(students)
    for student, (graded_at, rows) in before.items():
        assert after[student] == (graded_at, rows), student  # not graded again
    with Gradebook(db) as book:
        subs, rows = book.counts()
        assert subs == len(students) and rows == sum(len(book.report(s).results) for s in students)
        for student in students:
            assert book.report(student).results
    forced = subprocess.run(
        [*command, "--force"], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=900
    )
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert all(_rows(db)[s][0] != after[s][0] for s in students)  # --force grades everyone again


def test_the_pool_reads_each_task_as_a_slot_frees_up():
    """A class's jobs are made as the pool asks for them: its first submission is graded
    while the next are still being unpacked, not after all of them."""
    made = []

    def tasks():
        for i in range(3):
            made.append(i)
            yield str(i), -i

    seen = [(f.key, f.value, list(made)) for f in ForkPool(1, deadline=60.0, preload=[]).run(abs, tasks())]
    assert seen == [("0", 0, [0, 1]), ("1", 1, [0, 1, 2]), ("2", 2, [0, 1, 2])]


def test_a_crashing_or_overrunning_worker_is_an_error_with_its_reason(tmp_path, oracle):
    pool = ForkPool(2, deadline=2.0, preload=[])
    tasks = [  # builtins only, so that the forked process has nothing to import
        ("kill", partial(signal.raise_signal, signal.SIGKILL)),
        ("exit", partial(os._exit, 3)),
        ("sleep", partial(time.sleep, 60)),
        ("ok", partial(abs, -2)),
    ]
    finished = {f.key: f for f in pool.run(operator.call, tasks)}
    assert "killed by SIGKILL" in finished["kill"].fault
    assert "exited with status 3" in finished["exit"].fault
    assert "longer than 2 s" in finished["sleep"].fault
    assert finished["ok"].value == 2 and finished["ok"].fault is None
    make_class(tmp_path / "class", 1, only=["reference"])
    subs = discover(tmp_path / "class", tmp_path / "work")
    with Gradebook(tmp_path / "book.db") as book:
        run = grade_class(subs, case_chooser(REQUEST), oracle, book, LocalBackend(1, 0.01), LIMITS)
        report = book.report(subs[0].student)
        assert run.failed and book.info(subs[0].student)["state"] == "error"
        assert report.score == 0 and all(r.status is Status.ERROR for r in report.results)
        assert "longer than 0.01 s" in report.results[0].message and report.errors


class InProcess:
    """A backend that runs each job in this process, one after another, so that the test
    sees what the sandbox did."""

    def run(self, jobs):
        for job in jobs:
            yield Finished(job.student, sandbox_runs(job))


def test_a_class_copies_the_graders_modules_once(tmp_path, oracle, monkeypatch):
    """Every submission's workers bind the class's one copy of the grader's worker modules
    (read-only: no student can change it for the next); the copy goes with the class run."""
    import grader.sandbox.engine as sandbox_engine

    if sandbox_engine.strongest_isolation() != "bubblewrap":
        pytest.skip("only bubblewrap workers bind a copy of the grader")
    copies = []

    def counted(dest):
        copies.append(dest)
        copy_grader(dest)

    monkeypatch.setattr(sandbox_engine, "copy_grader", counted)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    make_class(tmp_path / "class", 3, only=["reference", "template", "bug-no-seed"])
    subs = discover(tmp_path / "class", tmp_path / "work")
    keep = Request(limits=LIMITS, keep=lambda case: case.id in LEAN and case.assignment == "micrograd")
    with Gradebook(tmp_path / "book.db") as book:
        run = grade_class(subs, case_chooser(keep), oracle, book, InProcess(), LIMITS)
        reference = next(s for s in subs if kind_of(s.student) == "reference")
        assert book.report(reference.student).score == book.report(reference.student).max_score > 0
    assert len(run.graded) == 3 and not run.failed
    assert len(copies) == 1
    assert list((tmp_path / "tmp").iterdir()) == []  # the copy and every run's directory are gone


def test_layouts_zip_and_nbgrader(tmp_path):
    make_class(tmp_path / "src", 3, only=["reference", "nested", "template"])
    archive = tmp_path / "lms.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for folder in sorted((tmp_path / "src").iterdir()):
            if "template" in folder.name:  # handed in as a zip of its own
                inner = tmp_path / f"{folder.name}.zip"
                with zipfile.ZipFile(inner, "w") as izf:
                    for path in folder.rglob("*.py"):
                        izf.write(path, path.relative_to(folder).as_posix())
                zf.write(inner, f"{folder.name}.zip")
            else:
                for path in folder.rglob("*.py"):
                    zf.write(path, path.relative_to(tmp_path / "src").as_posix())
    subs = {s.student: s for s in discover(archive, tmp_path / "work")}
    assert len(subs) == 3
    expected = {
        "reference": {"micrograd", "needle"},
        "nested": {"micrograd"},
        "template": {"micrograd", "needle"},
    }
    for student, sub in subs.items():
        with ExitStack() as stack:  # as the class run prepares each: a student's zip unpacked
            directory = intake.prepare(sub.path, stack)
            missing = missing_assignments(directory, ("micrograd", "needle"))
            assert {"micrograd", "needle"} - set(missing) == expected[kind_of(student)], student
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../outside.py", "x = 1\n")
    with pytest.raises(LayoutError, match="leaves the archive"):
        discover(evil, tmp_path / "work2")
    assert not (tmp_path / "outside.py").exists()
    course = tmp_path / "course"
    for student in ("ann", "bo"):
        folder = course / "submitted" / student / "micrograd"
        shutil.copytree(REPO / "reference" / "micrograd", folder)
        (folder / "timestamp.txt").write_text("2025-01-15 12:00:00.000000 UTC")
    # the package one folder down, as `grader grade` finds it; debris beside it is no package
    nested = course / "submitted" / "cy" / "micrograd"
    shutil.copytree(REPO / "reference" / "micrograd", nested / "hw1" / "micrograd")
    (nested / "__MACOSX" / "micrograd").mkdir(parents=True)
    (nested / "__MACOSX" / "micrograd" / "engine.py").write_text("junk\n")
    found = discover(course, tmp_path / "work3")
    assert [s.student for s in found] == ["ann", "bo", "cy"]
    assert (found[0].path / "micrograd" / "engine.py").is_file() and found[0].timestamp.startswith("2025")
    assert (found[2].path / "micrograd" / "engine.py").read_bytes() == (
        REPO / "reference" / "micrograd" / "engine.py"
    ).read_bytes()
    assert missing_assignments(found[2].path, ("micrograd",)) == {}


NOT_NOTEBOOKS = {
    "not-json": ('{"cells": [', "cannot be read as a notebook"),
    "nested-too-deep": ("[" * 100_000 + "]" * 100_000, "cannot be read as a notebook"),
    "source-of-numbers": (
        json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": [1, 2], "metadata": {}}]}),
        "has a malformed cell",
    ),
}


@pytest.mark.parametrize("name", NOT_NOTEBOOKS)
def test_a_notebook_that_is_not_one_costs_its_assignment_only(name, tmp_path, oracle):
    """A submitted notebook that is not one (not JSON, JSON nested deeper than the parser
    allows, a cell's source of numbers): its assignment scores zero saying so, the student's
    other assignment grades as usual, and the class run goes on."""
    text, said = NOT_NOTEBOOKS[name]
    student = tmp_path / "course" / "submitted" / "dee"
    (student / "micrograd").mkdir(parents=True)
    (student / "micrograd" / "micrograd.ipynb").write_text(text)
    shutil.copytree(REPO / "reference" / "needle", student / "needle" / "needle")
    (sub,) = discover(tmp_path / "course", tmp_path / "work")
    cases = [c for c in collect(SUITES_DIR, ("micrograd", "needle"), ("public",)) if c.topic == "ops"]
    report = grade_submission(sub.path, Request("public", keep=lambda c: c in cases, sandbox=False), oracle)
    by_assignment = defaultdict(set)
    for r in report.results:
        by_assignment[r.assignment].add(r.status)
    assert by_assignment == {"micrograd": {Status.ERROR}, "needle": {Status.PASSED}}
    failed = next(r for r in report.results if r.assignment == "micrograd")
    assert f"micrograd.ipynb {said}" in failed.message, failed.message


def test_a_long_tmpdir_does_not_stop_the_pool(tmp_path):
    """The fork server listens on a Unix socket, whose path has room for 107 bytes: a deep
    $TMPDIR (a CI runner's, pytest's own) must not make the class run fail to start."""
    deep = tmp_path.joinpath(*["a-rather-long-folder-name"] * 4)
    deep.mkdir(parents=True)
    code = (
        "from grader.classgrade.pool import ForkPool\n"
        "done = list(ForkPool(1, 60.0, preload=[]).run(abs, [('k', -3)]))\n"
        "print(done[0].value, done[0].fault)\n"
    )
    env = {**os.environ, "TMPDIR": str(deep), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert len(str(deep)) > 107 and done.stdout.split() == ["3", "None"], done.stderr[-2000:]


def test_a_pool_process_ends_with_the_run():
    """A submission's process is the fork server's child, not the run's, and the fork server
    stays while it does: SIGKILLed, the run still takes both along at once, not when the
    submission is done (here in ten minutes)."""
    code = (
        "import time\n"
        "from grader.classgrade.pool import ForkPool\n"
        "list(ForkPool(1, 900.0, preload=[]).run(time.sleep, [('k', 600)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        assert wait_for(lambda: bool(grandchildren_in_group(run.pid)), 120), "no slot started"
        run.kill()
        run.wait()
        assert wait_for(lambda: not process_group(run.pid), 10), "a pool process outlived the run"
    finally:
        for pid in process_group(run.pid):
            os.kill(pid, signal.SIGKILL)


def test_user_mistakes_exit_2(tmp_path):
    """Each with one line that says what is wrong (the assignment given, when it is the one)."""
    for args, says in (
        (["grade-class", str(tmp_path / "missing")], "does not exist"),
        (["grade-class", str(tmp_path), "--shard", "3/2"], "--shard"),
        (["grade-class", "--nbgrader", str(tmp_path), "micrograd2"], "'micrograd2' is not an assignment"),
        (["grade-class", "--nbgrader", str(tmp_path)], "--nbgrader needs an assignment"),
        (["grade-class", "--nbgrader", str(tmp_path), "micrograd"], "not an nbgrader course root"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "grader", *args], env=_env(), cwd=REPO, capture_output=True, text=True
        )
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_each_assignment_graded_into_one_folder_stays_in_its_exports(tmp_path, oracle_cache):
    """A class graded for micrograd, then for needle, into the same folder: every export
    (grades.csv, cases.csv, results/, pages/) holds both, each as its last run graded it.
    Another program's `gradebook.db` there (nbgrader's, when OUT is its course) is neither
    exported nor written into."""
    students = make_class(tmp_path / "class", 3, only=["reference", "bug-tanh-no-square", "template"])
    out = tmp_path / "out"
    out.mkdir()
    nbgrader_like = out / "gradebook.db"
    with closing(sqlite3.connect(nbgrader_like)) as db:
        db.executescript("CREATE TABLE student (id TEXT); CREATE TABLE grade (score REAL);")
    tables = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    picked = {"micrograd": "micrograd/test_accumulation::*", "needle": "needle/test_matmul::*"}

    def grade_class_for(assignment: str, *more: str) -> None:
        command = [sys.executable, "-m", "grader", "grade-class", str(tmp_path / "class"), "--out", str(out),
                   "--jobs", "2", "--cache-dir", str(oracle_cache), "--assignment", assignment,
                   "--only-cases", picked[assignment], *more]  # fmt: skip
        done = subprocess.run(command, env=_env(), cwd=REPO, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]

    for assignment in picked:
        grade_class_for(assignment)
    books = {a: Gradebook(out / f"gradebook-{a}.db") for a in picked}
    try:
        graded = {(s, a): book.report(s) for a, book in books.items() for s in students}
    finally:
        for book in books.values():
            book.close()
    with (out / "grades.csv").open() as fh:
        rows = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(fh)}
    assert rows == {key: report.score for key, report in graded.items()}
    with (out / "cases.csv").open() as fh:
        cases = sorted((r["student_id"], r["case_id"]) for r in csv.DictReader(fh))
    assert cases == sorted((s, r.id) for (s, _), report in graded.items() for r in report.results)
    for student in students:
        results = json.loads((out / "results" / student / "results.json").read_text())
        assert len(results["tests"]) == sum(len(graded[student, a].results) for a in picked)
        assert results["score"] == pytest.approx(sum(graded[student, a].score for a in picked))
        page = (out / "pages" / "students" / f"{student}.html").read_text()
        assert all(assignment in page for assignment in picked)
    grade_class_for("micrograd", "--force")  # graded again: micrograd's rows are the newer, needle's stay
    with (out / "grades.csv").open() as fh:
        again = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(fh)}
    assert again == rows
    with closing(sqlite3.connect(nbgrader_like)) as db:
        assert db.execute(tables).fetchall() == [("grade",), ("student",)]
