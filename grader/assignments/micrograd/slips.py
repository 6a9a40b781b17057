"""The slips micrograd students make: each with what gives it away and one line naming it.

A message names the place (the op, its inputs, the node); these name the mistake. After
the diagnosis has found the place, `grader.verdict.diagnose` asks each slip in turn, and
the first that recognises the case puts its line under the message's first line. A
detector reads only what the verdict already has (`diagnose.Evidence`): both engines'
tapes, with each op's rule probed alone on fresh leaves whose gradients start at
PROBE_SEED under an out.grad of PROBE_GRAD, and each node's gradient after each backward()
call; the results that differ; the exception raised.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from grader.assignments import Slip, calls_itself, raised, repeated, unhashable
from grader.assignments.micrograd import hints
from grader.assignments.micrograd.backend import (
    BREADTH_FIRST_WALK,
    MLP_PROBES,
    OUTPUT_ALONE,
    PROBE_GRAD,
    PROBE_SEED,
    REPEATED_WALK,
    TOPOLOGICAL_WALK,
    WRAPPED_SEED,
    ProbeLeaf,
    composite_parts,
)
from grader.case.trace import NodeRef


def _same(a: Any, b: Any) -> bool:
    return bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))


def _wrong_rules(evidence: Any) -> list[tuple[int, str, Any, Any]]:
    """(node, op, PyTorch's rule, the submission's) for each primitive of the case whose rule,
    probed alone, is wrong: the blamed op's node first. (The primitives inside composite ops
    and MLPs are `_parts_probed`.)"""
    found = []
    for i in evidence.op_nodes():
        op = evidence.tape.steps[i].op
        pair = evidence.rule_pair(i) if op in hints.PRIMITIVES else None
        if pair is not None:
            found.append((i, op, *pair))
    return sorted(found, key=lambda row: row[1] != evidence.diagnosis.blame)


class Part(NamedTuple):
    """A primitive whose rule was probed alone: a node of the case (`own`), or one the case
    runs inside another op, inside a composite op at what it meets there (`backend.
    composite_parts`: `a / b` is `b**-1` and `a * (1/b)`, `-a` is `a * -1`), inside an MLP at
    the grader's numbers (`backend.MLP_PROBES`). For a part, the case's numbers are the whole
    op's: only the probe speaks of it."""

    node: int  # the primitive's node, or the composite's (the MLP's) it runs inside
    op: str
    expected: Any  # PyTorch's contribution to each input that is a node
    actual: Any
    args: list[Any]  # its inputs: a ProbeLeaf (with its value) for a node, else the number
    own: bool = False

    @property
    def values(self) -> list[float]:
        return [float(x.data) if isinstance(x, ProbeLeaf) else float(x) for x in self.args]


def _args(evidence: Any, i: int) -> list[Any]:
    """Node i's inputs as its probe met them: a ProbeLeaf holding each node's value (keyed by
    the node), the numbers as they are."""
    value = evidence.value
    return [
        ProbeLeaf(r.index, float(value(r.index).reshape(-1)[0])) if isinstance(r, NodeRef) else r
        for r in evidence.tape.steps[i].inputs
    ]


def _parts_probed(evidence: Any, every: bool = False) -> list[Part]:
    """The parts of the case's composite ops and MLPs whose rules, probed alone, are wrong
    (`every`: all the parts that were probed, right or wrong)."""
    tape, found = evidence.tape, []
    for i in evidence.op_nodes():
        step, wrong = tape.steps[i], tape.wrong_parts(i)
        if not (wrong or every) or not tape.actual or tape.actual[i].get("parts") is None:
            continue
        if step.op == "mlp":
            parts: list[tuple[str, list[Any]]] = list(MLP_PROBES)
        else:
            parts = composite_parts(step.op, _args(evidence, i)) or []
        e, a = tape.expected[i]["parts"].array(), tape.actual[i]["parts"].array()
        if e.shape != a.shape or len(parts) != e.shape[0]:
            continue
        for k in range(len(parts)) if every else wrong:
            op, inputs = parts[k]
            # its row: PyTorch's (or the submission's) contribution to each leaf, then 0s
            leaves = len({x.key for x in inputs if isinstance(x, ProbeLeaf)})
            found.append(Part(i, op, e[k][:leaves], a[k][:leaves], inputs))
    return found


def _probes(evidence: Any) -> list[Part]:
    """Every wrong rule probed alone, as a `Part`: the case's own primitives
    (`_wrong_rules`, blamed op first) and those it runs inside its ops (`_parts_probed`)."""
    own = [Part(i, op, e, a, _args(evidence, i), own=True) for i, op, e, a in _wrong_rules(evidence)]
    return own + _parts_probed(evidence)


def assigns(evidence: Any) -> dict[str, str] | None:
    """The rule replaced what its inputs held: each got its contribution less the seed the
    probe started it from (half of it when one leaf is both inputs, as in `a * a`)."""
    for p in _probes(evidence):
        held = p.actual + PROBE_SEED
        if not _same(p.actual, 0.0) and any(_same(held, p.expected * share) for share in (1.0, 0.5)):
            return {"op": p.op}  # (a rule that adds nothing leaves the seed too: not told apart)
    return None


def adds_nothing(evidence: Any) -> dict[str, str] | None:
    """The rule added nothing to its inputs' gradients, where PyTorch's adds something: it
    never ran (the op did not set `out._backward`), or its body does nothing. Probed alone,
    it added exactly nothing, wherever the case probed it (a rule that adds a little, 1e-15
    where 1e-7 is due, runs); and in the case, an input that only its node uses got nothing
    either (a wrong formula that crosses 0 at the probe's out.grad still sends the case
    something). Last in the catalogue: a rule that reads the wrong value adds nothing where
    that value is 0, and the slips that name such a rule come first; where one of the op's
    values is 0 (an input's, or its output's), the two are not told apart (mul's rule that
    gives self its own value, at 0 * 7), and no slip is named."""
    tape = evidence.at_pass
    if not tape.actual:
        return None
    for p in _probes(evidence):
        e, a = p.expected, p.actual
        if np.any(a != 0.0) or _same(e, 0.0) or _adds_somewhere(evidence, p.op):
            continue
        # a node's own value counts too; a part's, what it met inside its op
        if any(_same(value, 0.0) for value in (_step_values(evidence, p.node) if p.own else p.values)):
            continue
        alone = [x for x in evidence.inputs(p.node) if tape.consumers(x) == [p.node]]
        got = [tape.actual[x].get("grad") for x in alone]
        if any(g is not None and not np.any(g.array() != 0.0) for g in got):
            return {"op": p.op}
    return None


def input_left_out(evidence: Any) -> dict[str, str] | None:
    """add's or mul's rule sent one of its two inputs nothing, and the other its right
    contribution: probed alone on two leaves, one got exactly nothing and the other what
    PyTorch's rule sends it, not 0 (a rule that never runs sends both nothing); on one leaf
    used twice (`a * a`), it got one of its two contributions. Field: which input. The
    case's own adds and muls, and those its composites are built from (`a + (-b)` in
    `a - b`)."""
    for p in _probes(evidence):
        if p.op not in ("add", "mul") or len(p.args) != 2:
            continue
        e, a, x, y = p.expected, p.actual, *p.args
        one_leaf = isinstance(x, ProbeLeaf) and isinstance(y, ProbeLeaf) and x.key == y.key
        if len(a) == 2:
            for k in (0, 1):
                ran = _same(a[1 - k], e[1 - k]) and not _same(e[1 - k], 0.0)  # the other's shows it runs
                if a[k] == 0.0 and not _same(e[k], 0.0) and ran:
                    return {"op": p.op, "input": ("self, its first input", "other, its second input")[k]}
        elif one_leaf and len(a) == 1 and _same(a, e / 2) and not _same(e, 0.0):
            both = "a * a" if p.op == "mul" else "a + a"
            return {"op": p.op, "input": f"one of its inputs (in `{both}`, a gets both)"}
    return None


def _adds_somewhere(evidence: Any, op: str) -> bool:
    """Did `op`'s rule, probed alone at any of the case's nodes or inside any of its composite
    ops, add something to an input? Then it runs, and adds nothing only where what it reads
    is 0."""
    pairs = (evidence.rule_pair(i) for i in evidence.op_nodes() if evidence.tape.steps[i].op == op)
    if any(pair is not None and np.any(pair[1] != 0.0) for pair in pairs):
        return True
    return any(part.op == op and np.any(part.actual != 0.0) for part in _parts_probed(evidence, every=True))


#: what mul's rule sends an input when it multiplies by gradients where it needs the inputs'
#: data (`other.grad * out.grad`), probed alone: the other input's seed times out.grad (a
#: number's, in `a * 2`), and for the input updated second, the first one's seed plus that,
#: times out.grad (both, for `a * a`)
READS_GRAD = (
    PROBE_SEED * PROBE_GRAD,
    WRAPPED_SEED * PROBE_GRAD,
    (PROBE_SEED + PROBE_SEED * PROBE_GRAD) * PROBE_GRAD,
    PROBE_SEED * PROBE_GRAD + (PROBE_SEED + PROBE_SEED * PROBE_GRAD) * PROBE_GRAD,
)


def reads_grad(evidence: Any) -> dict[str, str] | None:
    """mul's rule multiplied by an input's gradient (`other.grad`) where its derivative needs
    the input's value (`other.data`): probed alone, an input got what the probe's seeds
    predict, whatever the inputs' values, where PyTorch's rule sends another number."""
    for p in _probes(evidence):
        if p.op == "mul" and any(
            any(_same(got, model) for model in READS_GRAD) and not _same(got, want)
            for got, want in zip(p.actual, p.expected, strict=True)
        ):
            return {"op": p.op}
    return None


def _case_contradicts(evidence: Any, i: int, predicted: Callable[[Any, Any], Any]) -> bool:
    """Does the case itself say otherwise than a slip's model of rule i? For each input only
    node i uses, what the model says it sends (`predicted(PyTorch's gradient of the input,
    the gradient node i got)`, None: it cannot tell) against the gradient the input got. A
    fingerprint read off the rule probed alone, at one point, can match a different mistake
    there by coincidence (a precedence slip, `n * x**n - out.grad`, at x = -2 and n = -1);
    the case's own numbers are a second point."""
    tape = evidence.at_pass
    if not tape.actual or tape.expected[i].get("grad") is None:
        return False
    incoming = tape.expected[i]["grad"].array()
    for x in evidence.inputs(i):
        e, a = tape.expected[x].get("grad"), tape.actual[x].get("grad")
        if tape.consumers(x) == [i] and e is not None and a is not None:
            model = predicted(e.array(), incoming)
            if model is not None and not _same(a.array(), model):
                return True
    return False


def _times(factor: Any) -> Callable[[Any, Any], Any]:
    """The model of a rule that sends the right contribution times `factor`."""
    return lambda grad, _incoming: grad * factor


def _local(grad: Any, incoming: Any) -> Any:
    """An input's gradient over the gradient its node got: the rule's local derivative, as a
    rule without the chain rule sends it (unknown where the node got 0)."""
    return None if _same(incoming, 0.0) else grad / incoming


def no_chain_rule(evidence: Any) -> dict[str, str] | None:
    """The rule sent its local derivative alone, not scaled by out.grad: probed alone, and in
    the case (each input that only its node uses got PyTorch's gradient over out.grad)."""
    for i, op, e, a in _wrong_rules(evidence):
        if _same(a, e / PROBE_GRAD) and not _same(e, e / PROBE_GRAD):
            if not _case_contradicts(evidence, i, _local):
                return {"op": op}
    return None


#: a one-input op -> its own derivative, in words, for a rule that leaves it out (relu's rule
#: that passes out.grad on as it came has a slip of its own: relu-passes-negative)
OWN_DERIVATIVE = {
    "exp": "exp(x), which out.data holds",
    "log": "1 / x",
    "tanh": "1 - tanh(x)**2",
    "sigmoid": "sigmoid(x) * (1 - sigmoid(x))",
    "pow": "n * x**(n - 1)",
}


def passes_unchanged(evidence: Any) -> dict[str, str] | None:
    """A one-input op's rule passed out.grad on as it came, without its own derivative:
    probed alone, its input got out.grad itself; and in the case, the input (if only its
    node uses it) got PyTorch's gradient over that derivative (PyTorch's contribution in the
    probe over out.grad), however many times the rule ran."""
    for i, op, e, a in _wrong_rules(evidence):
        if op not in OWN_DERIVATIVE or len(a) != 1 or not _same(a, PROBE_GRAD):
            continue
        if op in WRITTEN and not _told_apart(evidence, i, a, "passes-unchanged"):
            continue  # (pow's ways depend on its exponent: `power_off_by_one` reads them)
        inverse = PROBE_GRAD / e if np.all(e != 0.0) else None  # 1 over the derivative
        if inverse is None or not _case_contradicts(evidence, i, _times(inverse)):
            return {"op": op, "derivative": OWN_DERIVATIVE[op]}
    return None


def wrong_sign(evidence: Any) -> dict[str, str] | None:
    """The rule sent PyTorch's contribution with its sign flipped (`-=` for `+=`, or a lost
    minus): probed alone, and in the case."""
    for i, op, e, a in _wrong_rules(evidence):
        if _same(a, -e) and not _same(e, 0.0) and not _case_contradicts(evidence, i, _times(-1.0)):
            return {"op": op}
    return None


def log_multiplies(evidence: Any) -> dict[str, str] | None:
    """log's rule multiplied out.grad by x where its derivative divides by it: what it sent
    times PyTorch's is out.grad squared; probed alone, and in the case."""
    for i, op, e, a in _wrong_rules(evidence):
        x = evidence.value(evidence.inputs(i)[0])
        if op == "log" and _same(a * e, PROBE_GRAD**2) and _told_apart(evidence, i, a, "log-multiplies"):
            if not _case_contradicts(evidence, i, _times(x * x)):
                return {"op": op}
    return None


#: a one-input op -> each way its rule is written wrong: (the slip, the derivative as written,
#: from the input x and the output y). At some points two of them are the same number (at
#: x = 1, exp's rule that reads x passes out.grad on unchanged): there the probe cannot tell
#: them apart, and no slip is named (`_told_apart`)
WRITTEN: dict[str, tuple[tuple[str, Callable[[Any, Any], Any]], ...]] = {
    "exp": (("passes-unchanged", lambda x, y: 1.0), ("input-for-output", lambda x, y: x)),
    "log": (
        ("passes-unchanged", lambda x, y: 1.0),
        ("output-for-input", lambda x, y: 1 / y),
        ("log-multiplies", lambda x, y: x),
    ),
    "tanh": (
        ("passes-unchanged", lambda x, y: 1.0),
        ("input-for-output", lambda x, y: 1 - x**2),
        ("tanh-without-square", lambda x, y: 1 - y),
    ),
    "sigmoid": (
        ("passes-unchanged", lambda x, y: 1.0),
        ("input-for-output", lambda x, y: x * (1 - x)),
        ("input-for-output", lambda x, y: y * (1 - x)),
        ("factor-left-out", lambda x, y: y),
        ("factor-left-out", lambda x, y: 1 - y),
    ),
}


def _written(evidence: Any, i: int, sent: Any, slip: str) -> list[tuple[str, Any]]:
    """The ways node i's rule is written wrong (`WRITTEN`) that fit what it sent, probed
    alone: (the slip, the derivative it wrote); `slip` names only those of one slip."""
    op = evidence.tape.steps[i].op
    x, y = evidence.value(evidence.inputs(i)[0]), evidence.value(i)
    fits = []
    with np.errstate(divide="ignore", invalid="ignore"):  # 1 / y at log(1) = 0
        for name, derivative in WRITTEN.get(op, ()):
            written = derivative(x, y)
            if np.all(np.isfinite(written)) and _same(sent, PROBE_GRAD * written):
                fits.append((name, written))
    return [fit for fit in fits if fit[0] == slip] if slip else fits


def _told_apart(evidence: Any, i: int, sent: Any, slip: str) -> bool:
    """Does what node i's rule sent fit `slip`'s way of writing it, and no other slip's?"""
    names = {name for name, _ in _written(evidence, i, sent, "")}
    return names == {slip}


def _swapped(evidence: Any, ops: tuple[str, ...], slip: str) -> dict[str, str] | None:
    for i, op, _, a in _wrong_rules(evidence):
        if op in ops and _told_apart(evidence, i, a, slip):
            return {"op": op}
    return None


def input_for_output(evidence: Any) -> dict[str, str] | None:
    """exp, tanh, sigmoid: the derivative is written with the input x where the formula
    reads the output out.data."""
    return _swapped(evidence, ("exp", "tanh", "sigmoid"), "input-for-output")


#: log's rule divided by zero: by its output, log(1) = 0, which is where it raised
_LOG_DIVIDED_BY_ZERO = raised("ZeroDivisionError", at=("log",))


def output_for_input(evidence: Any) -> dict[str, str] | None:
    """log: the derivative is written with the output where the formula reads the input; or
    its rule divided by zero, which only the output can be (log(1) = 0: the input is never 0)."""
    found = _swapped(evidence, ("log",), "output-for-input")
    return found or ({"op": "log"} if _LOG_DIVIDED_BY_ZERO(evidence) is not None else None)


def _step_values(evidence: Any, i: int) -> list[float]:
    """Node i's inputs' values (a number's too, in `a * 2`) and its own."""
    refs = [*evidence.tape.steps[i].inputs, NodeRef(i)]
    value = evidence.value
    return [float(value(r.index).reshape(-1)[0]) if isinstance(r, NodeRef) else float(r) for r in refs]


def own_input(evidence: Any) -> dict[str, str] | None:
    """mul's rule gave an input its own value times out.grad, where d(a*b)/da is b: the other
    input's (a number, in `a * 2`, is an input too). Told apart only where the two inputs
    differ: `a * a` is right either way."""
    for p in _probes(evidence):
        if p.op != "mul" or len(p.args) != 2:
            continue
        values, e, a = p.values, p.expected, p.actual
        leaves = [
            j for j, x in enumerate(p.args) if isinstance(x, ProbeLeaf)
        ]  # each one's contribution, in a
        if _same(values[0], values[1]) or len(leaves) != len(a):
            continue
        # an input whose own value is 0 would get 0 either way: a rule that adds nothing
        own = [(k, j) for k, j in enumerate(leaves) if not _same(values[j], 0.0)]
        if any(_same(a[k], PROBE_GRAD * values[j]) and not _same(a[k], e[k]) for k, j in own):
            return {"op": "mul"}
    return None


def _pow_rules(evidence: Any) -> list[Part]:
    """Each pow whose rule, probed alone, is wrong, to a number: a pow node of the case, or the
    pow a division is built from, probed at the base it meets there."""
    return [
        p
        for p in _probes(evidence)
        if p.op == "pow"
        and len(p.expected) == 1
        and isinstance(p.args[0], ProbeLeaf)
        and not isinstance(p.args[1], ProbeLeaf)
    ]


def power_off_by_one(evidence: Any) -> dict[str, str] | None:
    """pow's rule took x to the power n, n + 1 or n - 2 where the derivative has n - 1: what
    it sent is the right contribution times x, x**2, or over x (and in the case, where the
    pow is a node of its own: a division's is probed alone only)."""
    for p in _pow_rules(evidence):
        i, e, a, x = p.node, p.expected, p.actual, np.float64(p.values[0])
        if _same(np.abs(x), 1.0) or _same(x, 0.0):  # (at 0, a * x is e = 0 for any a)
            continue
        for factor in (x, x * x, 1 / x):
            if _same(a, e * factor) and not (p.own and _case_contradicts(evidence, i, _times(factor))):
                return {"op": "pow"}
    return None


def power_precedence(evidence: Any) -> dict[str, str] | None:
    """pow's rule lost the parentheses of x**(n - 1): `**` binds before `-`, so
    `n * x**n - 1 * out.grad` sends n * x**n - out.grad, and `(n * x**n - 1) * out.grad`
    sends n * x**n - 1 times out.grad: probed alone, what it sent is one of those. (Neither
    model multiplies PyTorch's contribution, so the case's own numbers, where the rule may
    have run twice, are no second point: the probe's inputs are the case's own values.)"""
    for p in _pow_rules(evidence):
        e, a, (x, n) = p.expected, p.actual, np.array(p.values)
        with np.errstate(all="ignore"):  # a negative x to a fractional n: NaN
            powered = n * x**n
        for sent in (powered - PROBE_GRAD, (powered - 1) * PROBE_GRAD):
            if np.all(np.isfinite(sent)) and _same(a, sent) and not _same(sent, e):
                return {"op": "pow"}
    return None


#: an op whose derivative can be written from its output, which is bounded, and that
#: derivative in terms of t = out.data
FROM_OUTPUT = {"tanh": "1 - t**2", "sigmoid": "t * (1 - t)"}
_OVERFLOWED = raised("OverflowError", at=tuple(FROM_OUTPUT))


def rule_overflows(evidence: Any) -> dict[str, str] | None:
    """tanh's or sigmoid's rule raised OverflowError: it computes the derivative afresh from
    x (`math.cosh(x)`, `math.exp(-x)`), which overflows at large |x|, where out.data, which
    the forward pass computed, is bounded."""
    if _OVERFLOWED(evidence) is None:
        return None
    op = evidence.diagnosis.blame
    return {"op": op, "derivative": FROM_OUTPUT[op]}


def tanh_without_square(evidence: Any) -> dict[str, str] | None:
    """tanh's rule used 1 - t where its derivative is 1 - t**2 (t = tanh(x), the output)."""
    for i, op, _, a in _wrong_rules(evidence):
        if op == "tanh" and _told_apart(evidence, i, a, "tanh-without-square"):
            return {"op": op}
    return None


def factor_left_out(evidence: Any) -> dict[str, str] | None:
    """sigmoid's rule multiplied out.grad by one factor of its derivative alone: by
    sigmoid(x) (out.data), or by 1 - sigmoid(x). Field: the factor it kept."""
    for i, op, _, a in _wrong_rules(evidence):
        if op == "sigmoid" and _told_apart(evidence, i, a, "factor-left-out"):
            kept = _written(evidence, i, a, "factor-left-out")[0][1]
            said = "sigmoid(x), out.data" if _same(kept, evidence.value(i)) else "1 - sigmoid(x)"
            return {"op": op, "kept": said}
    return None


def _values(evidence: Any, i: int) -> tuple[Any, Any] | None:
    """Node i's value, (PyTorch's, the submission's), when both are known."""
    tape = evidence.tape
    e, a = tape.expected[i].get("value"), tape.actual[i].get("value") if tape.actual else None
    return None if e is None or a is None else (e.array(), a.array())


def rsub_reversed(evidence: Any) -> dict[str, str] | None:
    """`2 - x` came out as `x - 2`: __rsub__ subtracted the number from the Value."""
    for i, step in enumerate(evidence.tape.steps):
        pair = _values(evidence, i) if step.op == "rsub" else None
        if pair is not None and not _same(pair[0], 0.0) and _same(pair[1], -pair[0]):
            return {"op": "rsub"}
    return None


def neg_outside_the_graph(evidence: Any) -> dict[str, str] | None:
    """-x has the right value and gradient, yet x got none from it, and -x probed alone on a
    fresh x passes nothing back either, though the rule of the op it is built from is
    right: it is a new Value made from x's number, with no edge back to x. Or the same seen
    through a subtraction (`_negated_outside`)."""
    tape = evidence.tape
    if _probes(evidence):  # a wrong rule elsewhere can cancel x's gradient out
        return None
    for i, step in enumerate(tape.steps):
        if step.op != "neg" or not tape.actual or not evidence.inputs(i):
            continue
        x = evidence.inputs(i)[0]
        got, want = tape.actual[x]["grad"], tape.expected[x]["grad"]
        if got is None or want is None or tape.differs(i, "value") or tape.differs(i, "grad"):
            continue  # -x itself must be right: with no gradient anywhere (no seed), x has none either
        if tape.rule(i) is not False or tape.wrong_parts(i):
            # -x probed alone passes its gradient on (a seed set after the closures starved
            # it), or the rule of the op it is built from (x * -1's mul) is what is wrong
            continue
        if _same(got.array(), 0.0) and not _same(want.array(), 0.0):
            return {"op": "neg"}
    return _negated_outside(evidence)


#: a subtraction -> which of its inputs it negates (`a - b` is `a + (-b)`, `b - a` as
#: `__rsub__` computes it is `b + (-a)`)
NEGATED = {"sub": 1, "rsub": 0}


def _negated_outside(evidence: Any) -> dict[str, str] | None:
    """A subtraction whose rule, probed alone, sent the input it negates nothing (and the
    other, where it is a node, its right share; in `a - a`, a got only the share of the
    side it is not negated on), though mul's and add's rules, which it is built from, are
    right, probed alone inside it: the given `a + (-b)` goes through `__neg__`, and -b is a
    new Value made from b's number. The failure is laid at `__neg__`, where the mistake is."""
    tape = evidence.tape
    if not tape.actual:
        return None
    for i, step in enumerate(tape.steps):
        negated = NEGATED.get(step.op)
        inputs = step.inputs
        if negated is None or len(inputs) != 2 or not isinstance(inputs[negated], NodeRef):
            continue
        if tape.wrong_parts(i) or tape.actual[i].get("parts") is None:
            continue
        pair = evidence.rule_pair(i)
        leaves = [r.index for r in inputs if isinstance(r, NodeRef)]  # one contribution each
        if pair is None:
            continue
        e, a = pair
        if len(leaves) == 2 and leaves[0] == leaves[1]:  # `a - a`: what a + (-a) sends a
            starved = len(a) == 1 and _same(a, PROBE_GRAD) and _same(e, 0.0)
        elif len(a) == len(leaves):
            k = leaves.index(inputs[negated].index)
            others = [j for j in range(len(leaves)) if j != k]
            starved = a[k] == 0.0 and not _same(e[k], 0.0) and all(_same(a[j], e[j]) for j in others)
        else:
            starved = False
        if starved:
            name = tape.name(inputs[negated].index)
            return {"op": "neg", "at": f"-{name} in {tape.expression(i)}"}
    return None


def relu_passes_negative(evidence: Any) -> dict[str, str] | None:
    """relu's rule sent a gradient back to an input below 0, where relu is flat: no mask, or
    its test the wrong way round."""
    for p in _probes(evidence):
        if p.op == "relu" and p.values[0] < 0 and _same(p.expected, 0.0) and not _same(p.actual, p.expected):
            return {"op": "relu"}
    return None


def relu_output_as_slope(evidence: Any) -> dict[str, str] | None:
    """relu's rule multiplied out.grad by relu's output (out.data) where its slope is 1:
    probed alone at an input above 0 (not 1), it sent the output times out.grad; and in the
    case (where the relu is a node of its own), an input only it uses got the output times
    its gradient."""
    for p in _probes(evidence):
        if p.op != "relu":
            continue
        e, a, y = p.expected, p.actual, max(p.values[0], 0.0)
        if y > 0 and not _same(y, 1.0) and _same(a, PROBE_GRAD * y) and _same(e, PROBE_GRAD):
            if not (p.own and _case_contradicts(evidence, p.node, _times(y))):
                return {"op": "relu"}
    return None


def relu_slope_at_zero(evidence: Any) -> dict[str, str] | None:
    """relu at exactly 0 passed the gradient on (`>= 0`): PyTorch's slope there is 0."""
    for i, op, _, a in _wrong_rules(evidence):
        if op == "relu" and _same(evidence.value(evidence.inputs(i)[0]), 0.0) and _same(a, PROBE_GRAD):
            return {"op": op}
    return None


def _passes(tape: Any, i: int, side: str) -> Any:
    entries = tape.expected if side == "expected" else tape.actual
    return np.asarray(entries[i]["passes"].data)


def _several_passes(evidence: Any) -> bool:
    tape = evidence.tape
    return (
        len(tape.outputs) > 1
        and bool(tape.actual)
        and all(e.get("passes") is not None for e in tape.expected + tape.actual)
    )


def no_reset(evidence: Any) -> dict[str, str] | None:
    """A later backward() call found an interior gradient holding what it should plus what
    the call before left there."""
    if not _several_passes(evidence):
        return None
    view = evidence.at_pass
    if any(view.carried_over(i) for i in range(len(view.steps)) if view.differs(i, "grad")):
        return {}
    return None


def leaves_reset(evidence: Any) -> dict[str, str] | None:
    """After a later backward() call a leaf held only that call's gradient, not the sum
    over the calls, as it would had backward() set it to zero first."""
    if not _several_passes(evidence):
        return None
    tape = evidence.tape
    for i, step in enumerate(tape.steps):
        if step.op not in ("leaf", "parameter"):
            continue
        e, a = _passes(tape, i, "expected"), _passes(tape, i, "actual")
        alone = np.diff(e, prepend=0.0)
        if len(e) >= 2 and not _same(e, a) and _same(a, alone):
            return {}
    return None


def zero_grad_kept(evidence: Any) -> dict[str, str] | None:
    """A gradient read right after Module.zero_grad() (a result named `... after zero_grad`)
    is not 0, where PyTorch's is."""
    for m in evidence.mismatches:
        if not m.name.endswith("after zero_grad") or m.expected is None or m.actual is None:
            continue
        if _same(m.expected.array(), 0.0) and not _same(m.actual.array(), 0.0):
            return {}
    return None


def _starved(evidence: Any) -> tuple[set[int], set[int]] | None:
    """Where each output ended with its seed and every other node with a gradient of 0 where
    it should have another (nothing flowed from the output): those nodes, and the inputs of
    the outputs made by one primitive op. None where something flowed."""
    tape = evidence.at_pass
    if evidence.diagnosis.blame != "backward" or not tape.actual or not tape.outputs:
        return None
    outputs = set(tape.outputs)
    if any(tape.differs(j, "grad") for j in outputs):
        return None
    starved = set()
    for i in range(len(tape.steps)):
        got, should = tape.actual[i].get("grad"), tape.expected[i].get("grad")
        if i in outputs or got is None or should is None or _same(should.array(), 0.0):
            continue
        if not _same(got.array(), 0.0):
            return None
        starved.add(i)
    fed = {i for j in outputs if tape.steps[j].op in hints.PRIMITIVES for i in evidence.inputs(j)}
    return (starved, fed) if starved else None


def nothing_passed_on(evidence: Any) -> dict[str, str] | None:
    """Nothing flowed from the output, not even to the inputs of its own primitive op: its
    closure ran while its gradient was still 0 (backward() seeded it after the closures), or
    it never ran (the sort left the output out of its list), or none ran. Run in the wrong
    order instead, the output's own closure still runs last, with its seed, and sends its
    inputs something."""
    found = _starved(evidence)
    return {} if found is not None and found[0] & found[1] else None


def _walk(evidence: Any) -> float | None:
    """The order backward() ran the closures of a fresh b + (b * 4) * 5 in, b = a * 3, as
    the probe says it (None: unknown)."""
    tape = evidence.tape
    said = tape.actual[-1].get("walk") if tape.actual else None
    return None if said is None else said.data[0]


def topological_order(evidence: Any) -> dict[str, str] | None:
    """The rules are right, yet the node's gradient is 0 where it should not be, and the
    gradient of every node that uses it is right: its rule ran before theirs had. Not where
    nothing flowed from an output made of several ops (`2 - a` hides the nodes between):
    the output may as well have been seeded after the closures, and the case cannot tell.
    Not where the probe of backward()'s walk says another order: the output's closure run
    alone leaves the same zeros."""
    i, tape = evidence.diagnosis.wrong, evidence.at_pass
    if evidence.diagnosis.blame != "backward" or i is None or not tape.actual:
        return None
    if _walk(evidence) not in (None, TOPOLOGICAL_WALK):
        return None
    got, should = tape.actual[i]["grad"], tape.expected[i]["grad"]
    if got is None or should is None or not _same(got.array(), 0.0) or _same(should.array(), 0.0):
        return None
    users = tape.consumers(i)
    if not users or any(tape.differs(j, "grad") for j in users) or _starved(evidence) is not None:
        return None
    return {}


def output_closure_only(evidence: Any) -> dict[str, str] | None:
    """backward() is blamed, and on the probe's fresh graph it ran the output's closure alone
    (the adapter's `walk` probe)."""
    if evidence.diagnosis.blame != "backward" or _walk(evidence) != OUTPUT_ALONE:
        return None
    return {}


def _walked(evidence: Any, code: float) -> dict[str, str] | None:
    """The walk probe says `code` where backward() is blamed, and where no part is: an MLP's
    neurons are off its tape, and its case shows wrong gradients that no rule explains."""
    return {} if evidence.diagnosis.blame in ("backward", "") and _walk(evidence) == code else None


def breadth_first(evidence: Any) -> dict[str, str] | None:
    """On a fresh graph where b feeds the output d both directly and through two more ops,
    backward() ran b's closure before theirs (the adapter's `walk` probe), as every walk
    breadth first from the output does."""
    return _walked(evidence, BREADTH_FIRST_WALK)


def walked_again(evidence: Any) -> dict[str, str] | None:
    """On the probe's fresh graph, where b reaches the output by two paths, backward() ran a
    closure more than once (the adapter's `walk` probe): the sort listed a node once for each
    path to it."""
    return _walked(evidence, REPEATED_WALK)


def rule_run_again(evidence: Any) -> dict[str, str] | None:
    """A closure ran more than once (`repeated`), seen in the first backward() call that
    went wrong, where it is the first call: no earlier call's gradients to carry over."""
    tape = evidence.at_pass
    return None if tape.pass_index else repeated(evidence, tape)


def detach_passes_gradient(evidence: Any) -> dict[str, str] | None:
    """A detached node and the node it detaches from ended with one gradient, where they
    should have two: they are one Value (detach() returned the node itself)."""
    tape = evidence.tape
    return next(({"at": tape.expression(j)} for j in range(len(tape.steps)) if tape.joined(j)), None)


#: what a layer of an MLP may apply to each neuron's sum
ACTIVATIONS: dict[str, Callable[[float], float]] = {
    "linear": lambda o: o,
    "relu": lambda o: max(o, 0.0),
    "tanh": math.tanh,
}
#: the contract's MLP: ReLU on the hidden layers, the last layer linear
CONTRACT = ("relu", "linear")


def _mlp_outputs(
    weights: list[float], sizes: tuple[int, ...], xs: list[float], applies: tuple[str, str]
) -> list[float]:
    """An MLP's outputs on `xs`, its weights laid out as parameters() lists them; `applies`:
    what (the hidden layers, the last layer) apply (`ACTIVATIONS`)."""
    k = 0
    for layer, (nin, nout) in enumerate(itertools.pairwise(sizes)):
        outs = []
        for _ in range(nout):
            outs.append(sum(w * x for w, x in zip(weights[k : k + nin], xs, strict=True)) + weights[k + nin])
            k += nin + 1
        xs = [ACTIVATIONS[applies[layer == len(sizes) - 2]](o) for o in outs]
    return xs


def _mlp_explained(evidence: Any, applies: tuple[str, str]) -> dict[str, str] | None:
    """Every MLP output whose value is wrong is one of what the MLP would give applying what
    `applies` says (hidden layers, last layer), on its own weights, and none of what the
    contract's MLP gives: the MLP applies another activation than the contract somewhere."""
    tape, sizes, first, wrong = evidence.tape, None, 0, 0
    for i, step in enumerate(tape.steps if tape.actual else ()):
        if step.op == "parameter" and "sizes" in step.kwargs:
            sizes, first = tuple(step.kwargs["sizes"]), i
        if step.op != "mlp" or sizes is None or not tape.differs(i, "value"):
            continue
        count = sum((n + 1) * m for n, m in itertools.pairwise(sizes))
        weights = [float(evidence.value(first + j)) for j in range(count)]
        xs = [float(evidence.value(r.index)) if isinstance(r, NodeRef) else float(r) for r in step.inputs]
        got = tape.actual[i]["value"]
        if got is None:
            return None
        got = got.array().reshape(-1)[0]
        if not any(_same(got, y) for y in _mlp_outputs(weights, sizes, xs, applies)):
            return None
        if any(_same(got, y) for y in _mlp_outputs(weights, sizes, xs, CONTRACT)):
            return None
        wrong += 1
    return {} if wrong else None


def hidden_layers_linear(evidence: Any) -> dict[str, str] | None:
    """The MLP's outputs are what it gives with no ReLU at all."""
    return _mlp_explained(evidence, ("linear", "linear"))


def last_layer_relu(evidence: Any) -> dict[str, str] | None:
    """The MLP's outputs are what it gives with ReLU on its last layer too."""
    return _mlp_explained(evidence, ("relu", "relu"))


def hidden_layers_tanh(evidence: Any) -> dict[str, str] | None:
    """The MLP's outputs are what it gives with tanh on its hidden layers."""
    return _mlp_explained(evidence, ("tanh", "linear"))


SLIPS = (
    Slip(
        "assigns",
        "{op}'s rule assigns its contribution (`=`) where it must add it (`+=`): a node used "
        "twice, or one that already holds a gradient, keeps only the last contribution",
        assigns,
    ),
    Slip(
        "no-chain-rule",
        "{op}'s rule sends its local derivative without multiplying it by out.grad: the chain rule "
        "scales each local derivative by the gradient that arrives",
        no_chain_rule,
    ),
    Slip(
        "passes-unchanged",
        "{op}'s rule passes out.grad on unchanged: the chain rule multiplies out.grad by the op's "
        "own derivative, {derivative}",
        passes_unchanged,
    ),
    Slip(
        "input-for-output",
        "{op}'s rule uses its input (self.data) where its derivative needs the output (out.data, "
        "which holds {op}(x))",
        input_for_output,
    ),
    Slip(
        "output-for-input",
        "{op}'s rule uses its output (out.data) where its derivative needs the input (self.data)",
        output_for_input,
    ),
    Slip(
        "log-multiplies",
        "{op}'s rule multiplies out.grad by x where its derivative divides by it: d(log x)/dx = 1 / x",
        log_multiplies,
    ),
    Slip(
        "relu-passes-negative",
        "relu's rule sends a gradient back to an input below 0: relu is flat there (its slope is "
        "1 where the input is above 0 and 0 elsewhere), so its rule passes out.grad on only "
        "where the input is above 0",
        relu_passes_negative,
    ),
    Slip(
        "relu-output-as-slope",
        "relu's rule multiplies out.grad by relu's output (out.data); its slope is 1 where the input "
        "is above 0, and 0 elsewhere",
        relu_output_as_slope,
    ),
    Slip(
        "relu-slope-at-zero",
        "relu's slope at 0 is 0, as PyTorch's: the rule passes no gradient where the input is "
        "exactly 0 (`> 0`, not `>= 0`)",
        relu_slope_at_zero,
    ),
    Slip(
        "no-reset",
        "backward() does not reset the interior nodes' gradients: each call must start them "
        "from zero before it runs the rules, or it pushes the earlier calls' gradients through again",
        no_reset,
    ),
    Slip(
        "zero-grad-keeps",
        "Module.zero_grad() left the parameters' gradients as they were: it must set every "
        "parameter's grad to 0, or each training step adds its gradients to the last step's",
        zero_grad_kept,
        blame="Module.zero_grad",
    ),
    Slip(
        "leaves-reset",
        "backward() resets the leaves' gradients too: only the interior nodes start from zero; a "
        "leaf's gradient adds up over backward() calls, as in PyTorch (zero_grad() resets it)",
        leaves_reset,
    ),
    Slip(
        "nothing-passed-on",
        "backward() passed nothing on from the output, whose gradient ended as 1: its own closure "
        "never ran with that 1. Set self.grad = 1 before running the closures (a closure run before "
        "it passes on 0), make the sort list the output itself (last), then run every node's "
        "_backward, from the output back",
        nothing_passed_on,
        replaces=(hints.SEED, hints.ORDER),
    ),
    Slip(
        "output-closure-only",
        "backward() runs the output's own closure alone: it must run every node's _backward, from "
        "the output back (the topological order, reversed), so that each node passes its gradient on",
        output_closure_only,
        replaces=(hints.ORDER,),
    ),
    Slip(
        "breadth-first",
        "backward() runs the closures breadth first from the output: a node's closure then runs "
        "before every node that uses it has passed its gradient back (one further from the output "
        "by a longer path). Sort the nodes topologically (each after its inputs) and run their "
        "_backward in reverse",
        breadth_first,
        blame="backward",
        replaces=(hints.ORDER,),
    ),
    Slip(
        "topological-order",
        "backward() runs the closures in topological order (inputs first): run them in reverse, "
        "from the output, so a node's gradient is complete before its own closure reads it",
        topological_order,
        replaces=(hints.ORDER,),
    ),
    Slip(
        "rule-run-again",
        "backward() ran a closure more than once ({node} got {times} times its gradient): the sort "
        "must list each node once (a `visited` set, checked before going down into a node), and "
        "backward() run each node's _backward once",
        rule_run_again,
        replaces=(hints.ORDER,),
    ),
    Slip(
        "walked-again",
        "backward() runs a node's closure more than once, once for each path from the output to "
        "it: the sort must list each node once (a `visited` set, checked before going down into "
        "a node), and backward() run each node's _backward once",
        walked_again,
        blame="backward",
        replaces=(hints.ORDER,),
    ),
    Slip(
        "detach-passes-gradient",
        "detach() returned a node through which the gradient still flows: it must return a new "
        "leaf Value with the same data",
        detach_passes_gradient,
        blame="detach",
        replaces=(hints.DETACH,),
    ),
    Slip(
        "own-input",
        "mul's rule gives an input its own value times out.grad, where d(a * b)/da is b: each "
        "input's gradient takes the other input's value",
        own_input,
    ),
    Slip(
        "power-off-by-one",
        "pow's rule takes x to the wrong power: the derivative of x**n is n * x**(n - 1)",
        power_off_by_one,
    ),
    Slip(
        "power-precedence",
        "pow's rule computes x**n - 1 where it means x**(n - 1): `**` binds before `-`, so the "
        "exponent n - 1 needs its parentheses (the derivative of x**n is n * x**(n - 1))",
        power_precedence,
    ),
    Slip(
        "rule-overflows",
        "{op}'s rule overflows at a large |x|: it computes the derivative from x (math.cosh(x), "
        "math.exp(x)), where the derivative {derivative}, with t = out.data ({op}(x), which the "
        "forward pass computed and which is bounded), never overflows",
        rule_overflows,
    ),
    Slip(
        "tanh-without-square",
        "tanh's rule uses 1 - t where the derivative is 1 - t**2 (t = out.data, which holds tanh(x))",
        tanh_without_square,
    ),
    Slip(
        "factor-left-out",
        "{op}'s rule multiplies out.grad by {kept} alone: its derivative is sigmoid(x) * (1 - sigmoid(x)), "
        "both factors",
        factor_left_out,
    ),
    Slip(
        "rsub-reversed",
        "`2 - x` calls x.__rsub__(2), which must return other - self (the number minus the Value); "
        "it returned self - other",
        rsub_reversed,
    ),
    Slip(
        "neg-outside-the-graph",
        "-x is a new Value made from x's number, outside the graph: no gradient flows back to x; "
        "build it from an op on x (x * -1)",
        neg_outside_the_graph,
        blame=hints.OP_NAMES["neg"],
    ),
    Slip("recursive-sort", hints.RECURSION, raised("RecursionError", at=("backward",))),
    calls_itself(hints.CALLS_ITSELF),
    unhashable("Value", hints.UNHASHABLE),
    Slip(
        "hidden-layers-linear",
        "the MLP's hidden layers apply no ReLU: each neuron of a hidden layer applies ReLU "
        "(nonlin=True); only the last layer is linear",
        hidden_layers_linear,
        blame="mlp",
    ),
    Slip(
        "hidden-layers-tanh",
        "the MLP's hidden layers apply tanh: each neuron of a hidden layer applies ReLU "
        "(nonlin=True, `act.relu()`); only the last layer is linear",
        hidden_layers_tanh,
        blame="mlp",
    ),
    Slip(
        "last-layer-relu",
        "the MLP's last layer applies ReLU: the last layer is linear (nonlin=False), so that the "
        "output can take any value, negative ones too",
        last_layer_relu,
        blame="mlp",
    ),
    Slip(
        "wrong-sign",
        "{op}'s rule sends its contribution with the wrong sign: a minus sign is lost, or one too "
        "many (`-=` for `+=`)",
        wrong_sign,
    ),
    Slip(
        "input-left-out",
        "{op}'s rule adds nothing to the gradient of {input}: each input gets its own contribution",
        input_left_out,
    ),
    Slip(
        "reads-grad",
        "{op}'s rule multiplies by an input's gradient (.grad) where the derivative needs its value "
        "(.data): d(a * b)/da is b's value, times out.grad",
        reads_grad,
    ),
    Slip(
        "adds-nothing",
        "{op}'s rule adds nothing to its inputs' gradients: the op must set it as its result's "
        "rule (`out._backward = _backward`), and it must add to each input's grad (`+=`)",
        adds_nothing,
    ),
)
