"""The needle suites against known submissions: the reference passes every case, the
untouched template passes the forward cases and fails the gradient ones as "not implemented
yet", and every bug of the bank (tests/harness/bugs/needle.py) is caught by the cases meant for
it, each failing with a message that says what to fix. One oracle serves them all."""

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.case.define import Case, collect
from grader.pipeline import REPO, SUITES_DIR
from grader.report.model import Status
from grader.verdict.oracle import Oracle
from tests.harness.bugs import Bug, materialize
from tests.harness.bugs.needle import BUGS
from tests.harness.grading import grade

CASE_IDS = [c.id for c in collect(SUITES_DIR, ["needle"], ["public", "hidden"])]
#: topics whose every case needs a gradient the template leaves to write
GRADIENT_TOPICS = {"op-gradients", "ops", "broadcast", "summation", "reshape-transpose", "matmul"}
GRADIENT_TOPICS |= {"composite", "topo", "higher-order", "random", "finite-differences"}


def graded(directory: Path, oracle: Oracle, keep: Callable[[Case], bool] | None = None):
    return grade(directory, suite="all", only=["needle"], oracle=oracle, sandbox=False, keep=keep)


def matching(pattern: str) -> list[str]:
    """Case ids that `module::name[param]` names, `*` matching anything."""
    regex = re.compile(".*/" + re.escape(pattern).replace(r"\*", ".*"))
    return [i for i in CASE_IDS if regex.fullmatch(i)]


def test_reference_passes_every_case(oracle):
    report = graded(REPO / "reference", oracle)
    assert len(report.results) == len(CASE_IDS)
    assert [(r.id, r.message) for r in report.results if not r.passed] == []


def test_template_passes_forward_and_fails_the_rest_as_not_implemented(oracle):
    report = graded(REPO / "student_template", oracle)
    assert all(r.passed for r in report.results if r.topic == "forward")
    assert all(not r.passed for r in report.results if r.topic in GRADIENT_TOPICS)
    failed = [r for r in report.results if not r.passed]
    assert [(r.id, r.message) for r in failed if not r.message.startswith("not implemented yet: ")] == []


def test_every_bug_names_existing_cases():
    assert len({b.name for b in BUGS}) == len(BUGS)
    for bug in BUGS:
        assert bug.caught_by and bug.says, bug.name
        for pattern in bug.caught_by:
            assert matching(pattern), f"{bug.name}: {pattern} names no case"


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_bug_is_caught(bug, oracle, tmp_path):
    """Graded on the cases meant for the bug (one of them public), as micrograd's bank is:
    the 10**5-op chain, which no bug is meant for, would cost each bug a second."""
    materialize(bug, tmp_path)
    meant = {case_id for pattern in bug.caught_by for case_id in matching(pattern)}
    report = graded(tmp_path, oracle, keep=lambda case: case.id in meant)
    assert {r.id for r in report.results} == meant
    failed = {r.id: r for r in report.results if not r.passed}
    assert any(not r.hidden for r in failed.values()), "a student must be able to see it"
    for pattern in bug.caught_by:
        for case_id in matching(pattern):
            assert case_id in failed, f"{bug.name} is not caught by {case_id}"
            message = failed[case_id].message
            assert all(text in message for text in bug.says), f"{case_id}:\n{message}"


def test_a_tensor_without_reflected_operators_is_not_graded_where_it_needs_them(oracle, tmp_path):
    """CMU's hw1 skeleton has no `__rsub__` or `__rtruediv__`: the cases that write `2 - a` or
    `2 / a` are "not graded: needs __rsub__", as micrograd's are, and nothing else changes."""
    bug = Bug(
        "no-reflected-operators",
        "Tensor defines neither __rsub__ nor __rtruediv__",
        [
            ("needle/autograd.py", "    def __rsub__(", "    def _no_rsub("),
            ("needle/autograd.py", "    def __rtruediv__(", "    def _no_rtruediv("),
            ("needle/ops.py", "out_grad * (1 - node**2)", "out_grad * (-(node**2) + 1)"),
        ],
    )
    materialize(bug, tmp_path)
    report = graded(tmp_path, oracle)
    wrong = [(r.id, r.message) for r in report.results if r.status not in (Status.PASSED, Status.NOT_GRADED)]
    assert wrong == []
    needs = {need for r in report.results for need in r.missing}
    assert needs == {"__rsub__", "__rtruediv__"}
