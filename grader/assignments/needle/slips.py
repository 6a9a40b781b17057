"""The slips needle students make: each with what gives it away and one line naming it.

As micrograd's (`grader/assignments/micrograd/slips.py`): after the diagnosis has found the
place, the first slip whose detector recognises the case puts its line under the message's
first line. A detector reads only what the verdict has (`grader.verdict.diagnose.Evidence`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

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


def output_grad_unset(evidence: Any) -> dict[str, str] | None:
    """A backward() output holds no gradient, and every other node's gradient is right."""
    tape = evidence.tape
    if not tape.actual or not tape.outputs:
        return None
    outputs = set(tape.outputs)
    unset = any(tape.actual[o]["grad"] is None and tape.expected[o]["grad"] is not None for o in outputs)
    rest = (i for i in range(len(tape.steps)) if i not in outputs)
    return {} if unset and not any(tape.differs(i, "grad") for i in rest) else None


def _gradients(evidence: Any, reason: str) -> list[Any]:
    """The gradients among the results that differ, for `reason` ("shape", "dtype")."""
    return [
        m
        for m in evidence.mismatches
        if m.reason == reason and (m.name.endswith(".grad") or m.name.startswith("gradient for"))
    ]


def _op(evidence: Any) -> str:
    return evidence.diagnosis.blame or "a gradient rule"


def not_reduced(evidence: Any) -> dict[str, str] | None:
    """A gradient with more entries than its input: a broadcast (or a batched matmul) was
    not summed back."""
    for m in _gradients(evidence, "shape"):
        if np.prod(m.actual.shape) > np.prod(m.expected.shape):
            return {"op": _op(evidence), "want": str(m.expected.shape), "got": str(m.actual.shape)}
    return None


def not_broadcast_back(evidence: Any) -> dict[str, str] | None:
    """A gradient with fewer entries than its input: what the forward reduced was not
    broadcast back."""
    for m in _gradients(evidence, "shape"):
        if np.prod(m.actual.shape) < np.prod(m.expected.shape):
            return {"op": _op(evidence), "want": str(m.expected.shape), "got": str(m.actual.shape)}
    return None


def wrong_dtype(evidence: Any) -> dict[str, str] | None:
    """A gradient whose numbers are right but whose dtype is not its input's."""
    for m in _gradients(evidence, "dtype"):
        return {"op": _dtype_op(evidence) or _op(evidence), "want": m.expected.dtype, "got": m.actual.dtype}
    return None


def _dtype_op(evidence: Any) -> str:
    """The op whose gradient rule, run alone, returned another dtype than PyTorch's."""
    tape = evidence.tape
    for i, step in enumerate(tape.steps if tape.actual else ()):
        e, a = tape.expected[i].get("value"), tape.actual[i].get("value")
        if step.op.endswith(".gradient") and e is not None and a is not None and e.dtype != a.dtype:
            return step.op.removesuffix(".gradient")
    return ""


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
    Slip(
        "not-reduced",
        "{op}'s gradient has shape {got}, more entries than its input's {want}: sum it over the "
        "axes that broadcasting (or a batched matmul) added or stretched",
        not_reduced,
    ),
    Slip(
        "not-broadcast-back",
        "{op}'s gradient has shape {got}, fewer entries than its input's {want}: broadcast it back "
        "to the input's shape",
        not_broadcast_back,
    ),
    Slip(
        "wrong-dtype",
        "{op}'s gradient is {got} where its input is {want}: a gradient keeps its input's dtype, so "
        "an array the rule makes (a mask, a constant) takes the input's dtype",
        wrong_dtype,
        blame="{op}",
    ),
    Slip(
        "output-grad-unset",
        "backward sets every gradient but the output's own: the output's own gradient is out_grad "
        "(ones when none is given)",
        output_grad_unset,
        blame="backward",
    ),
    Slip("recursive-sort", hints.RECURSION, recursion),
)
