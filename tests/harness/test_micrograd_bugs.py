"""The micrograd suites against known submissions, graded in this process.

- the reference passes every public and hidden case;
- each bug of tests/harness/bugs/micrograd.py fails the cases meant to catch it, and each of those
  failures' messages names the culprit (the op, the function, the error);
- the untouched student template passes every forward case and fails every other one with
  "not implemented yet: <the function to write>".

One oracle serves the whole run (tests/harness/conftest.py), so PyTorch runs each case once.
"""

from __future__ import annotations

import re

import pytest

from grader.case.define import Case, collect
from grader.pipeline import REPO, run_in_process, score
from grader.report.model import CaseResult
from tests.harness.bugs import Bug, EditError, materialize
from tests.harness.bugs.micrograd import BUGS
from tests.harness.grading import grade

SUITES = REPO / "tests"


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return collect(SUITES, ["micrograd"], ["public", "hidden"])


def key(case: Case | CaseResult) -> str:
    """How a bug's `caught_by` patterns name a case: `module::name[param]`."""
    return case.id.split("/", 1)[1]


def matching(pattern: str, cases: list[Case]) -> list[Case]:
    rx = re.compile(".*".join(re.escape(part) for part in pattern.split("*")))
    return [c for c in cases if rx.fullmatch(key(c))]


def test_reference_passes_every_case(oracle):
    report = grade(REPO / "reference", suite="all", only=["micrograd"], oracle=oracle, sandbox=False)
    failed = {key(r): r.message for r in report.results if not r.passed}
    assert not failed
    assert not report.errors
    assert report.score == report.max_score > 0
    assert {r.suite for r in report.results} == {"public", "hidden"}


@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: bug.name)
def test_bug_is_caught_and_named(bug: Bug, tmp_path, oracle, cases):
    submission = materialize(bug, tmp_path / "submission")
    chosen: list[Case] = []
    for pattern in bug.caught_by:
        found = matching(pattern, cases)
        assert found, f"{bug.name}: no case matches {pattern!r}"
        chosen += [c for c in found if c not in chosen]
    results = score(chosen, oracle, run_in_process(submission, chosen), {})
    passed = [key(r) for r in results if r.passed]
    assert not passed, f"{bug.name} is not caught by {passed}"
    for r in results:
        for text in bug.says:
            assert text in r.message, f"{key(r)}: {text!r} not in\n{r.message}"


def test_bugs_are_distinct_and_apply_to_the_reference(tmp_path):
    assert len({bug.name for bug in BUGS}) == len(BUGS)
    for bug in BUGS:
        dest = materialize(bug, tmp_path / bug.name)
        for file, _, _ in bug.edits:
            assert (dest / file).read_text() != (REPO / "reference" / file).read_text(), bug.name


def test_materialize_refuses_a_stale_edit(tmp_path):
    stale = Bug("stale", "edits text that is not there", [("micrograd/engine.py", "no such text", "")])
    with pytest.raises(EditError):
        materialize(stale, tmp_path)


# the function the template leaves empty for each primitive's rule
RULES = {"add": "__add__", "mul": "__mul__", "pow": "__pow__"}


def expected_stub(result: CaseResult) -> str:
    name, _, param = result.name.partition(" [")
    if name in ("rule", "hidden_rule"):
        op = param.rstrip("]").split("-")[0]
        return f"Value.{RULES.get(op, op)}._backward"
    return "Value.backward"


def test_template_passes_forward_and_names_every_missing_function(oracle):
    report = grade(REPO / "student_template", suite="all", only=["micrograd"], oracle=oracle, sandbox=False)
    forward = [r for r in report.results if r.topic == "forward"]
    others = [r for r in report.results if r.topic != "forward"]
    assert forward and others
    assert [key(r) for r in forward if not r.passed] == []
    for r in others:
        assert not r.passed, key(r)
        stub = f"not implemented yet: {expected_stub(r)} — "
        assert r.message.startswith(stub), (key(r), r.message)
