"""The slips needle students make: each with what gives it away and one line naming it.

As micrograd's (`grader/assignments/micrograd/slips.py`): after the diagnosis has found the
place, the first slip whose detector recognises the case puts its line under the message's
first line. A detector reads only what the verdict has (`grader.verdict.diagnose.Evidence`).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import numpy as np

from grader.assignments import SOME_RULE, Slip, calls_itself, raised, repeated, unhashable
from grader.assignments.needle import hints
from grader.assignments.needle.backend import IN_NUMPY, NUMPY_OPERAND, fixed_out_grad
from grader.case.trace import NodeRef


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


def left_out(evidence: Any) -> dict[str, str] | None:
    """Nodes the roots depend on are not listed (a search that placed a node other than the
    one it had finished, or never placed its root). Field: how many."""
    missing = max((len(set(want) - set(got)) for want, got in _orders(evidence)), default=0)
    return {"count": str(missing)} if missing else None


def listed_again(evidence: Any) -> dict[str, str] | None:
    """A node is listed more than once, and every node is listed: the search went down into
    a node it had placed already (no `visited` check), once per path to it. Seen in the
    orders the sort's own cases return, or, in any case whose tape was read, in how often
    the sort lists each node of the case's graph (the adapter's `listed_by_sort`): there a
    wrong gradient is the partial adjoints of a node listed twice, added twice. Only the
    nodes the case's outputs depend on count: the sort is asked from them, and a node made
    after them (an SGD step's update from the gradient) is in no graph it is asked about. (A
    sort that lists some nodes twice and leaves others out went wrong otherwise: see
    `left_out`.)"""
    orders = _orders(evidence)
    if any(len(set(got)) < len(got) and set(want) <= set(got) for want, got in orders):
        return {}
    tape = evidence.tape
    graph = set().union(*(tape.ancestors(k) for k in tape.outputs))
    said = [q.data[0] for i in sorted(graph) if (q := tape.actual[i].get("listed_by_sort")) is not None]
    return {} if said and max(said) > 1.0 and min(said) > 0.0 else None


def node_before_inputs(evidence: Any) -> dict[str, str] | None:
    """A node is listed before one of its inputs: not a topological order at all."""
    if any(not _is_topological(evidence, got) for _, got in _orders(evidence)):
        return {}
    return None


def reached_too_early(evidence: Any) -> dict[str, str] | None:
    """backward asked for the partial adjoints of a node that had none yet (a KeyError in its
    dict of them): it walked the nodes in an order where a node comes before an op that uses it."""
    failure = evidence.failure
    if failure is None or failure.type != "KeyError" or not failure.where:
        return None
    return {} if failure.where[2] == hints.BACKWARD else None


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


def no_gradient_stored(evidence: Any) -> dict[str, str] | None:
    """No node holds a gradient after backward, the output and its leaves neither, where
    PyTorch gives them one: backward computed them (or not) and kept none."""
    tape = evidence.tape
    if not tape.actual or not tape.outputs:
        return None
    due = [i for i in range(len(tape.steps)) if tape.expected[i].get("grad") is not None]
    unset = set(tape.outputs) <= set(due) and all(tape.actual[i].get("grad") is None for i in due)
    return {} if len(due) > len(tape.outputs) and unset else None


def _starved(evidence: Any) -> int | None:
    """The node backward is blamed for, if it got no gradient at all though every op that
    uses it has its own gradient, and the right one: their partial adjoints were there to sum."""
    tape, i = evidence.tape, evidence.diagnosis.wrong
    if evidence.diagnosis.blame != "backward" or i is None or not tape.actual:
        return None
    if tape.actual[i].get("grad") is not None or tape.expected[i].get("grad") is None:
        return None
    users = tape.consumers(i)
    if not users or any(tape.actual[j].get("grad") is None or tape.differs(j, "grad") for j in users):
        return None
    return i


def _listed(evidence: Any, i: int) -> bool | None:
    """Does find_topo_sort list node i (the adapter's `listed_by_sort`)? None: unknown."""
    said = evidence.tape.actual[i].get("listed_by_sort")
    return None if said is None else said.data[0] >= 1.0


def never_visited(evidence: Any) -> dict[str, str] | None:
    """A starved node (`_starved`) that find_topo_sort leaves out, or of which it is not
    known: backward never came to it (a sort that leaves nodes out lists it nowhere)."""
    i = _starved(evidence)
    return None if i is None or _listed(evidence, i) else {"node": evidence.tape.name(i)}


def visited_not_stored(evidence: Any) -> dict[str, str] | None:
    """A starved node (`_starved`) that find_topo_sort lists: backward came to it and
    stored nothing (a `continue` for leaves before their gradient is set)."""
    i = _starved(evidence)
    return {"node": evidence.tape.name(i)} if i is not None and _listed(evidence, i) else None


def kept_earlier_gradient(evidence: Any) -> dict[str, str] | None:
    """In a case that reads a gradient (`g = grad(x)`) and then runs another backward, x's
    gradient is PyTorch's plus that earlier one: the later backward added to it. The earlier
    gradient must be right: a wrong rule makes it wrong, and then what the later backward
    left can match the sum by the case's own arithmetic (MulScalar's rule without its
    scalar, in a case that scales by 0.25 twice)."""
    tape = evidence.tape
    if not tape.actual:
        return None
    for k, step in enumerate(tape.steps):
        if step.op != "grad" or not evidence.inputs(k) or tape.differs(k, "value"):
            continue
        i = evidence.inputs(k)[0]
        e, a, earlier = tape.expected[i]["grad"], tape.actual[i]["grad"], tape.actual[k]["value"]
        if None in (e, a, earlier) or not tape.differs(i, "grad"):
            continue
        if _same(a.array(), e.array() + earlier.array()):
            return {"node": tape.name(i)}
    return None


def carries_over(evidence: Any) -> dict[str, str] | None:
    """A case that differentiates a gradient has a wrong gradient, and backward, run twice on
    a fresh graph, left twice the first gradient on a node (the adapter's `carries_over`
    probe): the backward through the gradient started from what the first one left on the
    nodes of its graph, interior ones too, so no node's gradient is PyTorch's plus an earlier
    one that `kept_earlier_gradient` could see."""
    return {} if _backward_probe_says(evidence, "carries_over", 1.0) else None


def _backward_probe_says(evidence: Any, key: str, answer: float) -> bool:
    """Is a gradient wrong, and did the adapter's probe of backward `key` (run on a fresh
    graph, said on the tape's node that carries it) answer `answer`?"""
    return any(m.is_grad for m in evidence.mismatches) and _probe_said(evidence, key, answer)


def _probe_said(evidence: Any, key: str, answer: float) -> bool:
    """Did the adapter's probe of backward `key` answer `answer` (said on the tape's node
    that carries it)?"""
    return any((q := entry.get(key)) is not None and q.data[0] == answer for entry in evidence.tape.actual)


def gradient_detached(evidence: Any) -> dict[str, str] | None:
    """A case that differentiates a gradient has a wrong gradient, and backward, run on a
    fresh sum(x * x), left x a gradient that is a leaf (the adapter's `grad_is_node` probe):
    the gradient the case differentiates has no graph, so the backward through it sends
    nothing back."""
    return {} if _backward_probe_says(evidence, "grad_is_node", 0.0) else None


def output_grad_to_every_rule(evidence: Any) -> dict[str, str] | None:
    """A gradient is wrong, and backward, run from (x * 3) * 5 on a fresh leaf x, left x 3
    where 15 is due (the adapter's `rules_get_node_grad` probe): it called x * 3's rule with
    the output's out_grad, not with that node's own gradient."""
    return {} if _backward_probe_says(evidence, "rules_get_node_grad", 0.0) else None


def processed_again(evidence: Any) -> dict[str, str] | None:
    """The failure is laid at backward (every rule it ran is right on its own: a gradient, or
    a gradient read inside the case, came out wrong) or at no part yet (a backward through a
    gradient went wrong), and backward, run from d = b + b (b = x * 3) on a fresh leaf x,
    left x 12 where 6 is due (the adapter's `processed_once` probe): it processed b once per
    path to it, and what b sends x was added twice. Where find_topo_sort lists a node once
    per path, that is the cause (`listed-again`); here backward made an order of its own."""
    if evidence.diagnosis.blame not in ("backward", ""):
        return None  # a rule is wrong: that is what to fix first
    return {} if _probe_said(evidence, "processed_once", 0.0) else None


def adjoints_to_wrong_inputs(evidence: Any) -> dict[str, str] | None:
    """A gradient is wrong, and backward, run from x * y on fresh leaves, left x the
    gradient its rule returned for y (the adapter's `pairs_in_order` probe): backward sends
    what each rule returns to the inputs in another order."""
    return {} if _backward_probe_says(evidence, "pairs_in_order", 0.0) else None


def _gradients(evidence: Any, reason: str) -> list[Any]:
    """The gradients among the results that differ, for `reason` ("shape", "dtype")."""
    return [
        m
        for m in evidence.mismatches
        if m.reason == reason and (m.name.endswith(".grad") or m.name.startswith("gradient for"))
    ]


def _op(evidence: Any) -> str:
    return evidence.diagnosis.blame or SOME_RULE


def _untold(evidence: Any) -> bool:
    """A case too big to keep a tape, whose failure no part is known for: a gradient of the
    wrong shape there may be a rule's (one that did not sum or broadcast back) or backward's
    (one that hands every rule the output's out_grad, whose shape the rules pass on), and
    only the smaller cases, which the message sends the student to, tell which."""
    return not evidence.tape.expected and not evidence.diagnosis.blame  # (`trace=False`)


def reshape_not_undone(evidence: Any) -> dict[str, str] | None:
    """Reshape's rule, blamed, left a gradient of another shape than its input's: it did not
    reshape out_grad back (summing or broadcasting, which the shape slips below advise, is
    not its fix: a reshape moves no number)."""
    if evidence.diagnosis.blame == "Reshape" and _gradients(evidence, "shape"):
        return {"op": "Reshape"}
    return None


def not_reduced(evidence: Any) -> dict[str, str] | None:
    """A gradient with more entries than its input: a broadcast (or a batched matmul) was
    not summed back."""
    if _untold(evidence):
        return None
    for m in _gradients(evidence, "shape"):
        if np.prod(m.actual.shape) > np.prod(m.expected.shape):
            return {"op": _op(evidence), "want": str(m.expected.shape), "got": str(m.actual.shape)}
    return None


def size_one_axes_dropped(evidence: Any) -> dict[str, str] | None:
    """A gradient with its input's numbers, in its input's order, in a shape without (or with
    more) axes of size 1: the sum over the stretched axes was not reshaped back."""
    for m in _gradients(evidence, "shape"):
        squeezed = [n for n in m.expected.shape if n != 1] == [n for n in m.actual.shape if n != 1]
        if squeezed and _same(np.asarray(m.actual.data), np.asarray(m.expected.data)):
            return {"op": _op(evidence), "want": str(m.expected.shape), "got": str(m.actual.shape)}
    return None


def not_broadcast_back(evidence: Any) -> dict[str, str] | None:
    """A gradient with fewer entries than its input: what the forward reduced was not
    broadcast back."""
    if _untold(evidence):
        return None
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


def _same(a: Any, b: Any) -> bool:
    return bool(np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-6, atol=1e-9))


def _rules(evidence: Any) -> list[tuple[str, Any, Any, Any, Any, Any]]:
    """(op class, its input x, its output y, the out_grad it got, PyTorch's gradient for x,
    the submission's) for each one-input op whose gradient rule is wrong: rules run alone
    (`Log.gradient` steps) and, in a backward, the rules probed alone on a node whose own
    gradient is right (so that both probes had the same out_grad)."""
    tape, found = evidence.tape, []
    if not tape.actual:
        return found
    for i, step in enumerate(tape.steps):
        if step.op.endswith(".gradient") and tape.differs(i, "value"):
            node, out_grad = (r.index for r in step.inputs[:2])
            if len(evidence.inputs(node)) == 1:
                e, a = tape.expected[i]["value"], tape.actual[i]["value"]
                if a is not None and e.shape == a.shape:
                    x = evidence.value(evidence.inputs(node)[0])
                    row = (evidence.value(node), evidence.value(out_grad), e.array(), a.array())
                    found.append((step.op.removesuffix(".gradient"), x, *row))
        elif len(evidence.inputs(i)) == 1 and not tape.differs(i, "grad"):
            pair = evidence.rule_pair(i)
            cls = tape.hints.op_class(step.op, step.inputs)
            if pair is not None and cls and tape.expected[i]["grad"] is not None:
                x, y = evidence.value(evidence.inputs(i)[0]), evidence.value(i)
                g = tape.expected[i]["grad"].array()
                found.append((cls, x.reshape(-1), y.reshape(-1), g.reshape(-1), *pair))
            elif cls and (fixed := _fixed_pair(tape, i)) is not None:
                x, y = evidence.value(evidence.inputs(i)[0]), evidence.value(i)
                g = fixed_out_grad(np.shape(y))
                found.append((cls, x.reshape(-1), y.reshape(-1), g.reshape(-1), *fixed))
    return found


def _fixed_pair(tape: Any, i: int) -> tuple[Any, Any] | None:
    """Node i's rule probed alone with `fixed_out_grad` (a case that differentiates a
    gradient, where PyTorch keeps no gradient of the first graph's inner nodes), (PyTorch's,
    the submission's) as flat arrays, when both are known and differ."""
    e, a = tape.expected[i].get("rule_fixed"), tape.actual[i].get("rule_fixed")
    if e is None or a is None or len(e.data) != len(a.data):
        return None
    e, a = e.array().reshape(-1), a.array().reshape(-1)
    return None if _same(a, e) else (e, a)


def gradients_swapped(evidence: Any) -> dict[str, str] | None:
    """Two inputs' gradients came back in each other's places (`return out_grad * lhs,
    out_grad * rhs` for a product): each got what the other should have."""
    grads = [
        m
        for m in evidence.mismatches
        if m.reason == "value" and m.expected is not None and m.actual is not None
        and (m.is_grad or m.name.startswith("gradient for"))
    ]  # fmt: skip
    for m, n in itertools.combinations(grads, 2):
        if _same(m.actual.array(), n.expected.array()) and _same(n.actual.array(), m.expected.array()):
            return {"op": _op(evidence)}
    return _swapped_in_probe(evidence)


def _swapped_in_probe(evidence: Any) -> dict[str, str] | None:
    """A two-input op whose rule, probed alone (with its node's gradient, or the fixed
    out_grad), sent each input what PyTorch's sends the other, where the two differ: the
    case's own results mix it with the other ops' contributions."""
    tape = evidence.tape
    for i, step in enumerate(tape.steps if tape.actual else ()):
        if len(evidence.inputs(i)) != 2:
            continue
        pair = evidence.rule_pair(i) or _fixed_pair(tape, i)
        sizes = {np.size(evidence.value(j)) for j in evidence.inputs(i)}
        if pair is None or len(sizes) != 1 or 2 * sizes.pop() != pair[0].size:
            continue  # the probe holds the two inputs' gradients, one after the other
        e, a = (np.split(v, 2) for v in pair)
        if not _same(e[0], e[1]) and _same(a[0], e[1]) and _same(a[1], e[0]):
            return {"op": tape.hints.op_class(step.op, step.inputs) or step.op}
    return None


def matmul_shapes(evidence: Any) -> dict[str, str] | None:
    """NumPy's matmul refused two factors inside MatMul's gradient: their shapes do not line
    up (a product in the wrong order, a transpose missing or one too many). The rule's own
    doing: had backward given it an out_grad of another shape than its node, the adapter's
    account of the exception would say so instead (`OutGradShapeError`)."""
    failure = evidence.failure
    said = failure is not None and failure.type == "ValueError" and "matmul" in failure.message
    return {} if said and failure.rule == "MatMul.gradient" else None


def relu_slope_at_zero(evidence: Any) -> dict[str, str] | None:
    """ReLU's gradient passed out_grad on where the input is exactly 0, and is right elsewhere."""
    for op, x, _, g, e, a in _rules(evidence):
        zero = x == 0
        if op == "ReLU" and zero.any() and _same(a[~zero], e[~zero]) and _same(a[zero], g[zero]):
            return {"op": op}
    return None


#: op -> its derivative from its input x and output y, the same with x and y mixed up
DERIVATIVES = {
    "Exp": (lambda x, y: y, lambda x, y: x),
    "Tanh": (lambda x, y: 1 - y**2, lambda x, y: 1 - x**2),
    "Log": (lambda x, y: 1 / x, lambda x, y: 1 / y),
}


def _swapped(evidence: Any, ops: tuple[str, ...]) -> dict[str, str] | None:
    with np.errstate(all="ignore"):
        for op, x, y, g, _, a in _rules(evidence):
            if op in ops and _same(a, g * DERIVATIVES[op][1](x, y)):
                return {"op": op}
    return None


def input_for_output(evidence: Any) -> dict[str, str] | None:
    """Exp, Tanh: the derivative is written with the input where it reads the output (node)."""
    return _swapped(evidence, ("Exp", "Tanh"))


def output_for_input(evidence: Any) -> dict[str, str] | None:
    """Log: the derivative is written with the output (node) where it reads the input."""
    return _swapped(evidence, ("Log",))


def tanh_without_square(evidence: Any) -> dict[str, str] | None:
    """Tanh's gradient used 1 - t where the derivative is 1 - t**2 (t = tanh(x), the node)."""
    for op, _, y, g, e, a in _rules(evidence):
        if op == "Tanh" and _same(a, g * (1 - y)) and not _same(a, e):
            return {"op": op}
    return None


def relu_output_as_slope(evidence: Any) -> dict[str, str] | None:
    """ReLU's gradient multiplied out_grad by its output (node) where its slope is 1 above 0
    (a mask): what it sent is out_grad times the output, and an output other than 0 or 1 says so."""
    for op, _, y, g, e, a in _rules(evidence):
        if op == "ReLU" and _same(a, g * y) and not _same(a, e) and np.any((y != 0) & ~np.isclose(y, 1.0)):
            return {"op": op}
    return None


def power_off_by_one(evidence: Any) -> dict[str, str] | None:
    """PowerScalar's gradient (or EWisePow's for its base a) took a to the power n (or n - 2)
    where the derivative has n - 1: what it sent is PyTorch's times a (or over a), away from
    0 and from +-1."""
    rows = [(op, x, e, a) for op, x, _, _, e, a in _rules(evidence)]
    rows += [("EWisePow", x, e, a) for x, _, e, a in _input_rules(evidence, "EWisePow")]
    for op, x, e, a in rows:
        x, e, a = (np.reshape(v, -1) for v in (x, e, a))
        if op not in ("PowerScalar", "EWisePow") or not x.size == e.size == a.size:
            continue
        away = ~np.isclose(np.abs(x), 0.0) & ~np.isclose(np.abs(x), 1.0)  # (there, a * x tells nothing)
        x, e, a = x[away], e[away], a[away]
        if x.size and (_same(a, e * x) or _same(a * x, e)) and not _same(a, e):
            return {"op": op}
    return None


#: an op whose rule multiplies out_grad where it must divide, or the other way round: what
#: it did, by what, and its derivative (the math, not the line of code: the message is a hint)
INVERTED = {
    "DivScalar": dict(did="multiplies", by="the scalar", form="a / c", derivative="1 / c"),
    "MulScalar": dict(did="divides", by="the scalar", form="a * c", derivative="c"),
    "Log": dict(did="multiplies", by="its input a", form="log(a)", derivative="1 / a"),
    "EWiseDiv": dict(did="multiplies", by="b", form="a / b", derivative="1 / b"),
}


def inverted(evidence: Any) -> dict[str, str] | None:
    """DivScalar's gradient multiplied out_grad by the scalar c (MulScalar's divided it, Log's
    multiplied by its input, EWiseDiv's multiplied a's by b): it gave g * c where PyTorch's is
    g / c, or the other way round, so the two multiply to g**2."""
    rows = [(op, g, e, a) for op, _, _, g, e, a in _rules(evidence)]
    rows += [("EWiseDiv", g, e, a) for _, g, e, a in _input_rules(evidence, "EWiseDiv")]
    for op, g, e, a in rows:
        g, e, a = (np.reshape(v, -1) for v in (g, e, a))
        if op in INVERTED and g.size == e.size == a.size and _same(a * e, g * g) and not _same(a, e):
            return {"op": op, **INVERTED[op]}
    return None


def _input_rules(evidence: Any, op_class: str, k: int = 0) -> list[tuple[Any, Any, Any, Any]]:
    """(input k, the out_grad, PyTorch's gradient for input k, the submission's) for each
    two-input `op_class` node: its rule run alone for input k, or probed alone in a backward
    on a node whose own gradient is right (the probe holds the inputs' gradients in order,
    each of the node's size: needle broadcasts only with BroadcastTo)."""
    tape, found = evidence.tape, []
    for i, step in enumerate(tape.steps if tape.actual else ()):
        alone = step.op == f"{op_class}.gradient" and step.kwargs.get("input", 0) == k
        if alone and tape.differs(i, "value"):
            node, out_grad = (r.index for r in step.inputs[:2])
            e, a = tape.expected[i]["value"], tape.actual[i]["value"]
            if a is not None and e.shape == a.shape:
                x = evidence.value(evidence.inputs(node)[k])
                found.append((x, evidence.value(out_grad), e.array(), a.array()))
        elif _probed_in_backward(evidence, i, op_class, 2):
            pair = evidence.rule_pair(i)
            g = tape.expected[i]["grad"].array().reshape(-1)
            found += _input_part(evidence, i, k, g, pair)
        elif _of_class(evidence, i, op_class, 2) and (fixed := _fixed_pair(tape, i)) is not None:
            g = fixed_out_grad(np.shape(evidence.value(i))).reshape(-1)
            found += _input_part(evidence, i, k, g, fixed)
    return found


def _input_part(evidence: Any, i: int, k: int, g: Any, pair: tuple[Any, Any] | None) -> list[tuple[Any, ...]]:
    """Input k's share of node i's probe (`_input_rules`), out_grad `g`."""
    if pair is None or not pair[0].size == pair[1].size >= (k + 1) * g.size:
        return []
    part = slice(k * g.size, (k + 1) * g.size)
    return [(evidence.value(evidence.inputs(i)[k]).reshape(-1), g, pair[0][part], pair[1][part])]


def scalar_added(evidence: Any) -> dict[str, str] | None:
    """AddScalar's gradient added the scalar to out_grad: what it sent is out_grad plus the
    op's scalar (its output less its input), where PyTorch's is out_grad itself."""
    for op, x, y, g, e, a in _rules(evidence):
        x, y, g, e, a = (np.reshape(v, -1) for v in (x, y, g, e, a))
        if op != "AddScalar" or not x.size == y.size == g.size == e.size == a.size:
            continue
        c = y - x
        if not _same(c, 0.0) and _same(e, g) and _same(a, g + c):
            return {"op": op}
    return None


def divisor_not_squared(evidence: Any) -> dict[str, str] | None:
    """EWiseDiv's gradient for b divided by b once where the derivative divides by b**2:
    what it sent is PyTorch's times b, where b is away from 0 and from +-1."""
    for b, _, e, a in _input_rules(evidence, "EWiseDiv", 1):
        b, e, a = (np.reshape(v, -1) for v in (b, e, a))
        if not b.size == e.size == a.size:
            continue
        away = ~np.isclose(np.abs(b), 0.0) & ~np.isclose(np.abs(b), 1.0)  # (there, e * b tells nothing)
        if away.any() and _same(a[away], e[away] * b[away]) and not _same(a, e):
            return {"op": "EWiseDiv"}
    return None


def power_factor_left_out(evidence: Any) -> dict[str, str] | None:
    """PowerScalar's gradient left out the factor n: what it sent times n is PyTorch's, and
    it is the output over the input (a**(n - 1), or c * a**(n - 1) where the rule was probed
    in `c / a`, built from a**-1 and a MulScalar). At n = -1 that is also PyTorch's gradient
    with its sign flipped: the line then says both, since these numbers cannot tell which."""
    for op, x, y, g, e, a in _rules(evidence):
        x, y, g, e, a = (np.reshape(v, -1) for v in (x, y, g, e, a))
        if "PowerScalar" not in op.split(" and ") or not x.size == y.size == g.size == e.size == a.size:
            continue
        known = ~np.isclose(np.abs(x), 0.0) & ~np.isclose(np.abs(x), 1.0) & ~np.isclose(a, 0.0)
        known &= ~np.isclose(g, 0.0)
        if not known.any():
            continue
        n = e[known][0] / a[known][0]
        if not np.isclose(n, 1.0) and _same(a * n, e) and _same(a[known] / g[known] * x[known], y[known]):
            flipped = np.isclose(n, -1.0)
            return {"op": "PowerScalar", "or_sign": OR_SIGN if flipped else ""}
    return None


#: where n = -1, leaving out the factor n flips the gradient's sign, as a lost minus does
OR_SIGN = ", or has its sign flipped (at n = -1 the two give the same numbers)"


def no_chain_rule(evidence: Any) -> dict[str, str] | None:
    """A one-input op's gradient is its local derivative alone (`return node` for Exp, the
    mask for ReLU), not scaled by out_grad: times out_grad, it is PyTorch's."""
    for op, _, _, g, e, a in _rules(evidence):
        g, e, a = (np.reshape(v, -1) for v in (g, e, a))
        if g.size == e.size == a.size and _same(a * g, e) and not _same(a, e):
            return {"op": op}
    return None


#: a one-input op -> its own derivative, in words, for a gradient that leaves it out
OWN_DERIVATIVE = {
    "Exp": "exp(a), which node holds",
    "Log": "1 / a",
    "Tanh": "1 - tanh(a)**2",
    "PowerScalar": "n * a**(n - 1)",
    "MulScalar": "the scalar c",
    "DivScalar": "1 / c",
    "Negate": "-1",
    "ReLU": "1 where a > 0, and 0 elsewhere",
}


def passes_unchanged(evidence: Any) -> dict[str, str] | None:
    """A one-input op's gradient is out_grad as it came, without the op's own derivative
    (`return out_grad` for MulScalar): the rule's gradient equals the out_grad it got, run
    alone or inside a compound (Negate in `a - b`)."""
    for op, _, _, g, _, a in _rules(evidence):
        if op in OWN_DERIVATIVE and np.shape(a) == np.shape(g) and _same(a, g):
            return {"op": op, "derivative": OWN_DERIVATIVE[op]}
    op = _part_passes_unchanged(evidence)
    return {"op": op, "derivative": OWN_DERIVATIVE[op]} if op else None


def _part_passes_unchanged(evidence: Any) -> str | None:
    """The op class of a compound's part whose gradient, probed alone on its one input with
    `fixed_out_grad` (the tape's `parts`), is that out_grad unchanged."""
    tape = evidence.tape
    for j in evidence.op_nodes():
        step, built = tape.steps[j], hints.BUILT_FROM.get(tape.steps[j].op, ())
        for k in tape.wrong_parts(j) if built else []:
            op, text = built[k]
            ref = step.inputs[int(re.findall(r"\{(\d)\}", text)[0])]  # the part's input
            if op in OWN_DERIVATIVE and isinstance(ref, NodeRef):
                size = evidence.value(ref.index).size
                got = tape.actual[j]["parts"].array()[k][:size]
                if _same(got, fixed_out_grad((size,))):
                    return op
    return None


def wrong_sign(evidence: Any) -> dict[str, str] | None:
    """A gradient that is PyTorch's with its sign flipped, blamed on one op's rule: that rule
    lost a minus sign (or has one too many)."""
    if not evidence.diagnosis.blame:
        return None
    for m in _gradients(evidence, "value"):
        if m.expected.shape == m.actual.shape:
            want, got = m.expected.array(), m.actual.array()
            if not _same(want, np.zeros_like(want)) and _same(got, -want):
                return {"op": _op(evidence), "of": m.name}
    return _partial_adjoint_flipped(evidence)


def _partial_adjoint_flipped(evidence: Any) -> dict[str, str] | None:
    """A rule probed alone in a backward, on a node whose own gradient is right, sent one of
    its inputs PyTorch's partial adjoint with the sign flipped, where the case's gradients
    mix it with others' (b's in `a / b` beside what b's other uses send)."""
    tape = evidence.tape
    for i, step in enumerate(tape.steps if tape.actual else ()):
        op, inputs = tape.hints.op_class(step.op, step.inputs), evidence.inputs(i)
        if not op or not inputs or not _probed_in_backward(evidence, i, op, len(inputs)):
            continue
        pair, start = evidence.rule_pair(i), 0
        for x in inputs if pair is not None else ():
            size = evidence.value(x).size
            e, a = (side[start : start + size] for side in pair)
            start += size
            if e.size == size and not _same(e, np.zeros_like(e)) and _same(a, -e):
                return {"op": op, "of": f"its partial adjoint for {tape.name(x)}"}
    return None


def _of_class(evidence: Any, i: int, op_class: str, inputs: int) -> bool:
    """Is node i an `op_class` op of `inputs` inputs?"""
    step = evidence.tape.steps[i]
    same_class = evidence.tape.hints.op_class(step.op, step.inputs) == op_class
    return len(evidence.inputs(i)) == inputs and same_class


def _probed_in_backward(evidence: Any, i: int, op_class: str, inputs: int) -> bool:
    """Is node i an `op_class` op of `inputs` inputs whose rule was probed alone in a
    backward on a node whose own gradient is right (so both probes had the same out_grad)?"""
    tape = evidence.tape
    return (
        _of_class(evidence, i, op_class, inputs)
        and not tape.differs(i, "grad")
        and tape.expected[i]["grad"] is not None
    )


def transpose_last_two(evidence: Any) -> dict[str, str] | None:
    """Transpose's gradient swapped the last two axes whatever axes the op swapped
    (`transpose(out_grad)` without self.axes): run alone, or probed alone in a backward on a
    node whose own gradient is right."""
    tape = evidence.tape
    if not tape.actual:
        return None
    for i, step in enumerate(tape.steps):
        if step.op == "Transpose.gradient" and tape.differs(i, "value"):
            g, a = evidence.value(step.inputs[1].index), tape.actual[i]["value"]
            a = None if a is None else a.array()
        elif _probed_in_backward(evidence, i, "Transpose", 1):
            pair = evidence.rule_pair(i)
            g, a = tape.expected[i]["grad"].array(), None if pair is None else pair[1]
        else:
            continue
        g = np.asarray(g)
        if a is not None and g.ndim >= 2 and a.size == g.size:
            if _same(np.reshape(a, -1), np.swapaxes(g, -1, -2).reshape(-1)):
                return {"op": "Transpose"}
    return None


def pow_exponent_without_log(evidence: Any) -> dict[str, str] | None:
    """EWisePow's gradient for the exponent b is out_grad * a**b (the node), without the
    factor log(a): run alone, or probed alone in a backward on a node whose own gradient is
    right (the probe holds the base's gradient, then the exponent's)."""
    tape = evidence.tape
    if not tape.actual:
        return None
    for i, step in enumerate(tape.steps):
        if step.op == "EWisePow.gradient" and step.kwargs.get("input") == 1 and tape.differs(i, "value"):
            node, out_grad = (r.index for r in step.inputs[:2])
            a = tape.actual[i]["value"]
            want = np.asarray(evidence.value(out_grad)) * np.asarray(evidence.value(node))
            if a is not None and _same(a.array().reshape(-1), want.reshape(-1)):
                return {"op": "EWisePow"}
        elif _probed_in_backward(evidence, i, "EWisePow", 2):
            pair = evidence.rule_pair(i)
            y = np.asarray(evidence.value(i)).reshape(-1)
            g = tape.expected[i]["grad"].array().reshape(-1)
            if pair is None or pair[1].size != 2 * y.size or g.size != y.size:
                continue
            e, a = pair
            if _same(a[: y.size], e[: y.size]) and _same(a[y.size :], g * y):
                return {"op": "EWisePow"}
    return None


def one_adjoint_kept(evidence: Any) -> dict[str, str] | None:
    """The rules that send a node its partial adjoints are right, and the node's gradient
    is one of those adjoints, not their sum: backward kept one (the last it stored, or the
    first). Where the tape cannot show it (a gradient read inside the case, `g = grad(x)`,
    whose backward's nodes are not on the tape), backward run from d = b + b (b = x * 3) on
    a fresh leaf x left x 3 where 6 is due (the adapter's `processed_once` probe), while from
    (x * 3) * 5 it gave x its 15: each rule got its own node's gradient, and b kept one of
    the two adjoints d's rule sent it."""
    i = evidence.diagnosis.wrong
    if evidence.diagnosis.blame not in ("backward", ""):
        return None  # a rule is wrong: that is what to fix first
    if evidence.diagnosis.blame == "backward" and i is not None and evidence.single_adjoint(i):
        return {}
    kept_one = _probe_said(evidence, "processed_once", 2.0) and _probe_said(
        evidence, "rules_get_node_grad", 1.0
    )
    return {} if kept_one and evidence.mismatches else None


def adjoints_added_again(evidence: Any) -> dict[str, str] | None:
    """backward added a node's partial adjoints more than once (`repeated`): it processed its
    consumers more than once."""
    return repeated(evidence, evidence.tape)


def _not_differentiable(evidence: Any, found: float, right: bool = False) -> dict[str, str] | None:
    """The op whose gradient rule, its result differentiated again, the tape's
    `differentiable` entry says `found` of (the first in tape order); with `right`, only one
    whose rule, probed alone, gives PyTorch's numbers."""
    tape = evidence.tape
    for i, step in enumerate(tape.steps if tape.actual else ()):
        said = tape.actual[i].get("differentiable")
        if said is not None and said.data[0] == found and (not right or tape.known_rule(i) is True):
            return {"op": tape.hints.op_class(step.op, step.inputs) or step.op}
    return None


def in_numpy(evidence: Any) -> dict[str, str] | None:
    """A case that differentiates a gradient got wrong numbers, and an op's gradient rule
    returns a Tensor with no graph back to out_grad, whose numbers are right: computed in
    NumPy, then wrapped. (A rule that never reads out_grad, `return node`, has no graph back
    to it either; its numbers are wrong, and it makes no such slip.)"""
    return _not_differentiable(evidence, IN_NUMPY, right=True)


def numpy_operand(evidence: Any) -> dict[str, str] | None:
    """An op's gradient multiplies by a NumPy array, and backward through it fails (the
    exception surfaced elsewhere: `NumpyOperandError` names the rule) or goes wrong."""
    failure = evidence.failure
    if failure is not None:
        named = failure.type == "NumpyOperandError" and failure.where
        return {"op": failure.where[2].removesuffix(".gradient").split(".")[-1]} if named else None
    return _not_differentiable(evidence, NUMPY_OPERAND)


def _shape_error_in(evidence: Any, op_class: str) -> list[tuple[int, int]]:
    """When `op_class`'s gradient rule raised NumPy's shape error (a reshape or a broadcast
    that cannot be done), each of the case's `op_class` nodes as (its input's ndim, its own
    ndim), from PyTorch's run; else nothing."""
    failure = evidence.failure
    if failure is None or failure.type != "ValueError" or failure.rule != f"{op_class}.gradient":
        return []
    value = evidence.value
    return [(np.ndim(value(evidence.inputs(i)[0])), np.ndim(value(i))) for i in _nodes_of(evidence, op_class)]


def _nodes_of(evidence: Any, op_class: str) -> list[int]:
    """The case's one-input nodes of `op_class`."""
    tape = evidence.tape
    return [
        i
        for i, step in enumerate(tape.steps)
        if len(evidence.inputs(i)) == 1 and op_class in (step.op, tape.hints.op_class(step.op, step.inputs))
    ]


def broadcast_from_the_left(evidence: Any) -> dict[str, str] | None:
    """BroadcastTo's gradient raised a shape error on a broadcast that added leading axes:
    it lined the shapes up from the left, so it summed the wrong axes."""
    added = any(before < after for before, after in _shape_error_in(evidence, "BroadcastTo"))
    return {"op": "BroadcastTo"} if added else None


#: NumPy's words when a reshape cannot be done, with the size of what was reshaped (and the
#: shape it was to take)
RESHAPED = re.compile(r"cannot reshape array of size (\d+)(?: into shape \(([\d, ]*)\))?")


def summed_every_axis(evidence: Any) -> dict[str, str] | None:
    """BroadcastTo's gradient raised NumPy's reshape error on one number, to be reshaped into
    its input's shape of more entries: it summed out_grad over every axis."""
    failure = evidence.failure
    if failure is None or failure.type != "ValueError" or failure.rule != "BroadcastTo.gradient":
        return None
    reshaped = RESHAPED.search(failure.message)
    if reshaped is None or reshaped[1] != "1" or reshaped[2] is None:
        return None
    entries = math.prod(int(n) for n in reshaped[2].replace(" ", "").split(",") if n)
    return {"op": "BroadcastTo"} if entries > 1 else None


#: NumPy's words for a broadcast that cannot be done: the shape it was given, and the one asked
BROADCAST_FAILED = re.compile(
    r"remapped shapes \[original->remapped\]: \(([\d, ]*)\)\s+and requested shape \(([\d, ]*)\)"
)


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.replace(" ", "").split(",") if n)


def summed_axes_not_restored(evidence: Any) -> dict[str, str] | None:
    """Summation's gradient raised NumPy's broadcast error, broadcasting a Summation's output
    shape to its input's: it broadcast out_grad as it came, where the summed axes must first be
    made size 1 again (a sum over the last axis broadcasts back without it, so only others fail)."""
    failure = evidence.failure
    if failure is None or failure.type != "ValueError" or failure.rule != "Summation.gradient":
        return None
    found = BROADCAST_FAILED.search(failure.message)
    if found is None:
        return None
    given, asked = _shape(found[1]), _shape(found[2])
    for i in _nodes_of(evidence, "Summation"):
        got, want = np.shape(evidence.value(i)), np.shape(evidence.value(evidence.inputs(i)[0]))
        if (given, asked) == (got, want):
            return {"got": str(got), "want": str(want)}
    return None


def summed_axes_not_all_restored(evidence: Any) -> dict[str, str] | None:
    """Summation's gradient raised a shape error on a sum over several axes: it made fewer
    than all of them size 1 again before broadcasting back. Not where what it reshaped
    (out_grad) had another size than any Summation's output: the gradient it was given was
    wrong already (a Reshape rule upstream that left its out_grad unchanged)."""
    several = any(before - after > 1 for before, after in _shape_error_in(evidence, "Summation"))
    reshaped = RESHAPED.search(evidence.failure.message) if several else None
    if reshaped is not None:
        several = int(reshaped[1]) in {np.size(evidence.value(i)) for i in _nodes_of(evidence, "Summation")}
    return {"op": "Summation"} if several else None


SLIPS = (
    Slip(
        "nodes-left-out",
        "find_topo_sort leaves out {count} of the nodes the roots depend on: every node reached from "
        "the roots, the roots too, is listed once, after its inputs (go down into one input at a "
        "time, and place a node once all of its inputs are placed)",
        left_out,
        blame="find_topo_sort",
    ),
    Slip(
        "listed-again",
        "find_topo_sort lists a node more than once (once per path to it): mark each node visited "
        "when the search first reaches it, and skip it after",
        listed_again,
        blame="find_topo_sort",
    ),
    Slip(
        "node-before-inputs",
        "find_topo_sort lists a node before one of its inputs: append each node after its inputs, "
        "a post-order depth-first search",
        node_before_inputs,
        blame="find_topo_sort",
    ),
    Slip(
        "reached-too-early",
        hints.ORDER,
        reached_too_early,
        blame="backward",
        # the order backward walks is find_topo_sort's, reversed: where the sort's own cases
        # find a node listed before its inputs, the sort is what is wrong
        behind="node-before-inputs",
    ),
    Slip(
        "output-grad-to-every-rule",
        "backward called each rule with the output's out_grad: a node's out_grad is its own "
        "gradient, the sum of the partial adjoints it received, which backward adds up (and "
        "stores as node.grad) before it calls the node's rule",
        output_grad_to_every_rule,
        blame="backward",
        replaces=(hints.SUM, hints.ORDER),
    ),
    Slip(
        "adjoints-to-wrong-inputs",
        "backward gives a rule's gradients to its node's inputs in another order: the i-th "
        "gradient a rule returns is the partial adjoint for node.inputs[i]",
        adjoints_to_wrong_inputs,
        blame="backward",
        replaces=(hints.SUM, hints.ORDER),
    ),
    Slip(
        "inputs-out-of-order",
        "the contract: find_topo_sort visits each node's inputs in order (inputs[0] first), then the "
        "node; this is a topological order, but another one",
        inputs_out_of_order,
        blame="find_topo_sort",
    ),
    Slip(
        "reshape-not-undone",
        "{op}'s gradient must have its input's shape: reshape out_grad back to the input's shape; "
        "a reshape moves no number, so nothing is summed or broadcast",
        reshape_not_undone,
    ),
    Slip(
        "size-one-axes-dropped",
        "{op}'s gradient has the right numbers in shape {got}: reshape it to its input's shape "
        "{want}, whose axes of size 1 the sum left out",
        size_one_axes_dropped,
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
        "summed-every-axis",
        "BroadcastTo's gradient sums out_grad over every axis: sum only over the axes the broadcast "
        "added or stretched from size 1, so that the input's other axes keep their entries",
        summed_every_axis,
        blame="{op}",
    ),
    Slip(
        "broadcast-from-the-left",
        "BroadcastTo's gradient lines the shapes up from the left; NumPy lines them up from the "
        "right: sum the leading axes the broadcast added, then those it stretched from size 1",
        broadcast_from_the_left,
        blame="{op}",
    ),
    Slip(
        "summed-axes-not-restored",
        "Summation's gradient broadcasts out_grad, of shape {got}, as it comes: make each summed axis "
        "size 1 again first (a reshape), so that broadcasting lines it up with the input's shape {want}",
        summed_axes_not_restored,
    ),
    Slip(
        "summed-axes-not-all-restored",
        "Summation's gradient restores only some of the summed axes: make every summed axis size 1 "
        "again (each of a tuple; all of them for axes=None), then broadcast back to the input's shape",
        summed_axes_not_all_restored,
        blame="{op}",
    ),
    Slip(
        "wrong-dtype",
        "{op}'s gradient is {got} where its input is {want}: a gradient keeps its input's dtype, so "
        "an array the rule makes (a mask, a constant) takes the input's dtype",
        wrong_dtype,
        blame="{op}",
    ),
    Slip(
        "relu-slope-at-zero",
        "{op}'s slope at 0 is 0, as PyTorch's: its mask passes no gradient where the input is "
        "exactly 0 (`a > 0`, not `a >= 0`)",
        relu_slope_at_zero,
    ),
    Slip(
        "input-for-output",
        "{op}'s gradient uses its input (node.inputs[0]) where its derivative needs the output "
        "(node, which holds the op's value)",
        input_for_output,
    ),
    Slip(
        "output-for-input",
        "{op}'s gradient uses its output (node) where its derivative needs the input (node.inputs[0])",
        output_for_input,
    ),
    Slip(
        "tanh-without-square",
        "Tanh's gradient uses 1 - t where the derivative is 1 - t**2 (t = node, which holds tanh(x))",
        tanh_without_square,
        blame="{op}",
    ),
    Slip(
        "relu-output-as-slope",
        "ReLU's gradient multiplies out_grad by ReLU's output (node); its slope is 1 where the input "
        "is above 0, and 0 elsewhere: a mask of the input, a constant",
        relu_output_as_slope,
        blame="{op}",
    ),
    Slip(
        "transpose-last-two",
        "Transpose's gradient swaps the last two axes whatever axes the op swapped: transpose "
        "out_grad back over the op's own axes (self.axes)",
        transpose_last_two,
        blame="{op}",
    ),
    Slip(
        "pow-exponent-without-log",
        "EWisePow's gradient for the exponent b misses the factor log(a): the derivative of a**b "
        "in b is a**b * log(a)",
        pow_exponent_without_log,
        blame="{op}",
    ),
    Slip(
        "matmul-factors-misaligned",
        "MatMul's gradient multiplies factors whose shapes do not line up: for out = a @ b, a's "
        "gradient is out_grad @ b^T (a's shape) and b's is a^T @ out_grad (b's shape); the "
        "order of the factors matters, and so do the transposes",
        matmul_shapes,
        blame="MatMul",
    ),
    Slip(
        "gradients-swapped",
        "{op}'s gradient gives each input the other's gradient: the i-th gradient returned is "
        "for node.inputs[i] (for a * b: out_grad * b for a, then out_grad * a for b)",
        gradients_swapped,
    ),
    Slip(
        "power-off-by-one",
        "{op}'s gradient takes a to the wrong power: the derivative of a**n is n * a**(n - 1)",
        power_off_by_one,
        blame="{op}",
    ),
    Slip(
        "power-factor-left-out",
        "{op}'s gradient leaves out the factor n{or_sign}: the derivative of a**n is n * a**(n - 1)",
        power_factor_left_out,
        blame="{op}",
    ),
    Slip(
        "scalar-added",
        "{op}'s gradient adds the scalar to out_grad: the derivative of a + c in a is 1, whatever c is",
        scalar_added,
        blame="{op}",
    ),
    Slip(
        "divisor-not-squared",
        "EWiseDiv's gradient for b divides by b once: the derivative of a / b in b is -a / b**2",
        divisor_not_squared,
        blame="{op}",
    ),
    Slip(
        "inverted",
        "{op}'s gradient {did} out_grad by {by}: the derivative of {form} in a is {derivative}",
        inverted,
        blame="{op}",
    ),
    Slip(
        "no-chain-rule",
        "{op}'s gradient is its local derivative alone: multiply it by out_grad (the chain rule "
        "scales each local derivative by the gradient that arrives)",
        no_chain_rule,
        blame="{op}",
    ),
    Slip(
        "passes-unchanged",
        "{op}'s gradient is out_grad unchanged: the chain rule multiplies out_grad by the op's own "
        "derivative, {derivative}",
        passes_unchanged,
        blame="{op}",
    ),
    Slip(
        "wrong-sign",
        "{op}'s gradient has the wrong sign ({of} is PyTorch's with the sign flipped): a minus "
        "sign is lost in the rule, or one too many",
        wrong_sign,
    ),
    Slip(
        "one-adjoint-kept",
        "backward keeps only one of the partial adjoints a node receives, not their sum: it must "
        "collect every op's partial adjoint (a list per node) and add them up",
        one_adjoint_kept,
        blame="backward",
    ),
    Slip(
        "adjoints-added-again",
        "backward added the partial adjoints of {node} more than once ({times} times its gradient): "
        "process each node once, in the order find_topo_sort gives, which lists each node once",
        adjoints_added_again,
        blame="backward",
        # where the sort's own cases find a node listed twice, the sort is what is wrong
        behind="listed-again",
    ),
    Slip(
        "processed-again",
        "backward processes a node more than once (once per path to it), so what it sends its "
        "inputs is added again: process each node once, in the order find_topo_sort gives, which "
        "lists each node once",
        processed_again,
        blame="backward",
        replaces=(hints.ORDER, hints.SUM),
        behind="listed-again",
    ),
    Slip(
        "gradient-in-numpy",
        "{op}'s gradient is computed in NumPy and wrapped in a Tensor: its value is right, but it "
        "has no graph, so a gradient of it is wrong; build it from needle ops on out_grad and node",
        in_numpy,
        blame="{op}",
        replaces=(hints.HIGHER_ORDER,),
    ),
    Slip(
        "numpy-operand",
        "{op}'s gradient multiplies by a NumPy array, which needle keeps as a scalar op's constant "
        "that backward cannot differentiate through; build it from needle ops on Tensors "
        "(broadcast_to, reshape) instead",
        numpy_operand,
        blame="{op}",
        replaces=(hints.HIGHER_ORDER,),
    ),
    Slip(
        "gradient-detached",
        "backward stores each gradient as a new leaf, cut off from the graph (detached, or made "
        "anew from NumPy): a gradient must stay a node built with needle's ops from out_grad, so "
        "that a backward through it can differentiate it",
        gradient_detached,
        blame="backward",
        replaces=(hints.HIGHER_ORDER, hints.REPEATED_BACKWARD),
    ),
    Slip(
        "kept-earlier-gradient",
        "a later backward added to the gradient an earlier one left on {node}: each backward "
        "assigns the gradients for its own output, replacing those of an earlier backward",
        kept_earlier_gradient,
        blame="backward",
        replaces=(hints.HIGHER_ORDER,),
    ),
    Slip(
        "adds-to-earlier-gradients",
        "backward adds to the gradients an earlier backward left on the nodes it passes through "
        "(a fresh sum(x * x) differentiated twice ends with twice its gradients), so this backward "
        "through a gradient started from the first one's: each backward assigns the gradients for "
        "its own output, replacing those of an earlier backward",
        carries_over,
        blame="backward",
        replaces=(hints.HIGHER_ORDER,),
    ),
    Slip(
        "no-gradient-stored",
        "backward leaves every node without a gradient, the output and the leaves too: each node's "
        "gradient, the sum of its partial adjoints, goes in its `grad`",
        no_gradient_stored,
        blame="backward",
        replaces=(hints.SEED,),
    ),
    Slip(
        "visited-not-stored",
        "backward left {node} no gradient, though find_topo_sort lists it and every op that uses "
        "it has its own: backward must set node.grad on every node it visits, the leaves too "
        "(they hold what the caller reads)",
        visited_not_stored,
        blame="backward",
        replaces=(hints.SUM, hints.ORDER),
    ),
    Slip(
        "never-visited",
        "backward never came to {node}: it has no gradient, though every op that uses it has its "
        "own; backward visits each node find_topo_sort lists, so the sort must list every node the "
        "output depends on",
        never_visited,
        blame="backward",
        # where the sort's own cases find nodes left out, the sort is what is wrong
        behind="nodes-left-out",
    ),
    Slip(
        "output-grad-unset",
        "backward sets every gradient but the output's own: the output's own gradient is out_grad "
        "(ones when none is given)",
        output_grad_unset,
        blame="backward",
    ),
    Slip("recursive-sort", hints.RECURSION, raised("RecursionError", at=("backward", "find_topo_sort"))),
    calls_itself(hints.CALLS_ITSELF),
    Slip(
        "leaf-rule-asked",
        "backward asks a leaf for its gradient rule, and a leaf has no op (its op is None): a leaf "
        "only receives its gradient; pass partial adjoints on from the nodes made by an op alone",
        raised("AttributeError", "'NoneType' object has no attribute 'gradient", at=("backward",)),
        blame="backward",
    ),
    Slip(
        "tensor-for-a-tuple",
        "backward iterates over a single Tensor where it needs a tuple or a list: an op with one "
        "input returns one Tensor from `gradient` (`gradient_as_tuple` always returns a tuple), and "
        "a node's partial adjoints belong in a list, even when there is one",
        raised("TypeError", "'Tensor' object is not iterable", at=("backward",)),
        blame="backward",
    ),
    Slip(
        "adjoint-not-in-a-list",
        "backward hands sum_node_list a single Tensor: keep each node's partial adjoints in a list, "
        "even when there is one, and sum the list",
        raised("TypeError", "reduce() arg 2 must support iteration", at=("sum_node_list",)),
        blame="backward",
    ),
    unhashable("Tensor", hints.UNHASHABLE),
)
