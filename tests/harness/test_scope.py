"""An assignment's scope is data: one TOML file per assignment says which ops and topics are
graded and for how many points; `--scope FILE` narrows it for pytest, `grade` and the
notebooks alike. Out-of-scope cases are not run and not counted; a bad file is one line
and exit status 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import assignments
from grader.assignments import NAMES
from grader.authoring.notebooks import build
from grader.case.define import collect
from grader.cli import main
from grader.notebook import grade_topic
from grader.pipeline import SUITES_DIR, Request, grade_submission
from grader.report.model import Report, Status
from grader.scope import ScopeError, default, known_topics, load, resolve, vocabulary
from grader.verdict.oracle import Oracle
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
NO_TANH = REPO / "examples" / "scopes" / "no-tanh.toml"
LEFT_OUT = {"micrograd": {"tanh"}, "needle": {"Tanh", "EWisePow", "int-axes"}}


@pytest.fixture(scope="module")
def cases():
    return collect(SUITES_DIR, NAMES, ("public", "hidden"))


def graded(oracle: Oracle, scopes=None, suite: str = "all", keep=None) -> Report:
    return grade(REPO / "reference", suite, oracle=oracle, sandbox=False, keep=keep, scopes=scopes)


@pytest.fixture(scope="module")
def everything(oracle) -> Report:
    return graded(oracle)


@pytest.fixture(scope="module")
def narrower(oracle) -> Report:
    return graded(oracle, resolve([NO_TANH], SUITES_DIR, shipped=True))


def test_the_default_scopes_grade_everything_the_suites_have(cases, oracle):
    """A topic, op or feature added to the suites must be added to the default scope."""
    for name in NAMES:
        scope = default(name)
        ops, features = vocabulary(name)
        assert scope.ops == set(ops) and scope.features == set(features) and not scope.excluded
        assert list(scope.topics) and set(scope.topics) == set(known_topics(name, SUITES_DIR))
        assert set(scope.topics.values()) == {1.0}
    oracle.prepare(cases)
    for case in cases:
        ops, features = vocabulary(case.assignment)
        assert oracle.needs(case) <= {*ops, *features}, case.id


def test_grading_with_the_default_scope_changes_nothing(everything, cases):
    assert [r.id for r in everything.results] == [c.id for c in cases]
    assert everything.max_score == sum(c.points for c in cases) == everything.score


def test_a_narrower_scope_drops_exactly_the_cases_that_need_what_it_leaves_out(
    everything, narrower, cases, oracle
):
    needs = {c.id: oracle.needs(c) for c in cases}
    dropped = {c.id for c in cases if needs[c.id] & LEFT_OUT[c.assignment]}
    for assignment, words in LEFT_OUT.items():
        for word in words:  # every left-out word costs some cases, in both suites' worth
            assert any(word in needs[i] for i in dropped if i.startswith(assignment)), word
    # a feature applies to the op-class cases too: Summation over an int, in isolation
    assert "needle/test_op_gradients::op_gradient[Summation-int]" in dropped
    assert "needle/test_op_gradients::op_gradient[Summation-tuple]" not in dropped
    assert [r.id for r in narrower.results] == [r.id for r in everything.results if r.id not in dropped]

    assert all(r.passed for r in narrower.results)  # nothing in scope fails, nothing is "not graded"
    kept = [r for r in everything.results if r.id not in dropped]
    assert narrower.max_score == sum(r.max_points for r in kept) == narrower.score
    assert narrower.max_score == sum(row.max_points for row in narrower.topics())
    assert 0 < narrower.max_score < everything.max_score


def test_topics_and_points_come_from_the_file(tmp_path, oracle, everything):
    path = tmp_path / "two-topics.toml"
    path.write_text('[needle.topics]\nsummation = 2\n"reshape-transpose" = 0.5\n')
    scopes = resolve([path], SUITES_DIR, shipped=True)
    report = graded(
        oracle, scopes, suite="public", keep=lambda c: c.assignment == "needle" or c.module == "test_ops"
    )
    everything = Report(
        "",
        [
            r
            for r in everything.results
            if not r.hidden and (r.assignment == "needle" or "/test_ops::" in r.id)
        ],
    )
    needle = [r for r in report.results if r.assignment == "needle"]
    assert {r.topic for r in needle} == {"summation", "reshape-transpose"}
    for topic, factor in (("summation", 2), ("reshape-transpose", 0.5)):
        before = [r for r in everything.results if r.topic == topic and r.assignment == "needle"]
        after = [r for r in needle if r.topic == topic]
        assert [r.id for r in after] == [r.id for r in before]
        assert sum(r.max_points for r in after) == factor * sum(r.max_points for r in before)
    micrograd = [r for r in report.results if r.assignment == "micrograd"]  # not in the file: default
    assert [r.id for r in micrograd] == [r.id for r in everything.results if r.assignment == "micrograd"]
    assert report.max_score == sum(r.max_points for r in report.results) == report.score


def test_notebooks_for_a_scope_are_worth_what_grade_gives(narrower, oracle):
    scopes = resolve([NO_TANH], SUITES_DIR, shipped=True)
    for name in NAMES:
        nb = build(REPO / "reference", SUITES_DIR, name, scopes[name])
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        total = sum(c.metadata.nbgrader.points for c in cells)
        assert total == sum(r.max_points for r in narrower.results if r.assignment == name)
        if name == "needle":
            summation = next(c for c in cells if "'summation'" in c.source)
            assert "without=('EWisePow', 'Tanh', 'int-axes')" in summation.source
    # the cell runs only the cases in scope, and gives their points
    modules = assignments.get("needle").load(REPO / "reference")
    namespace = {"__name__": "notebook"}
    for module in ("autograd", "ops", "init"):
        namespace.update(vars(modules[module]))
    earned = grade_topic("needle", "summation", "public", namespace, without=("EWisePow", "Tanh", "int-axes"))
    expected = [
        r for r in narrower.results if r.topic == "summation" and r.assignment == "needle" and not r.hidden
    ]
    assert earned == sum(r.max_points for r in expected) > 0


def test_pytest_with_a_scope_runs_and_counts_what_grade_does(narrower, oracle, tmp_path):
    files = ["tests/public/needle/test_summation.py", "tests/public/micrograd/test_accumulation.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *files, f"--scope={NO_TANH}", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "GRADER_CACHE": str(oracle.cache_dir)},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    modules = ("test_summation", "test_accumulation")
    expected = [r for r in narrower.results if not r.hidden and r.id.split("/")[1].split("::")[0] in modules]
    total = sum(r.max_points for r in expected)
    assert f"Score: {total:g}/{total:g} points" in run.stdout
    assert f"{len(expected)} passed" in run.stdout and "deselected" in run.stdout


BAD = {
    "missing.toml": None,
    "invalid.toml": "[needle\nops = [",
    "op.toml": '[needle]\nops = ["Tanhh"]\n',
    "topic.toml": "[micrograd.topics]\nbackprop = 1\n",
    "assignment.toml": '[tinygrad]\nops = ["add"]\n',
    "key.toml": "[needle]\nweights = 1\n",
    "factor.toml": "[needle.topics]\nops = -1\n",
    "feature.toml": '[needle]\nfeatures = ["int-axis"]\n',
    "empty.toml": "",
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_scope_file_is_one_line_and_exit_2(name, tmp_path, capsys):
    path = tmp_path / name
    if BAD[name] is not None:
        path.write_text(BAD[name])
    with pytest.raises(ScopeError):
        load(path, SUITES_DIR)
    commands = (["grade", str(REPO / "reference"), "--in-process"], ["notebooks", "--check"])
    for argv in (*commands, ["grade-class", str(tmp_path)]):
        assert main([*argv, "--scope", str(path)]) == 2
        out, err = capsys.readouterr()
        assert err.startswith("grader: ") and f"scope {path}" in err and err.count("\n") == 1, err
        assert "Traceback" not in err and not out


def test_two_files_for_one_assignment_are_an_error(tmp_path):
    (tmp_path / "a.toml").write_text("[needle.topics]\nops = 1\n")
    with pytest.raises(ScopeError, match="already given"):
        resolve([tmp_path / "a.toml", NO_TANH], SUITES_DIR, shipped=True)


def test_pytest_stops_on_a_bad_scope_file_with_exit_2(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/public/micrograd/test_ops.py", f"--scope={tmp_path}/x.toml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    lines = [line for line in (run.stdout + run.stderr).splitlines() if "grader: error" in line]
    assert len(lines) == 1 and "no such file" in lines[0]


def test_not_graded_and_out_of_scope_differ(tmp_path, oracle):
    """Out of scope: not run, not counted. Not graded: counted, 0 points (the student lacks it)."""
    from tests.harness.without_ops import reference_without

    root = reference_without(tmp_path, {"micrograd": ("tanh",), "needle": ()})

    def keep(case):
        return case.module in ("test_ops", "test_accumulation")

    lacking = grade_submission(root, Request("public", ("micrograd",), sandbox=False, keep=keep), oracle)
    scopes = resolve([NO_TANH], SUITES_DIR, shipped=True)
    request = Request("public", ("micrograd",), sandbox=False, keep=keep, scopes=scopes)
    scoped = grade_submission(root, request, oracle)
    ungraded = [r for r in lacking.results if r.status is Status.NOT_GRADED]
    assert ungraded and all(r.missing == ["tanh"] for r in ungraded)
    assert lacking.max_score == scoped.max_score + sum(r.max_points for r in ungraded)
    assert scoped.score == scoped.max_score == lacking.score


def test_the_gradescope_autograder_grades_the_scope_it_was_built_for(tmp_path, narrower, oracle):
    from grader.authoring.gradescope_zip import Settings
    from grader.autograder import Layout, graded_cases

    layout = Layout(tmp_path)
    for suite in ("public", "hidden"):
        shutil.copytree(SUITES_DIR / suite / "needle", layout.suites / suite / "needle")
    settings = Settings(assignments=["needle"], scopes=[NO_TANH.read_text()])
    layout.settings.write_text(settings.to_json())
    again = Settings.from_json(layout.settings.read_text())
    cases = graded_cases(layout, again, oracle)
    assert [c.id for c in cases] == [r.id for r in narrower.results if r.assignment == "needle"]
