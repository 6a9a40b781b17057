"""The slips needle students make: each with what gives it away and one line naming it.

As micrograd's (`grader/assignments/micrograd/slips.py`): after the diagnosis has found the
place, the first slip whose detector recognises the case puts its line under the message's
first line. A detector reads only what the verdict has (`grader.verdict.diagnose.Evidence`).
"""

from __future__ import annotations

from typing import Any

from grader.assignments import Slip
from grader.assignments.needle import hints


def _orders(evidence: Any) -> list[tuple[list[int], list[int]]]:
    """(the contract's, the submission's) topological orders among the results that differ,
    as tape indices."""
    found = []
    for m in evidence.mismatches:
        if "topological order" in m.name and m.expected is not None and m.actual is not None:
            found.append(([int(x) for x in m.expected.data], [int(x) for x in m.actual.data]))
    return found


def _is_topological(evidence: Any, order: list[int]) -> bool:
    """Does every node of `order` come after those of its inputs that `order` holds?"""
    place = {node: k for k, node in enumerate(order)}
    steps = evidence.tape.steps
    return all(
        0 <= node < len(steps) and all(place.get(i, -1) < place[node] for i in evidence.inputs(node))
        for node in order
    )


def node_before_inputs(evidence: Any) -> dict[str, str] | None:
    """A node is listed before one of its inputs: not a topological order at all."""
    if any(not _is_topological(evidence, got) for _, got in _orders(evidence)):
        return {}
    return None


def inputs_out_of_order(evidence: Any) -> dict[str, str] | None:
    """A topological order, but not the contract's: the inputs were visited in another order."""
    orders = _orders(evidence)
    if orders and all(_is_topological(evidence, got) and sorted(got) == sorted(want) for want, got in orders):
        return {}
    return None


def recursion(evidence: Any) -> dict[str, str] | None:
    failure = evidence.failure
    return {} if failure is not None and failure.type == "RecursionError" else None


SLIPS = (
    Slip(
        "node-before-inputs",
        "find_topo_sort lists a node before one of its inputs: append each node after its inputs, "
        "a post-order depth-first search",
        node_before_inputs,
        blame="find_topo_sort",
    ),
    Slip(
        "inputs-out-of-order",
        "the contract: find_topo_sort visits each node's inputs in order (inputs[0] first), then the "
        "node; this is a topological order, but another one",
        inputs_out_of_order,
        blame="find_topo_sort",
    ),
    Slip("recursive-sort", hints.RECURSION, recursion),
)
