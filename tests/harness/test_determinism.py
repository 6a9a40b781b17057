"""The same submission always gets the same score.

micrograd's `_prev` is a set, so a student's backward() visits a node's inputs in the order
of their memory addresses. A rule that assigns (`=`) where it should add (`+=`) is hidden
when it happens to run first on a node, so before the grader fixed the order the same
submission scored 233, 235, 233, 235 and 234 over five gradings. Here: the visiting order no
longer follows the heap, a sandboxed regrade gives one score, and the bug still fails the
cases meant to catch it every time.
"""

from __future__ import annotations

import pytest

from grader.assignments.micrograd.adapter import MicrogradBackend, OrderedChildren, fix_visiting_order
from grader.case.define import collect
from grader.case.run import run_case
from grader.pipeline import REPO, SUITES_DIR
from tests.harness.bugs import materialize
from tests.harness.bugs.micrograd import BY_NAME
from tests.harness.grading import grade


@pytest.fixture(scope="module")
def add_assigns(tmp_path_factory):
    return materialize(BY_NAME["add-assigns"], tmp_path_factory.mktemp("add-assigns"))


def _results(modules, case, padding: int):
    """Run `case` after `padding` objects of a Value's size have been allocated and kept:
    every node of the case then sits at another address (and so in another set order)."""
    keep = [modules["engine"].Value(0.0) for _ in range(padding)]
    run = run_case(case, MicrogradBackend(modules), [])
    del keep
    return run.failure, {name: q.data if q is not None else None for name, q in run.results.items()}


def test_random_programs_give_the_same_gradients_at_any_addresses(add_assigns):
    """Before the fix, the buggy engine's gradients on these cases changed with the padding."""
    modules = MicrogradBackend.load(add_assigns)
    cases = [c for c in collect(SUITES_DIR, ["micrograd"], ["public", "hidden"]) if c.topic == "random"]
    assert cases
    for case in cases:
        first = _results(modules, case, 0)
        for padding in (1, 2, 3, 5, 8, 13):
            assert _results(modules, case, padding) == first, (case.id, padding)


def test_the_order_is_that_of_the_case_then_by_op_and_value():
    modules = MicrogradBackend.load(REPO / "reference")
    lib = MicrogradBackend(modules)
    a, b = lib.value(1.0, "a"), lib.value(2.0, "b")
    product = b * a
    out = product - a  # `- a` is made of the engine's own nodes: a * -1, then an add
    lib.backward(out)
    assert isinstance(out.raw._prev, OrderedChildren)
    first, second = out.raw._prev
    assert first is product.raw and second._op == "*"  # the case's node, then the engine's own
    assert list(product.raw._prev) == [a.raw, b.raw]  # the order the case made them in
    assert (a.raw.grad, b.raw.grad) == (1.0, 1.0)  # d/da (b*a - a) = b - 1, d/db = a
    flipped = 3 - a  # -a + 3: both inputs the engine's own, by op ('' before '*'), then value
    lib.backward(flipped)
    constant, negated = flipped.raw._prev
    assert (constant._op, constant.data, negated._op) == ("", 3.0, "*")


def test_a_set_changed_afterwards_iterates_as_a_set():
    children = OrderedChildren([3, 1, 2])
    assert list(children) == [3, 1, 2] and children == {1, 2, 3}
    children.add(4)
    assert sorted(children) == [1, 2, 3, 4]


def test_odd_nodes_are_walked_not_changed():
    class Node:
        def __init__(self, prev):
            self._prev = prev

    leaf = Node(set())
    tuple_node = Node((leaf, leaf))
    root = Node({tuple_node, Node(None)})
    fix_visiting_order(root, {})
    assert type(tuple_node._prev) is tuple
    assert isinstance(root._prev, OrderedChildren)


def test_five_sandboxed_gradings_give_one_score(add_assigns, oracle):
    """`grade --assignment micrograd --suite all` five times: one score, and the cases the
    bank names for this bug fail in every one."""
    reports = [grade(add_assigns, "all", ["micrograd"], oracle=oracle) for _ in range(5)]
    scores = {r.score for r in reports}
    failing = {frozenset(r.id for r in report.results if not r.passed) for report in reports}
    assert len(scores) == 1, scores
    assert len(failing) == 1
    (failed,) = failing
    for pattern in ("test_accumulation::add_twice", "test_ops::rule[add-same-leaf]"):
        assert any(pattern in case_id for case_id in failed), pattern
    reference = grade(REPO / "reference", "all", ["micrograd"], oracle=oracle)
    assert reference.score == reference.max_score > scores.pop()
