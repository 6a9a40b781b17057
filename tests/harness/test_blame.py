"""Blame that names the real cause, on engines written the way real students write them.

Each engine is a copy of reference/ with textual edits (as in the bug banks). A correct
engine built differently from the reference must pass; a buggy one must fail with a message
that names the part to fix, and not a part the student never wrote or that is right.
"""

from __future__ import annotations

import re

import pytest

from grader.case.define import Case, collect
from grader.pipeline import REPO, run_in_process, score
from grader.report.model import CaseResult
from grader.verdict.oracle import Oracle
from tests.harness.bugs import Bug, materialize
from tests.harness.bugs.micrograd import BY_NAME

ENGINE = "micrograd/engine.py"
NN = "micrograd/nn.py"
AUTOGRAD = "needle/autograd.py"
OPS = "needle/ops.py"

TANH_RULE = """\
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward():
            ### BEGIN SOLUTION
            # hint: d(tanh x)/dx = 1 - tanh(x)**2, written with out.data so that it cannot overflow
            self.grad += (1.0 - out.data**2) * out.grad
            ### END SOLUTION

        out._backward = _backward
        return out
"""


@pytest.fixture(scope="module")
def oracle() -> Oracle:
    return Oracle()


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return collect(REPO / "tests", ["micrograd", "needle"], ["public", "hidden"])


def chosen(cases: list[Case], pattern: str) -> list[Case]:
    """Cases whose id (`assignment/module::name[param]`) matches `pattern` (a regex) somewhere."""
    found = [c for c in cases if re.search(pattern, c.id)]
    assert found, f"no case matches {pattern!r}"
    return found


def run(bug: Bug, cases: list[Case], oracle: Oracle, tmp_path) -> dict[str, CaseResult]:
    submission = materialize(bug, tmp_path / bug.name)
    results = score(cases, oracle, run_in_process(submission, cases), {})
    return {r.id: r for r in results}


def failed(results: dict[str, CaseResult]) -> dict[str, str]:
    return {i: r.message for i, r in results.items() if not r.passed}


# ---- a correct op built from other ops passes ----

TANH_FROM_EXP = Bug(
    "tanh-from-exp",
    "a correct tanh built from other ops, (e - n) / (e + n) with e = exp(x), n = exp(-x)",
    [(ENGINE, TANH_RULE, "        e, n = self.exp(), (-self).exp()\n        return (e - n) / (e + n)\n")],
)


def test_a_correct_tanh_built_from_other_ops_passes(cases, oracle, tmp_path):
    """Its rule-alone cases run every node tanh created, not only the output's _backward.
    (At x = +-1000 exp overflows: that failure is real, and says so.)"""
    results = run(TANH_FROM_EXP, chosen(cases, r"^micrograd/.*tanh"), oracle, tmp_path)
    assert any("rule[tanh" in i for i in results) and any("backward[tanh" in i for i in results)
    wrong = {i: m for i, m in failed(results).items() if "OverflowError" not in m}
    assert wrong == {}
    overflow = [i for i in failed(results)]
    assert overflow and all("large" in i for i in overflow), overflow


# ---- a wrong rule is named, not the `+=` of a node with several consumers ----


def first_lines(results: dict[str, CaseResult], cases: list[Case]) -> dict[str, str]:
    """The first line of every failure of a traced case (an untraced one has no tape)."""
    traced = {c.id for c in cases if c.trace}
    return {i: m.splitlines()[0] for i, m in failed(results).items() if i in traced}


def test_a_wrong_tanh_rule_is_named_even_on_a_node_with_two_consumers(cases, oracle, tmp_path):
    bug = BY_NAME["tanh-no-square"]
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    lines = first_lines(run(bug, micrograd, oracle, tmp_path), micrograd)
    assert len(lines) > 10
    assert {i: line for i, line in lines.items() if not line.startswith("wrong gradient from tanh")} == {}


def test_a_wrong_pow_rule_is_named_not_the_division_built_on_it(cases, oracle, tmp_path):
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    results = run(BY_NAME["pow-off-by-one"], micrograd, oracle, tmp_path)
    lines = first_lines(results, micrograd)
    assert "micrograd/test_ops::backward[div]" in lines and "micrograd/test_ops::backward[rdiv]" in lines
    assert {i: line for i, line in lines.items() if not line.startswith("wrong gradient from pow")} == {}
    division = failed(results)["micrograd/test_ops::backward[div]"]
    assert "b**-1" in division and "a / b is built from" in division, division


# ---- leaves that do not require a gradient ----

NO_GRAD_LEAVES = Bug(
    "leaves-without-requires-grad",
    "Value(data) makes a leaf with requires_grad=False, and backward() skips such nodes",
    [
        (
            ENGINE,
            '    def __init__(self, data, _children=(), _op="", label=""):\n',
            '    def __init__(self, data, _children=(), _op="", label="", requires_grad=False):\n'
            "        self.requires_grad = requires_grad or any(c.requires_grad for c in _children)\n",
        ),
        (
            ENGINE,
            "        for node in reversed(topo):\n            node._backward()\n",
            "        for node in reversed(topo):\n"
            "            if node.requires_grad:\n"
            "                node._backward()\n",
        ),
    ],
)


def test_leaves_made_without_requires_grad_are_said_to_get_no_gradient(cases, oracle, tmp_path):
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    lines = first_lines(run(NO_GRAD_LEAVES, micrograd, oracle, tmp_path), micrograd)
    assert len(lines) > 20
    assert {i: line for i, line in lines.items() if not line.endswith("received no gradient")} == {}
    message = failed(run(NO_GRAD_LEAVES, chosen(cases, r"test_ops::backward\[add\]"), oracle, tmp_path))
    assert message["micrograd/test_ops::backward[add]"].startswith("the leaves a, b received no gradient")
    assert "requires_grad = False" in message["micrograd/test_ops::backward[add]"]
