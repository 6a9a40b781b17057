"""Every rendering of one report: totals come from the model, and hidden cases reach a
student only as their visibility allows (never names, inputs, messages or sources)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from grader.authoring.leaks import secrets
from grader.pipeline import Request, grade_submission
from grader.report.gradescope import gradescope
from grader.report.markdown import markdown
from grader.report.model import VISIBILITIES, Audience, Report, Status
from grader.report.terminal import print_report
from grader.verdict.oracle import Oracle

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
PRINTED = "PRINTED-WHILE-RUNNING"


@pytest.fixture(scope="module")
def buggy(tmp_path_factory) -> Path:
    """tanh's rule is wrong, and prints: a hidden case (tanh_chain) fails, another passes."""
    root = tmp_path_factory.mktemp("buggy")
    shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
    engine = root / "micrograd" / "engine.py"
    old = "self.grad += (1.0 - out.data**2) * out.grad"
    engine.write_text(
        engine.read_text().replace(old, f"print({PRINTED!r}); self.grad += (1.0 - out.data) * out.grad")
    )
    return root


def graded(buggy: Path, visibility: str) -> Report:
    request = Request("all", ("micrograd",), SMALL, sandbox=False, visibility=visibility)
    return grade_submission(buggy, request, Oracle())


def renderings(report: Report, audience: Audience) -> dict[str, str]:
    out = io.StringIO()
    print_report(report, Console(file=out, width=200), failures=50, audience=audience)
    rendered = {"terminal": out.getvalue(), "feedback.md": markdown(report, audience)}
    if audience is Audience.STUDENT:
        rendered["results.json"] = json.dumps(gradescope(report))
    return rendered


def test_the_buggy_submission_fails_a_hidden_case(buggy):
    report = graded(buggy, "after_published")
    hidden = [r for r in report.results if r.hidden]
    assert any(r.status is Status.FAILED for r in hidden) and any(r.passed for r in hidden)
    assert 0 < report.score < report.max_score


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_a_student_never_sees_hidden_sources_or_messages(buggy, visibility):
    report = graded(buggy, visibility)
    known = secrets(REPO / "reference", SMALL)
    hidden_messages = [r.message for r in report.results if r.hidden and r.message]
    assert known.hidden_names and known.hidden_source and hidden_messages
    for where, text in renderings(report, Audience.STUDENT).items():
        for line in known.hidden_source:
            assert line not in text, (where, line)
        for message in hidden_messages:
            assert message not in text, where
        names_shown = [name for name in known.hidden_names if name in text]
        if visibility == "visible" and where != "results.json":
            assert names_shown, where  # a visible hidden case is named, with its status
        else:
            assert not names_shown, (where, names_shown)


@pytest.mark.parametrize("visibility", ["after_published", "after_due_date"])
def test_by_default_hidden_cases_are_one_line_of_points(buggy, visibility):
    report = graded(buggy, visibility)
    hidden = [r for r in report.results if r.hidden]
    line = f"Hidden cases: {sum(r.points for r in hidden):g} of {sum(r.max_points for r in hidden):g} points"
    for where, text in renderings(report, Audience.STUDENT).items():
        assert line in text, where
        assert f"{report.score:g}/{report.max_score:g}" in text.replace(" / ", "/"), where


def test_hidden_visibility_hides_even_the_points(buggy):
    report = graded(buggy, "hidden")
    public = [r for r in report.results if not r.hidden]
    total = f"{sum(r.points for r in public):g}/{sum(r.max_points for r in public):g}"
    for where in ("terminal", "feedback.md"):
        text = renderings(report, Audience.STUDENT)[where]
        assert "Hidden cases" not in text and total in text.replace(" / ", "/"), where


def test_an_instructor_sees_everything(buggy):
    report = graded(buggy, "after_published")
    failed_hidden = next(r for r in report.results if r.hidden and not r.passed)
    for where, text in renderings(report, Audience.INSTRUCTOR).items():
        assert failed_hidden.id.split("::")[1] in text, where
        assert failed_hidden.message.splitlines()[0] in text, where
        assert f"Score: {report.score:g}" in text.replace(" / ", "/").replace("**", ""), where


def test_the_report_survives_plain_data(buggy):
    report = graded(buggy, "after_published")
    again = Report.from_plain(json.loads(json.dumps(report.to_plain())))
    assert again == report and again.score == report.score


def test_the_terminal_prints_what_a_submission_says_as_it_is(tmp_path):
    """Rich reads `[...]` as markup: a case's `[param]` vanished from its id, and an exception
    message with `[/red]` (quoted by a note about the submission's failed `__init__.py`) stopped
    the report with a MarkupError. Every front end prints through this report. Past the failures
    shown, the count of the others and where to read them."""
    package = tmp_path / "micrograd"
    shutil.copytree(REPO / "reference" / "micrograd", package)
    (package / "__init__.py").write_text('raise RuntimeError("said [/red] as [bold]it is")\n')
    engine = package / "engine.py"
    engine.write_text(engine.read_text().replace("self.grad += out.grad\n", "self.grad = out.grad\n", 1))
    wanted = ("random_expression", "add_twice")
    request = Request("public", ("micrograd",), sandbox=False, keep=lambda case: case.name.endswith(wanted))
    report = grade_submission(tmp_path, request, Oracle())
    failed = [r for r in report.results if not r.passed]
    assert any("[" in r.id for r in failed) and len(failed) > 2
    out = io.StringIO()
    print_report(report, Console(file=out, width=300), failures=2, more="see the feedback")
    text = out.getvalue()
    assert "said [/red] as [bold]it is" in text
    shown = [line.split()[1] for line in text.splitlines() if line.startswith("FAILED")]
    assert len(shown) == 2 and set(shown) <= {r.id for r in failed}
    assert f"{len(failed) - 2} more failed case(s) not shown: see the feedback" in text


def test_the_class_summary_and_progress_print_names_and_errors_as_they_are():
    from grader.classgrade.engine import ClassRun
    from grader.classgrade.progress import ClassProgress, summary

    class Book:
        def info(self, student: str) -> dict[str, str]:
            return {"state": "graded"}

    student = "smith [bold]Jr"
    reports = {student: Report("x", errors=["the zip holds a[/red]b/engine.py"])}
    out = io.StringIO()
    console = Console(file=out, width=300, force_terminal=True, color_system=None)
    console.print(summary(Book(), reports, ClassRun(graded=reports), 1.0, 2))
    with ClassProgress(console) as progress:
        progress.on_start(1, 0)
        progress.on_done(student, reports[student])
    text = out.getvalue()
    assert text.count(student) == 2 and "a[/red]b/engine.py" in text
