"""The course under assignments/ with real nbgrader and a real kernel, end to end.

generate_assignment -> submissions -> autograde -> generate_feedback -> export, and meanwhile
the same submissions graded by the fast path (`grade-class --nbgrader`). Scores must equal the grader's own
on the code extracted from each notebook; feedback must not show hidden cases, and must show
after the fast path what it shows after autograde; writing the same scores into the gradebook
directly must export the same. Takes a few minutes (most of it one kernel per submission).
"""

from __future__ import annotations

import concurrent.futures
import csv
import html as html_module
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import warnings

import nbformat
import pytest

from grader.authoring.leaks import scan, secrets
from grader.authoring.nbgrader_io import cell_scores, write_grades
from grader.classgrade.gradebook import Gradebook as ClassGradebook

if importlib.util.find_spec("nbgrader") is None:  # found, not imported: collection stays quick
    pytest.skip("nbgrader is not installed (the nbgrader extra)", allow_module_level=True)

from tests.harness.nbgrader_course import (  # noqa: E402 (needs nbgrader)
    REPO,
    cell_points,
    edit,
    environment,
    export,
    fast_path,
    filled,
    formgrader_view,
    make_course,
    nbgrader,
    released,
    submit,
)

#: waits for ever on the 10**5-op chain, the deep cell's largest graph: each grading of the
#: course waits for that case's time limit once (asleep: the CPU serves the other gradings)
HANG = (
    "        while len(topo) > 50_000:  # waits forever on the deepest graph\n"
    "            __import__('time').sleep(0.05)\n"
    "        self.grad = 1.0\n"
)
#: waits forever on deep graphs after stopping every interval timer, the case time limit's
#: too: only nbgrader's cell timeout (an interrupt) ends it, and the whole cell scores 0, as
#: every case of it does in the graders' own report. It sleeps rather than spins: stuck is
#: stuck, and the CPU serves the other tests meanwhile
STUCK = (
    "        while len(topo) > 500:  # stuck on deep graphs\n"
    "            __import__('signal').setitimer(__import__('signal').ITIMER_REAL, 0)\n"
    "            __import__('time').sleep(0.05)\n"
    "        self.grad = 1.0\n"
)
#: nbgrader's cell timeout in the course's autograde: twice the longest honest cell (the
#: hanging submission's deep cell, two cases' CASE_TIMEOUT), so only the stuck cell meets it
CELL_TIMEOUT = 12
#: the case time limit in every grading of the course (kernels, the fast path, the graders'
#: own reports): well above any honest case's run, and what each case of the hanging
#: submission costs before the cut-off
CASE_TIMEOUT = 3.0
#: IPython's own commands in the graded cell (the only one a student writes), which a kernel
#: runs: `%%time` over it, `%time` running its statement, the others printing; the fast
#: path grades the cell as autograde does, not as a syntax error
IN_THE_ENGINE = (
    "class Value:\n",
    "%%time\n!echo engine\n%time TWO = 1 + 1\n%timeit -n1 -r1 TWO * 2\n\n\nclass Value:\n",
)
#: a student's own cells around the graded one: a helper above it, which the graded cell now
#: uses, and an experiment below it (the kernel runs both; the fast path keeps the helper)
HELPER_CELL = (
    "import numpy as np\n\nSCALE = 1.0\n\n\ndef accumulate(node, amount):\n    node.grad += SCALE * amount\n"
)
EXPERIMENT_CELL = "a = Value(2.0)\nb = a + a\nb.backward()\nprint(a.grad)\nc = a * b\n"
ADD_RULE = (
    "            self.grad += out.grad\n            other.grad += out.grad\n",
    "            accumulate(self, out.grad)\n            accumulate(other, out.grad)\n",
)


def with_own_cells(nb):
    """The notebook with HELPER_CELL above its graded cell (which then uses it) and
    EXPERIMENT_CELL below it, as cells the student added (no nbgrader metadata)."""
    at = next(i for i, c in enumerate(nb.cells) if c.metadata.get("grader", {}).get("module") == "engine")
    own = nbformat.v4.new_code_cell
    nb.cells[at : at + 1] = [own(HELPER_CELL), nb.cells[at], own(EXPERIMENT_CELL)]
    return edit(nb, *ADD_RULE)


MUL = "other.grad += self.data * out.grad"
WRONG = "other.grad += other.data * out.grad"


def submissions(course):
    """(student, assignment) -> notebook: the kinds of submission a class hands in."""
    m = "micrograd"
    without_ops = filled(course, m)
    without_ops.cells = [
        c for c in without_ops.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_ops"
    ]
    return {
        ("correct", m): filled(course, m),
        ("buggy", m): edit(
            filled(course, m), "other.grad += self.data * out.grad", "other.grad += other.data * out.grad"
        ),
        ("untouched", m): released(course, m),
        ("hang", m): edit(filled(course, m), "        self.grad = 1.0\n", HANG),
        ("ipython", m): edit(filled(course, m), *IN_THE_ENGINE),
        ("own-cells", m): with_own_cells(filled(course, m)),
        ("deleted", m): without_ops,
        ("correct", "needle"): filled(course, "needle"),
    }


#: the gradebook as `nbgrader generate_assignment` left it for both assignments, kept beside the course
GENERATED = "generated.db"


def as_generated(course):
    """Back to the course as generated, before any submission was graded: its gradebook as
    `generate_assignment` wrote it (copied, not made again: 5 s a command), nothing autograded."""
    shutil.copy(course.parent / GENERATED, course / "gradebook.db")
    shutil.rmtree(course / "autograded", ignore_errors=True)


#: what `nbgrader autograde` printed, beside the course
AUTOGRADE_LOG = "autograde.log"

#: the copy of the course that `nbgrader autograde` grades, beside the course: its autograded/
#: notebooks, feedback and gradebook are nbgrader's own, while the course is the fast path's
BY_NBGRADER = "by-nbgrader"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course graded twice, from the same submissions: by `nbgrader autograde` (in a copy,
    `BY_NBGRADER`: its export, feedback and autograded notebooks), and by `grade-class
    --nbgrader` alone, whose reports (the class gradebook's: the code extracted from each
    notebook, graded in the sandbox as `grader grade` grades it) every test compares
    nbgrader's results with. The two run at once: each waits, asleep, on its stuck and
    hanging submissions' time limits for a third of its time, and the other uses the CPU."""
    env = environment(CASE_TIMEOUT)
    course = make_course(tmp_path_factory.mktemp("nbgrader"))
    nbgrader(course, "generate_assignment", "*", "--force", env=env)  # both, in one command
    shutil.copy(course / "gradebook.db", course.parent / GENERATED)
    for key, nb in submissions(course).items():
        submit(course, *key, nb)
    stuck = edit(filled(course, "micrograd"), "        self.grad = 1.0\n", STUCK)
    submit(course, "stuck", "micrograd", stuck)
    theirs = course.parent / BY_NBGRADER
    shutil.copytree(course, theirs)

    def by_nbgrader() -> list[dict[str, str]]:
        # every assignment (nbgrader reads the id as a glob) in one command, its feedback in another
        timeout = f"--Execute.timeout={CELL_TIMEOUT}"
        done = nbgrader(theirs, "autograde", "*", "--force", timeout, env=env)
        (course.parent / AUTOGRADE_LOG).write_text(done.stdout + done.stderr)
        nbgrader(theirs, "generate_feedback", "*", "--force", env=env)
        return export(theirs, env)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        autograded = pool.submit(by_nbgrader)
        for assignment in ("micrograd", "needle"):
            # the hanging and stuck submissions wait asleep, not spinning, so the others'
            # honest cases keep far from CASE_TIMEOUT
            fast_path(course, assignment, "--timeout", str(CASE_TIMEOUT), env=env)
        nbgrader(course, "generate_feedback", "micrograd", "--force", env=env)
        rows = autograded.result()
    reports = {}
    for assignment in ("micrograd", "needle"):
        with ClassGradebook(course / "classgrade" / f"gradebook-{assignment}.db") as book:
            reports.update({(student, assignment): report for student, report in book.reports()})
    return course, env, reports, rows


def test_release_has_no_solutions_or_hidden_tests(course):
    course, *_ = course
    found = secrets(REPO / "reference", REPO / "tests")
    assert scan(course / "release", found) == []


def test_autograde_finds_every_test_cell_as_released(course):
    """A test cell's source is the same in the source, released and submitted notebook, so
    nbgrader's checksum of it holds: `nbgrader autograde` warns of no changed cell."""
    course, *_ = course
    log = (course.parent / AUTOGRADE_LOG).read_text()
    assert "Sanitizing" in log  # the log is nbgrader's
    for assignment in ("micrograd", "needle"):
        assert f"/{assignment}/{assignment}.ipynb" in log  # nbgrader's log of each notebook
    assert [line for line in log.splitlines() if "checksum" in line or "has changed" in line] == []


#: where a kernel's own machinery lives (pyzmq's compiled frames are named by a relative path,
#: `"zmq/backend/...`): a traceback through nothing else is not the kit's.
#: ipykernel (7.4) races with itself as a kernel shuts down: its control handler flushes stderr,
#: or publishes its idle status through jupyter_client's Session, while its IOPub thread closes
#: the pipe that would wake it, and tornado logs the ZMQError
KERNEL_MACHINERY = ("/ipykernel/", "/jupyter_client/", "/zmq/", "/tornado/", '"zmq/')


def tracebacks_of_the_kit(log: str) -> list[str]:
    """In an autograde log: each exception ignored (as a `__del__`'s is), and the first line of
    each traceback that runs through any code but the kernel's own machinery."""
    found, lines = [], log.splitlines()
    for i, line in enumerate(lines):
        if "Exception ignored" in line:
            found.append(line)
        elif "Traceback (most recent call last):" in line:
            frames = []
            for after in lines[i + 1 :]:
                if not after.startswith(" "):
                    break
                if after.lstrip().startswith("File "):
                    frames.append(after)
            if not frames or not all(any(m in frame for m in KERNEL_MACHINERY) for frame in frames):
                found.append(line)
    return found


def test_kernels_shut_down_without_an_exception(course):
    """A kernel's shutdown clears the notebook's globals before its last nodes are freed:
    needle's `Value.__del__` then has no counter left, and must not print a traceback into
    the instructor's autograde log for every submission."""
    course, *_ = course
    log = (course.parent / AUTOGRADE_LOG).read_text()
    assert tracebacks_of_the_kit(log) == []


def test_only_the_kernels_own_shutdown_race_is_not_the_kits():
    race = """ERROR:tornado.general:Uncaught exception in ZMQStream callback
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/zmq/eventloop/zmqstream.py", line 585, in _log_error
    f.result()
  File "/venv/lib/python3.11/site-packages/ipykernel/kernelbase.py", line 408, in process_control
    sys.stderr.flush()
  File "/venv/lib/python3.11/site-packages/ipykernel/iostream.py", line 343, in schedule
    self._event_pipe.send(b"")
  File "zmq/backend/cython/_zmq.py", line 190, in zmq.backend.cython._zmq._check_rc
zmq.error.ZMQError: Socket operation on non-socket
[AutogradeApp | INFO] Writing 41501 bytes to autograded/hang/micrograd/micrograd.ipynb
"""
    assert tracebacks_of_the_kit(race) == []
    ours = """Exception ignored in: <function Value.__del__ at 0x7f0c2c1e2ca0>
Traceback (most recent call last):
  File "/tmp/ipykernel_4242/1234.py", line 12, in __del__
    Value.alive -= 1
AttributeError: 'NoneType' object has no attribute 'alive'
"""
    assert tracebacks_of_the_kit(ours) == ours.splitlines()[:2]
    assert tracebacks_of_the_kit(race + ours) == ours.splitlines()[:2]


def test_exported_scores_equal_the_graders(course):
    course, _, reports, rows = course
    scores = {(r["student_id"], r["assignment"]): float(r["raw_score"]) for r in rows}
    for (student, assignment), report in reports.items():
        expected = report.score
        if student == "deleted":  # the deleted cell's points are lost
            expected -= sum(r.points for r in report.results if r.topic == "ops")
        assert scores[student, assignment] == pytest.approx(expected), (student, assignment)
    assert scores["correct", "micrograd"] == reports["correct", "micrograd"].max_score
    assert scores["correct", "needle"] == reports["correct", "needle"].max_score
    assert scores["buggy", "micrograd"] < scores["correct", "micrograd"]
    # IPython's commands in graded cells: full marks from the kernel and from the fast path
    assert (
        scores["ipython", "micrograd"]
        == reports["ipython", "micrograd"].score
        == reports["ipython", "micrograd"].max_score
    )
    # a helper in a cell of the student's own: full marks from the kernel and from the fast path
    mine = reports["own-cells", "micrograd"]
    assert scores["own-cells", "micrograd"] == mine.score == mine.max_score


def test_each_cell_scores_its_topic(course):
    course, _, reports, _ = course
    for student in ("buggy", "hang", "untouched", "stuck"):
        got = cell_points(course.parent / BY_NBGRADER / "autograded", "micrograd", student)
        assert got == pytest.approx(cell_scores(reports[student, "micrograd"].results, "micrograd"))
    autograded = course.parent / BY_NBGRADER / "autograded"
    hung, correct = (cell_points(autograded, "micrograd", s) for s in ("hang", "correct"))
    assert [cell for cell in correct if hung[cell] != correct[cell]] == ["test_deep"]  # the hang costs
    assert 0 < hung["test_deep"] < correct["test_deep"]  # its own case only


def test_a_cell_that_hangs_is_stopped_by_the_cell_timeout_and_the_others_grade(course):
    course, _, reports, _ = course
    import nbformat

    autograded = course.parent / BY_NBGRADER / "autograded"
    nb = nbformat.read(autograded / "stuck" / "micrograd" / "micrograd.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    ids = [c.metadata.nbgrader.grade_id for c in cells]
    errors = {
        c.metadata.nbgrader.grade_id: [o.ename for o in c.outputs if o.output_type == "error"] for c in cells
    }
    assert "CellTimeoutError" in errors["test_deep"]  # nbgrader's timeout stopped it, not the case's
    assert not any(errors[grade_id] for grade_id in ids if grade_id != "test_deep")
    points = cell_points(autograded, "micrograd", "stuck")
    after = ids[ids.index("test_deep") + 1 :]
    assert after and all(points[grade_id] > 0 for grade_id in after)  # the cells after it still graded
    assert points == pytest.approx(cell_scores(reports["stuck", "micrograd"].results, "micrograd"))


def test_failing_cells_show_the_graders_diagnostic_on_stdout(course):
    course, _, reports, _ = course
    import nbformat

    autograded = course.parent / BY_NBGRADER / "autograded"
    nb = nbformat.read(autograded / "buggy" / "micrograd" / "micrograd.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert not any(o.get("name") == "stderr" for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    failed = [r for r in reports["buggy", "micrograd"].results if not r.passed]
    assert failed
    for r in failed:
        assert r.message.splitlines()[0] in text


def test_feedback_does_not_show_hidden_cases(course):
    """Neither after `nbgrader autograde` (both assignments) nor after the fast path."""
    course, *_ = course
    found = secrets(REPO / "reference", REPO / "tests")
    for feedback in (course.parent / BY_NBGRADER / "feedback", course / "feedback"):
        leaks = [leak for leak in scan(feedback, found) if leak.kind != "solution line"]
        assert leaks == []
        html = (feedback / "buggy" / "micrograd" / "micrograd.html").read_text()
        assert re.search(r"hidden cases: [0-9.]+/13 points", html)  # composite's one line of points
        assert "### BEGIN HIDDEN TESTS" not in html
    assert (course.parent / BY_NBGRADER / "feedback" / "correct" / "needle" / "needle.html").is_file()


def test_fast_path_exports_like_autograde(course):
    """`grade-class --nbgrader`: the class engine grades the extracted code and writes nbgrader's
    gradebook; `nbgrader export` then equals the export after `nbgrader autograde`."""

    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    course, env, reports, rows = course
    assert export(course, env, "fast.csv") == rows
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, assignment in reports:
            stamp = (course / "submitted" / student / assignment / "timestamp.txt").read_text().strip()
            assert gb.find_submission(assignment, student).timestamp == parse_utc(stamp)
    for assignment in ("micrograd", "needle"):  # formgrader lists each as autograded, with its score
        shown = formgrader_view(course, assignment)
        exported = {r["student_id"]: float(r["score"]) for r in rows if r["assignment"] == assignment}
        assert shown == {student: (True, exported[student]) for student, a in reports if a == assignment}
    # the class exports keep both assignments, each graded by its own run into the same folder
    out = course / "classgrade"
    with (out / "grades.csv").open() as fh:
        ours = {(r["student_id"], r["assignment"]): float(r["score"]) for r in csv.DictReader(fh)}
    theirs = {(r["student_id"], r["assignment"]): float(r["score"]) for r in rows}  # a row for all
    deleted = sum(r.points for r in reports["deleted", "micrograd"].results if r.topic == "ops")
    ours["deleted", "micrograd"] -= deleted  # the class engine graded the code; nbgrader lost the cell
    assert set(ours) == set(reports) and ours == pytest.approx({key: theirs[key] for key in ours})
    with (out / "cases.csv").open() as fh:
        cases = {(r["student_id"], r["assignment"]) for r in csv.DictReader(fh)}
    assert cases == set(reports)
    both = json.loads((out / "results" / "correct" / "results.json").read_text())
    assert both["score"] == sum(reports["correct", a].score for a in ("micrograd", "needle"))
    page = (out / "pages" / "students" / "correct.html").read_text()
    assert "micrograd" in page and "needle" in page
    assert {p.stem for p in (out / "pages" / "students").glob("*.html")} == {s for s, _ in reports}


def test_written_grades_export_like_autograde(course):
    """`write_grades`, each report's points written per cell into a gradebook as generated,
    exports what autograde exported. It rewrites the course's gradebook: after the tests that
    read the fast path's."""
    course, env, reports, rows = course
    as_generated(course)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for (student, assignment), report in reports.items():
            write_grades(course, assignment, student, report.results)
    assert [w for w in caught if "SAWarning" in type(w.message).__name__] == []
    assert export(course, env, "written.csv") == rows
    assert (course / "autograded" / "correct" / "micrograd" / "timestamp.txt").is_file()


def test_a_timestamp_that_is_not_a_date_costs_nothing_and_is_said(course, tmp_path):
    """nbgrader's autograde stops on a timestamp.txt it cannot read; the fast path grades
    that student with no submission time, says which file, and grades the others as usual."""
    from nbgrader.api import Gradebook

    course, env, _, _ = course
    mine = tmp_path / "course"
    shutil.copytree(course, mine, ignore=shutil.ignore_patterns("classgrade"))
    folder = course / "submitted" / "correct" / "micrograd"
    submit(mine, "garbled", "micrograd", filled(mine, "micrograd"))
    (mine / "submitted" / "garbled" / "micrograd" / "timestamp.txt").write_text("handed in on Tuesday-ish")
    done = fast_path(mine, "micrograd", "--jobs", "1", "--only-cases", "micrograd/test_ops::*", env=env)
    assert "Traceback" not in done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "garbled" in said and "timestamp.txt" in said and "is not a date" in said, done.stdout
    with Gradebook(f"sqlite:///{mine / 'gradebook.db'}") as gb:
        assert gb.find_submission("micrograd", "garbled").timestamp is None
        ops = [gb.find_grade("test_ops", "micrograd", "micrograd", s).score for s in ("garbled", "correct")]
        assert ops[0] == ops[1] > 0
        assert gb.find_submission("micrograd", "correct").timestamp is not None
    assert not (mine / "autograded" / "garbled" / "micrograd" / "timestamp.txt").exists()
    assert (mine / "autograded" / "correct" / "micrograd" / "timestamp.txt").read_text() == (
        folder / "timestamp.txt"
    ).read_text()


def test_a_course_without_the_assignment_is_said_at_the_first_grade_and_loses_nothing(course, tmp_path):
    """A course whose gradebook.db was made before `generate_assignment`: the fast path says so
    in one line (exit 2) when it comes to write the first student, not after the whole class,
    and the class gradebook keeps that student: once the assignment is generated, the next run
    grades only the others and writes every student into the course."""
    from nbgrader.api import Gradebook

    course, env, _, _ = course
    mine = tmp_path / "course"
    shutil.copytree(course, mine, ignore=shutil.ignore_patterns("classgrade", "gradebook.db", "autograded"))
    args = ["--jobs", "1", "--only-cases", "micrograd/test_ops::forward*"]  # no backward(): quick
    command = [sys.executable, "-m", "grader", "grade-class", "--nbgrader", str(mine), "micrograd", *args]
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-2000:]
    error = done.stderr.strip().splitlines()[-1]
    assert "does not know micrograd's grade cells" in error and "generate_assignment micrograd" in error
    assert "Traceback" not in done.stderr
    with ClassGradebook(mine / "classgrade" / "gradebook-micrograd.db") as book:
        first = list(book.stored())
    students = sorted(p.name for p in (mine / "submitted").iterdir() if (p / "micrograd").is_dir())
    assert len(first) == 1 and len(students) > 1
    shutil.copy(course.parent / GENERATED, mine / "gradebook.db")  # as `generate_assignment` makes it
    again = fast_path(mine, "micrograd", *args, env=env)
    assert "1 submission(s) unchanged since they were graded: skipped" in " ".join(again.stderr.split())
    assert f"wrote {len(students)} submission(s)" in " ".join(again.stdout.split())
    with Gradebook(f"sqlite:///{mine / 'gradebook.db'}") as gb:
        assert sorted(s.student.id for s in gb.assignment_submissions("micrograd")) == students


def shown_outputs(html: str) -> dict[str, str]:
    """Grade cell id -> the text its output shows in a feedback page (what the student reads)."""
    shown = {}
    for cell in html.split('<div class="cell ')[1:]:
        found = re.search(r'<a name="(test_\w+)"></a>', cell)
        if found:
            blocks = re.findall(r"output_stdout[^>]*>\s*<pre>(.*?)</pre>", cell, re.S)
            shown[found[1]] = html_module.unescape(re.sub(r"<[^>]+>", "", "".join(blocks)))
    return shown


def test_fast_path_feedback_shows_what_autograde_shows(course):
    """A buggy submission's feedback after `grade-class --nbgrader` shows in each test cell the
    diagnostics and the score line that the feedback after `nbgrader autograde` shows, and
    the hidden cases as one line of points."""
    course, _, reports, _ = course
    after_autograde = shown_outputs(
        (course.parent / BY_NBGRADER / "feedback" / "buggy" / "micrograd" / "micrograd.html").read_text()
    )
    after_fast_path = shown_outputs(
        (course / "feedback" / "buggy" / "micrograd" / "micrograd.html").read_text()
    )
    assert set(after_autograde) == set(cell_scores(reports["buggy", "micrograd"].results, "micrograd"))
    assert after_fast_path == after_autograde
    shown = "".join(after_fast_path.values())
    assert "FAILED" in shown and re.search(r"hidden cases: [0-9.]+/13 points", shown)
    for r in reports["buggy", "micrograd"].results:
        if not r.passed and not r.hidden:
            assert r.message.splitlines()[0] in shown


def test_autograde_refuses_a_course_whose_kernels_cannot_import_the_grader(tmp_path, monkeypatch, capsys):
    """A course copied out of the kit's checkout, on a machine where the grader is not
    installed: every test cell would fail at its import and score zero without a word, so
    `nbgrader autograde` stops at once with a one-line reason (exit 2). Other commands run."""
    from traitlets.config import Config

    config = tmp_path / "course" / "nbgrader_config.py"
    config.parent.mkdir()
    shutil.copy(REPO / "assignments" / "nbgrader_config.py", config)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *args: None)
    code = compile(config.read_text(), str(config), "exec")
    monkeypatch.setattr("sys.argv", ["nbgrader", "export"])
    exec(code, {"get_config": Config, "__file__": str(config)})
    monkeypatch.setattr("sys.argv", ["nbgrader", "autograde", "micrograd"])
    with pytest.raises(SystemExit) as stopped:
        exec(code, {"get_config": Config, "__file__": str(config)})
    assert stopped.value.code == 2
    assert "run `bash scripts/setup.sh`" in capsys.readouterr().err
