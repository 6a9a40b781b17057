"""Turn a failed comparison into a message that names the op whose rule is wrong.

Both engines ran the same case, so their tapes line up node for node. A node's gradient is
the sum of what each operation that uses it sends back. Walking the tape from the output
towards the inputs, the first node whose gradient is wrong therefore has only correct
consumers: the fault lies in their gradient rules (or in how the contributions were summed).

The tapes also hold each op's rule probed alone on fresh leaves (`rule`; `parts` for the
primitives a composite op is built from). So among a node's consumers the message names the
one whose rule is wrong, inside a composite the primitive whose rule is wrong (a wrong
`pow` rule, not `a / b`), and when every consumer's rule is right, the code that ran them:
backward() handed them a wrong out.grad (wrong order, a second backward that did not start
from zero, partial adjoints not summed). With several backward() calls, `passes` holds each
node's gradient after each call, and the first call that went wrong is the one examined.
The words come from the assignment's `hints.py`.

`diagnose` returns a `Diagnosis`: the message, and as data what it is about (the rule it
blames, the node it names), so that a report carries them and no one reads them back from
the words.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from grader.assignments import Slip
from grader.case import hang
from grader.case.quantity import Quantity
from grader.case.run import Failure, Run
from grader.case.trace import FORMATS, NodeRef, Step
from grader.verdict.compare import FINDINGS, Mismatch, close

MAX_USERS = 6  # consumers listed in a message
#: how a message joins two hints on one line
AND = "; and "
#: results whose expected value is the course's rule rather than PyTorch's (by name)
CONTRACT_RESULT = "topological order"
LEAVES = ("leaf", "parameter")


@dataclass(frozen=True)
class Diagnosis:
    """A failed case's message and what it lays the failure at, as data."""

    message: str
    #: the rule the failure is laid at (needle's class, micrograd's op, "backward", a
    #: function not written yet), "" when the message names no one rule
    blame: str = ""
    #: the tape node the message is about (its wrong value or gradient), when there is one
    wrong: int | None = None
    #: the catalogued slip the message names (`grader/assignments/<name>/slips.py`), if any
    slip: str = ""

    def plus(self, text: str) -> Diagnosis:
        """The same diagnosis with `text` added to its message."""
        return replace(self, message=self.message + text)


def rule(name: str) -> str:
    """An op's name as the rule that computes it: needle's class (`sum (Summation)` and
    `summation (Summation)` are one rule, Summation), micrograd's op; the gradient that a
    backward computed (`grad`) is backward's."""
    name = name.removesuffix(".gradient")
    if name == "grad":
        return "backward"
    if name.endswith(")") and " (" in name:
        return name[name.index(" (") + 2 : -1]
    return name


def hints_for(assignment: str) -> ModuleType:
    """The assignment's hint texts (`grader/assignments/<name>/hints.py`)."""
    return importlib.import_module(f"grader.assignments.{assignment}.hints")


def slips_for(assignment: str) -> tuple[Slip, ...]:
    """The assignment's catalogue of slips (`grader/assignments/<name>/slips.py`)."""
    try:
        return importlib.import_module(f"grader.assignments.{assignment}.slips").SLIPS
    except ModuleNotFoundError:
        return ()


class Tape:
    """The oracle's tape, with names for its nodes and both engines' numbers."""

    def __init__(self, expected: Run, actual: Run, hints: ModuleType | None = None) -> None:
        self.steps: list[Step] = expected.steps
        self.names = expected.names
        self.outputs = expected.outputs
        self.expected = expected.tape
        self.actual = actual.tape if len(actual.tape) == len(expected.tape) else []
        self.hints = hints or hints_for("needle" if _tensor_entries(self.expected) else "micrograd")
        #: the backward() call examined (an index into outputs), when a case made several
        self.pass_index: int | None = None
        #: the nodes of that call's graph: consumers outside it sent nothing in that call
        self.scope: set[int] | None = None

    @property
    def tensors(self) -> bool:
        """A tensor library's tape (needle), rather than micrograd's scalars."""
        return bool(self.hints.TENSORS)

    def name(self, i: int) -> str:
        return self.names.get(i) or self.steps[i].label or f"t{i}"

    def arg(self, ref: object) -> str:
        return self.name(ref.index) if isinstance(ref, NodeRef) else repr(ref)

    def expression(self, i: int) -> str:
        step = self.steps[i]
        if step.op in LEAVES:
            return self.name(i)
        args = [self.arg(r) for r in step.inputs]
        if step.op in FORMATS and len(args) >= FORMATS[step.op].count("{"):
            text = FORMATS[step.op].format(*args)
        else:
            extra = [f"{k}={v!r}" for k, v in step.kwargs.items() if v is not None]
            text = f"{step.op}({', '.join(args + extra)})"
        return f"{self.name(i)} = {text}"

    def consumers(self, i: int) -> list[int]:
        found = self.users[i]
        return list(found) if self.scope is None else [j for j in found if j in self.scope]

    def differs(self, i: int, key: str) -> bool:
        if not self.actual:
            return False
        e, a = self.expected[i].get(key), self.actual[i].get(key)
        if e is None:
            return False
        return a is None or close(e, a) is not None

    def op_nodes(self) -> list[int]:
        """The tape's op nodes (not leaves, parameters or gradients), in tape order."""
        return [i for i, step in enumerate(self.steps) if step.op not in (*LEAVES, "grad")]

    def rule(self, i: int) -> bool | None:
        """Did node i's op rule, probed alone, give what PyTorch's gives? (None: unknown.)"""
        return self._probe_agrees(i, "rule")

    def fixed_rule(self, i: int) -> bool | None:
        """needle, where a gradient is differentiated: did node i's rule, probed alone on both
        sides with the same fixed out_grad (`rule_fixed`), give what PyTorch's gives? PyTorch
        knows no gradient of the first graph's interior nodes once backward has run through
        the gradient, so `rule` cannot be compared there. (None: unknown.)"""
        return self._probe_agrees(i, "rule_fixed")

    def _probe_agrees(self, i: int, key: str) -> bool | None:
        if not self.actual:
            return None
        e, a = self.expected[i].get(key), self.actual[i].get(key)
        inputs = [r.index for r in self.steps[i].inputs if isinstance(r, NodeRef)]
        if e is None or any(self.differs(j, "value") for j in inputs):
            return None  # probed at other inputs than PyTorch's: nothing to compare
        return a is not None and close(e, a) is None

    def known_rule(self, i: int) -> bool | None:
        """`rule`, or where it cannot be compared, `fixed_rule`: where PyTorch knows no
        gradient of node i, or where the node's gradients differ (each side probed the rule
        with its own)."""
        found = None if self.differs(i, "grad") else self.rule(i)
        return self.fixed_rule(i) if found is None else found

    def drift(self, i: int) -> float:
        """How far node i's rule, probed alone, is from PyTorch's (the largest relative
        difference) where it passes the tolerance but not as rounding would: a rule right to
        a millionth, which a deep chain compounds. 0.0: the same numbers, or unknown. Only in
        float64, where one rule written two exact ways agrees to about 1e-15."""
        if self.rule(i) is not True:
            return 0.0
        e, a = self.expected[i]["rule"], self.actual[i]["rule"]
        if e.dtype != "float64" or a.dtype != "float64":
            return 0.0
        off = max((abs(y - x) / max(abs(x), 1e-8) for x, y in zip(e.data, a.data, strict=True)), default=0.0)
        return off if off > 1e-10 else 0.0

    def joined(self, j: int) -> bool:
        """micrograd: did detach node j return the node it detaches, so that the two are one
        Value and the gradient flows through? (Its `rule` says so; see `ScalarBackend`.)"""
        return self.steps[j].op == "detach" and not self.tensors and self.rule(j) is False

    def rule_is_right(self, i: int) -> bool:
        return self.rule(i) is True

    def wrong_parts(self, i: int) -> list[int]:
        """The parts (primitives) of a composite op whose rules, probed alone, are wrong."""
        if not self.actual or any(
            self.differs(r.index, "value") for r in self.steps[i].inputs if isinstance(r, NodeRef)
        ):
            return []  # probed at other inputs than PyTorch's: nothing to compare
        e, a = self.expected[i].get("parts"), self.actual[i].get("parts")
        if e is None or a is None or e.shape != a.shape:
            return []
        ea, aa = e.array(), a.array()
        return [k for k in range(e.shape[0]) if close(Quantity.from_array(ea[k]), Quantity.from_array(aa[k]))]

    def ancestors(self, i: int) -> set[int]:
        seen, todo = set(), [i]
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo += [r.index for r in self.steps[j].inputs if isinstance(r, NodeRef)]
        return seen

    @functools.cached_property
    def users(self) -> list[list[int]]:
        """Each node's consumers in the whole tape, in tape order (indexed once: walking the
        graph forward asks for them node by node)."""
        users: list[list[int]] = [[] for _ in self.steps]
        for j, step in enumerate(self.steps):
            for r in step.inputs:
                if isinstance(r, NodeRef) and j not in users[r.index][-1:]:  # x * x uses x once
                    users[r.index].append(j)
        return users

    def descendants(self, i: int) -> set[int]:
        """The nodes node i is an ancestor of (itself included): one walk forward, where asking
        each later node for its ancestors walks the graph once per node (a case that detaches in
        a loop holds hundreds of detach() nodes: seconds a case)."""
        seen, todo = set(), [i]
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo += self.users[j]
        return seen

    def at_pass(self, k: int) -> Tape:
        """This tape as it was right after backward() call k: each node's gradient then."""
        view = Tape.__new__(Tape)
        view.__dict__.update(self.__dict__)

        def then(entry: dict) -> dict:
            return {**entry, "grad": Quantity((entry["passes"].data[k],), ())}

        view.expected = [then(e) for e in self.expected]
        view.actual = [then(a) for a in self.actual]
        view.pass_index = k
        view.scope = self.ancestors(self.outputs[k])
        return view

    def carried_over(self, i: int) -> bool:
        """Is node i's gradient after this call what it should be plus what it held before?
        (backward() did not start the interior gradients from zero.)"""
        k = self.pass_index
        if not k or self.steps[i].op in LEAVES:
            return False
        before = self.actual[i]["passes"].data[k - 1]
        should = self.expected[i]["grad"].data[0] + before
        return before != 0 and close(Quantity((should,), ()), self.actual[i]["grad"]) is None


def _tensor_entries(entries: list[dict[str, Quantity | None]]) -> bool:
    return any(e.get("value") is not None and e["value"].shape != () for e in entries)


def _op(tape: Tape, i: int) -> str:
    """How a step's op is named: the function the student wrote (`Value.__rsub__`), or the
    needle op class it builds on a tensor tape: `truediv (EWiseDiv)`."""
    step = tape.steps[i]
    named = tape.hints.OP_NAMES.get(step.op)
    if named:
        return named
    cls = tape.hints.op_class(step.op, step.inputs)
    return f"{step.op} ({cls})" if cls else step.op


def _q(x: Quantity | None) -> str:
    """A quantity on one line (NumPy prints a matrix over several)."""
    return "nothing" if x is None else " ".join(x.describe().split())


def _expected_got(e: Quantity | None, a: Quantity | None) -> str:
    """`expected X, got Y`, with the gap when both print the same (1 and 0.9999996)."""
    te, ta = _q(e), _q(a)
    if e is not None and a is not None and e.dtype != a.dtype and e.dtype != "float64":
        te, ta = f"{te} ({e.dtype})", f"{ta} ({a.dtype})"
    elif te == ta and e is not None and a is not None and e.shape == a.shape:
        ta += f" (off by {float(abs(e.array() - a.array()).max()):.2g})"
    return f"expected {te}, got {ta}"


def _shape_note(e: Quantity | None, a: Quantity | None) -> str:
    if e is not None and a is not None and e.shape != a.shape:
        return f" — a gradient must have its input's shape {e.shape}, got shape {a.shape}"
    return ""


def explain_failure(failure: Failure, hints: ModuleType | None = None) -> Diagnosis:
    """The submission raised: where, and what that usually means. The blame is the gradient
    rule that was running (`MatMul.gradient` handing `MatMul.compute` misaligned factors is
    MatMul's rule), else the function that raised (or is not written yet), as the
    assignment's `hints.function_blame` counts it."""
    hints = hints or hints_for("micrograd")
    function = failure.rule or (failure.where[2] if failure.where else "")
    return Diagnosis(_failure_text(failure), hints.function_blame(function) if function else "")


def _failure_text(failure: Failure) -> str:
    where = hang.describe(failure.where)
    if failure.not_implemented:
        func = failure.where[2] if failure.where else "a function of the submission"
        return f"not implemented yet: {func}" + (f" — {failure.message}" if failure.message else "")
    if failure.type in FINDINGS:  # the grader's own finding: the message says it all
        return failure.message
    if failure.type == "KeyError":  # the key's repr: a tensor's spans lines, the first says enough
        first = failure.message.splitlines()[0] if failure.message else ""
        return f"{failure.type}{where}: {first}{' ...' if first != failure.message else ''}"
    return f"{failure.type}{where}" + (f": {failure.message}" if failure.message else "")  # a bare `assert`


def explain_rule(tape: Tape, i: int) -> Diagnosis:
    """A gradient that one op's rule returned in isolation (`op_gradient` cases)."""
    step = tape.steps[i]
    op = step.op.removesuffix(".gradient")
    node_ref, out_grad_ref = step.inputs[0], step.inputs[1]
    forward = tape.steps[node_ref.index]
    k = step.kwargs.get("input", 0)
    wrt = forward.inputs[k] if k < len(forward.inputs) else None
    wrt_name = tape.arg(wrt) if wrt is not None else f"input {k}"
    args = [f"{key}={v!r}" for key, v in forward.kwargs.items()]
    e, a = tape.expected[i]["value"], tape.actual[i]["value"]
    shape_note = ""
    if e is not None and a is not None and e.shape != a.shape:
        shape_note = f" — a gradient must have its input's shape: {wrt_name} has {e.shape}, got {a.shape}"
    message = (
        f"wrong gradient from {op}: {op}.gradient(out_grad, node) for input {k} ({wrt_name}), "
        f"where node = {op}({', '.join([tape.arg(r) for r in forward.inputs] + args)})\n"
        f"  inputs: {_inputs(tape, node_ref.index)}; "
        f"out_grad = {_with_shape(tape.expected[out_grad_ref.index]['value'])}\n"
        f"  gradient for {wrt_name}: {_expected_got(e, a)}{shape_note}"
    )
    return Diagnosis(message, rule(op), i)


def explain_forward(tape: Tape, made: int | None = None) -> Diagnosis | None:
    """The first node whose value is wrong (of the first `made`, those a case that raised
    made): the op that computed it."""
    for i in range(len(tape.steps) if made is None else made):
        if tape.differs(i, "value") and tape.steps[i].op.endswith(".gradient"):
            return explain_rule(tape, i)
        if tape.differs(i, "value") and tape.steps[i].op == "grad":
            found = _wrong_rule_inside(tape, i)
            if found is not None:
                return found
        if tape.differs(i, "value"):  # (a wrong grad's rule unknown: backward or any rule it ran)
            inputs = _inputs(tape, i)
            message = (
                f"wrong value from {_op(tape, i)}: {tape.expression(i)}\n"
                f"  inputs: {inputs}\n"
                f"  {tape.name(i)}: {_expected_got(tape.expected[i]['value'], tape.actual[i]['value'])}"
                f"{_shape_note(tape.expected[i]['value'], tape.actual[i]['value'])}"
                f"{_built_from(tape, i)}"
            )
            return Diagnosis(message, "" if tape.steps[i].op == "grad" else rule(_op(tape, i)), i)
    return None


def _wrong_rule_inside(tape: Tape, i: int) -> Diagnosis | None:
    """A gradient read inside the case (`grad` step i, x.grad after a backward) came out
    wrong: a rule of an op that backward went through (the graphs of the outputs made before
    it), probed alone with the same out_grad as PyTorch's, differs from PyTorch's (the first
    such op): that rule. Where every one of those rules is right on its own, and nothing else
    made the gradient (see `_backward_inside`), backward combined them wrongly."""
    through = set().union(*(tape.ancestors(k) for k in tape.outputs if k < i))
    ops = [j for j in tape.op_nodes() if j in through]
    wrong = [j for j in ops if tape.known_rule(j) is False]
    value = f"  {tape.name(i)}: {_expected_got(tape.expected[i]['value'], tape.actual[i]['value'])}"
    if not wrong:
        return _backward_inside(tape, i, ops, value)
    j = wrong[0]
    name, probed = _op(tape, j), tape.expression(j)
    k = _wrong_part(tape, j)
    if k is not None:  # inside a compound (`a - b`), the part whose rule is wrong (Negate)
        name, text = _parts_run(tape, j)[k]
        probed = f"{text.format(*(tape.arg(r) for r in tape.steps[j].inputs))}, inside {tape.expression(j)}"
    message = (
        f"wrong gradient from {name}: its rule, probed alone on {probed}, differs from "
        f"PyTorch's, and {tape.expression(i)} runs it\n{value}"
    )
    return Diagnosis(message, rule(name), i)


def _backward_inside(tape: Tape, i: int, ops: list[int], value: str) -> Diagnosis | None:
    """`grad` step i is wrong, and each rule backward ran for it (`ops`) is right on its own:
    backward's sum of the partial adjoints, or its order, is wrong. Only on a tensor tape whose
    first gradient this is, with no detach among the ops: a second gradient also depends on
    how each rule's result differentiates (`differentiable`), and a detach on what it keeps."""
    first = all(step.op != "grad" for step in tape.steps[:i])
    if not (tape.tensors and first and ops) or any(tape.steps[j].op == "detach" for j in ops):
        return None
    if not all(tape.known_rule(j) for j in ops):
        return None
    hints = tape.hints
    rules = ", ".join(f"{_op(tape, j)} ({tape.expression(j)})" for j in ops[:MAX_USERS])
    rules += f", ... ({len(ops) - MAX_USERS} more)" if len(ops) > MAX_USERS else ""
    message = (
        f"wrong value from grad: {tape.expression(i)}, a gradient made by {hints.BACKWARD}: the gradient "
        f"rules it ran are right on their own ({rules}), so backward combined them wrongly\n{value}\n"
        f"  {hints.SUM}{AND}{hints.ORDER}"
    )
    return Diagnosis(message, "backward", i)


def _built_from(tape: Tape, i: int) -> str:
    """For an operator built from other ops: which ones (a wrong one is in that method)."""
    step = tape.steps[i]
    cls = tape.hints.op_class(step.op, step.inputs)
    if step.op not in tape.hints.OP_NAMES or not cls:
        return ""
    written = tape.expression(i).split(" = ", 1)[1]
    return f"\n  {written} runs {tape.hints.OP_NAMES[step.op]}, which builds {cls}"


def _inputs(tape: Tape, i: int) -> str:
    parts = []
    for ref in tape.steps[i].inputs:
        if isinstance(ref, NodeRef):
            parts.append(f"{tape.name(ref.index)} = {_with_shape(tape.expected[ref.index]['value'])}")
        else:
            parts.append(repr(ref))
    return ", ".join(parts) or "none"


def _with_shape(x: Quantity | None) -> str:
    """A tensor's value with its shape (scalars, as micrograd has them, stay as they were)."""
    text = _q(x)
    if x is not None and x.shape != () and "(shape" not in text:
        text += f" (shape {x.shape})"
    return text


def explain_gradient(tape: Tape) -> Diagnosis | None:
    tape = _first_wrong_pass(tape)
    head = _no_gradient(tape) or _first_wrong_gradient(tape)
    if head is not None and _higher_order(tape) and not _all_differentiable(tape):
        head = head.plus(f"\n  {tape.hints.HIGHER_ORDER}")
    return head


def _all_differentiable(tape: Tape) -> bool:
    """Was every op's gradient rule found differentiable again (needle's `differentiable`
    entry: 0 where a backward through the rule's result ran, on a result built from out_grad)?
    Then the higher-order hint, to build gradients from the library's ops, is no clue."""
    said = [tape.actual[i].get("differentiable") for i in tape.op_nodes()] if tape.actual else []
    return bool(tape.actual) and bool(said) and all(q is not None and q.data[0] == 0.0 for q in said)


def _first_wrong_pass(tape: Tape) -> Tape:
    """With several backward() calls and a snapshot after each: the first call after which
    some gradient was wrong (later ones carry its error along)."""
    if len(tape.outputs) < 2 or not tape.actual:
        return tape
    entries = tape.expected + tape.actual
    if any(e.get("passes") is None for e in entries):
        return tape
    n = len(tape.expected[0]["passes"].data)
    if n != len(tape.outputs) or any(len(e["passes"].data) != n for e in entries):
        return tape
    for k in range(n):
        view = tape.at_pass(k)
        if any(view.differs(i, "grad") for i in range(len(tape.steps))):
            return view
    return tape


def _no_gradient(tape: Tape) -> Diagnosis | None:
    """Nodes that should have a gradient and have requires_grad = False: say so, and why."""
    found = [
        i
        for i in range(len(tape.steps))
        if tape.differs(i, "grad")
        and tape.actual[i].get("requires_grad") is not None
        and tape.actual[i]["requires_grad"].data[0] == 0.0
    ]
    if not found:
        return None
    leaves = [i for i in found if tape.steps[i].op in LEAVES]
    shown = found[:MAX_USERS]
    names = ", ".join(tape.name(i) for i in shown)
    names += f" and {len(found) - MAX_USERS} more" if len(found) > MAX_USERS else ""
    i = (leaves or found)[0]
    got = f"  {tape.name(i)}.grad: {_expected_got(tape.expected[i]['grad'], tape.actual[i]['grad'])}"
    what = "the leaves" if len(leaves) == len(found) else "the nodes"
    return Diagnosis(f"{what} {names} received no gradient\n{got}\n  {tape.hints.NO_GRADIENT}", "", i)


def _higher_order(tape: Tape) -> bool:
    return any(step.op == "grad" for step in tape.steps)


def _assign(tape: Tape) -> str:
    """needle's backward assigns: with several backward passes in a case, say so."""
    if len(tape.outputs) > 1 and tape.tensors and not _higher_order(tape):
        return f"\n  {tape.hints.REPEATED_BACKWARD}"
    return ""


def _detaches_fed(tape: Tape, i: int) -> list[int]:
    """The detach() nodes node i is an ancestor of, in tape order."""
    return sorted(j for j in tape.descendants(i) if j != i and tape.steps[j].op == "detach")


def _feeds_detach(tape: Tape, i: int) -> bool:
    return bool(_detaches_fed(tape, i))


def _leaky_detaches(tape: Tape, nodes: list[int]) -> list[int]:
    """Of these detach() nodes, those that let a gradient through when probed alone (on a
    fresh node that has an op: needle's detach must return a leaf, keeping neither)."""
    return [j for j in nodes if tape.steps[j].op == "detach" and tape.rule(j) is False]


def _first_wrong_gradient(tape: Tape) -> Diagnosis | None:
    hints = tape.hints
    for i in reversed(range(len(tape.steps))):
        if not tape.differs(i, "grad"):
            continue
        e, a = tape.expected[i]["grad"], tape.actual[i]["grad"]
        got = f"  {tape.name(i)}.grad: {_expected_got(e, a)}{_shape_note(e, a)}"
        fed = _detaches_fed(tape, i) if tape.tensors else []  # the detach() nodes i flows into
        detach = f"\n  {hints.DETACH}" if fed else ""
        if not tape.tensors and tape.joined(i):
            detach = f"\n  {hints.DETACH}"
        users = tape.consumers(i)
        if detach and tape.tensors and _single_adjoint(tape, i, users):
            detach = ""  # it got one of its partial adjoints: the sum is wrong, not detach()
        unknown = [j for j in users if tape.expected[j]["grad"] is None and tape.steps[j].op != "grad"]
        if _higher_order(tape) and unknown:
            return _explain_second_order(tape, i, got)
        if tape.carried_over(i):
            return _explain_backward(tape, i, users, got)
        leaky = _leaky_detaches(tape, fed)
        if leaky:
            return _explain_leaky_detach(tape, i, leaky[0], got)
        if tape.steps[i].op == "parameter" or any(tape.steps[j].op == "mlp" for j in users):
            inside = _mlp_rule(tape, i, got)  # the MLP's neurons ran rules the tape does not see
            if inside is not None:
                return inside
        if not users:
            if i in tape.outputs:
                return Diagnosis(
                    f"wrong gradient at the output {tape.name(i)}\n{got}\n  {hints.SEED}", "backward", i
                )
            return Diagnosis(f"wrong gradient of {tape.name(i)}\n{got}{detach}", "", i)
        wrong = [j for j in users if tape.rule(j) is False]
        if wrong:  # a wrong rule explains it: detach() only if it is one of them
            about_detach = any(tape.steps[j].op == "detach" for j in wrong)
            return _explain_wrong_rules(tape, i, wrong, users, got, detach if about_detach else "")
        drifting = [(off, j) for j in users if (off := tape.drift(j))]
        if not detach and drifting:  # right within the tolerance, yet not PyTorch's numbers
            off, j = drifting[0]
            return _explain_op(tape, i, j, got).plus(
                f"\n  its rule, probed alone, is off by {off:.1g} (relative): within the tolerance at "
                "one node, but it adds up from node to node"
            )
        # a node that got nothing at all got nothing through a detach() either
        starved = bool(tape.actual) and tape.actual[i].get("grad") is None
        if (not detach or starved) and all(tape.rule(j) for j in users):
            return _explain_backward(tape, i, users, got)
        if detach and tape.tensors and all(tape.rule(j) for j in users) and not _assign(tape):
            return _explain_detach(tape, i, users, got)
        if len(users) == 1:
            return _explain_op(tape, i, users[0], got, detach + _assign(tape))
        ops = ", ".join(f"{tape.steps[j].op} ({tape.expression(j)})" for j in users[:MAX_USERS])
        ops += f", ... ({len(users) - MAX_USERS} more)" if len(users) > MAX_USERS else ""
        if detach or _assign(tape):
            hint = (detach or _assign(tape)).strip()
        elif _higher_order(tape):
            hint = "its gradient is the sum of their contributions"
        elif tape.tensors:
            hint = f"its gradient is the sum of their contributions; {hints.SUM}"
        else:
            hint = f"its gradient is the sum of their contributions: check their rules; {hints.SUM}"
        head = f"wrong gradient of {tape.name(i)}, which feeds {len(users)} operations: {ops}"
        return Diagnosis(f"{head}\n{got}\n  {hint}", "", i)
    return None


def _explain_detach(tape: Tape, i: int, users: list[int], got: str) -> Diagnosis:
    """needle: the rules that send node i its gradient are right, and it feeds a detach():
    more reached it than they sent, through the detached tensor."""
    rules = ", ".join(f"{_op(tape, j)} ({tape.expression(j)})" for j in users[:MAX_USERS])
    message = (
        f"wrong gradient of {tape.name(i)}, which feeds a detach(): the rules that send it its "
        f"gradient are right on their own ({rules}), so a gradient reached it through the detached "
        f"tensor\n{got}\n  {tape.hints.DETACH}"
    )
    return Diagnosis(message, "detach", i)


def _explain_leaky_detach(tape: Tape, i: int, j: int, got: str) -> Diagnosis:
    """needle: node i feeds detach() node j, which, probed alone, lets a gradient through."""
    message = (
        f"wrong gradient of {tape.name(i)}, which feeds a detach() ({tape.expression(j)}): detach() "
        f"alone lets a gradient through (probed on a fresh node that has an op), so a gradient "
        f"reached {tape.name(i)} through the detached tensor\n{got}\n  {tape.hints.DETACH}"
    )
    return Diagnosis(message, "detach", i)


def _mlp_rule(tape: Tape, i: int, got: str) -> Diagnosis | None:
    """A parameter's gradient comes out of an MLP, which the tape does not see inside: when
    a rule the MLP runs on, probed alone, is wrong, that rule is the one to fix."""
    for j, step in enumerate(tape.steps):
        parts = tape.wrong_parts(j) if step.op == "mlp" else []
        if parts:
            primitive, text = tape.hints.MLP_RUNS_ON[parts[0]]
            message = (
                f"wrong gradient from {primitive}: its rule, probed alone on {text}, differs from "
                f"PyTorch's, and the MLP's neurons run it\n{got}"
            )
            return Diagnosis(message, rule(primitive), i)
    return None


def _explain_op(tape: Tape, i: int, j: int, got: str, tail: str = "") -> Diagnosis:
    """Node j's op sent a wrong gradient to its input i: name it, its inputs and out.grad."""
    incoming = tape.expected[j]["grad"]
    inside = _mlp_rule(tape, i, got) if tape.steps[j].op == "mlp" else None
    if inside is not None:
        return inside
    k = _wrong_part(tape, j)
    if k is not None:
        return _explain_part(tape, i, j, k, got, tail)
    message = (
        f"wrong gradient from {_op(tape, j)}: {tape.expression(j)}\n"
        f"  inputs: {_inputs(tape, j)}"
        + ("" if incoming is None else f"; incoming gradient {tape.name(j)}.grad = {_q(incoming)}")
        + f"\n{got}\n  where: {_path(tape, j)}{tail}"
    )
    return Diagnosis(message, rule(_op(tape, j)), i)


def _explain_part(tape: Tape, i: int, j: int, k: int, got: str, tail: str) -> Diagnosis:
    """A composite op whose gradient is wrong because a primitive it is built from is."""
    step, parts = tape.steps[j], _parts_run(tape, j)
    primitive, text = parts[k]
    args = [tape.arg(r) for r in step.inputs]
    whole = tape.expression(j).split(" = ", 1)[1]
    built = " and ".join(t.format(*args) for _, t in parts)
    message = (
        f"wrong gradient from {primitive}: its rule, probed alone on {text.format(*args)}, differs from "
        f"PyTorch's\n  {whole} is built from {built}, so its gradient is wrong too "
        f"({tape.expression(j)}; inputs: {_inputs(tape, j)})\n{got}\n  where: {_path(tape, j)}{tail}"
    )
    return Diagnosis(message, rule(primitive), i)


def _explain_wrong_rules(
    tape: Tape, i: int, wrong: list[int], users: list[int], got: str, tail: str
) -> Diagnosis:
    """Among node i's consumers, those whose rules, probed alone, are wrong."""
    culprit = {j: _culprit(tape, j) for j in wrong}
    if len(set(culprit.values())) == 1:  # `a / a` and `a**-0.5` both wrong: pow's rule
        wrong = [next((j for j in wrong if tape.steps[j].op == culprit[j]), wrong[0])]
    if len(wrong) == 1:
        others = len(users) - 1
        note = ""
        if others:
            right = "right" if all(tape.rule(j) for j in users if j != wrong[0]) else "not known to be wrong"
            plural = "s" * (others > 1)
            note = f"\n  {tape.name(i)} also feeds {others} other operation{plural}, whose rules are {right}"
        return _explain_op(tape, i, wrong[0], got, note + tail)
    ops = ", ".join(f"{_op(tape, j)} ({tape.expression(j)})" for j in wrong[:MAX_USERS])
    message = (
        f"wrong gradient from several rules: {ops}\n{got}\n"
        f"  each of these rules, run alone on its inputs, gives a gradient that differs from PyTorch's{tail}"
    )
    return Diagnosis(message, "", i)


def _parts_run(tape: Tape, j: int) -> tuple[tuple[str, str], ...]:
    """The primitives node j's composite op ran, each (op, expression) as the assignment's
    `hints.BUILT_FROM` writes it, in the order the backend probes them. A part on a number
    alone is no op of the graph: `a / 4.0` is `a * 0.25` (Python computes `4.0**-1`), so
    its parts are mul alone, and pow's rule never ran."""
    step = tape.steps[j]
    numbers = {f"{{{k}}}" for k, ref in enumerate(step.inputs) if not isinstance(ref, NodeRef)}
    return tuple(
        (op, text)
        for op, text in tape.hints.BUILT_FROM.get(step.op, ())
        if not set(re.findall(r"\{\d\}", text)) <= numbers
    )


def _wrong_part(tape: Tape, j: int) -> int | None:
    """The first part of node j's composite op (an index into `_parts_run`) whose rule,
    probed alone, is wrong; None if none is, or the op is no composite."""
    found = tape.wrong_parts(j) if _parts_run(tape, j) else []
    return found[0] if found else None


def _culprit(tape: Tape, j: int) -> str:
    """The primitive whose rule makes node j's gradient wrong (inside a composite, its part)."""
    k = _wrong_part(tape, j)
    return _parts_run(tape, j)[k][0] if k is not None else tape.steps[j].op


def _explain_backward(tape: Tape, i: int, users: list[int], got: str) -> Diagnosis:
    """The rules that feed node i are right on their own: backward() misused them."""
    hints = tape.hints
    rules = ", ".join(f"{_op(tape, j)} ({tape.expression(j)})" for j in users[:MAX_USERS])
    rules += f", ... ({len(users) - MAX_USERS} more)" if len(users) > MAX_USERS else ""
    if tape.tensors:
        if _single_adjoint(tape, i, users):  # the catalogue's slip says which adjoint it kept
            hint = hints.SUM
        elif len(tape.outputs) > 1:
            hint = hints.REPEATED_BACKWARD
        else:
            hint = f"{hints.SUM}{AND}{hints.ORDER}"
        message = (
            f"wrong gradient of {tape.name(i)} from {hints.BACKWARD}: the gradient rules that send it "
            f"partial adjoints are right on their own ({rules}), so backward combined them wrongly"
            f"\n{got}\n  {hint}"
        )
        return Diagnosis(message, "backward", i)
    several = len(tape.outputs) > 1 and (tape.pass_index is None or tape.pass_index > 0)
    hint = hints.REPEATED_BACKWARD if several else hints.ORDER
    message = (
        f"wrong gradient of {tape.name(i)} from backward(): the rules that send it its gradient are "
        f"right on their own ({rules}), so backward() ran them with a wrong out.grad\n{got}\n  {hint}"
    )
    return Diagnosis(message, "backward", i)


def _single_adjoint(tape: Tape, i: int, users: list[int]) -> bool:
    """needle: is node i's gradient just one of the partial adjoints its consumers sent
    (probed with their own gradients), while it should be their sum?"""
    pieces = []
    for j in users:
        rule = tape.expected[j].get("rule")
        if rule is None:
            return False
        flat, at = rule.array().reshape(-1), 0
        if flat.size != sum(
            tape.expected[r.index]["value"].array().size
            for r in tape.steps[j].inputs
            if isinstance(r, NodeRef)
        ):
            return False
        for ref in tape.steps[j].inputs:
            if not isinstance(ref, NodeRef):
                continue
            size = tape.expected[ref.index]["value"].array().size
            if ref.index == i:
                pieces.append(flat[at : at + size])
            at += size
    actual = tape.actual[i]["grad"]
    if len(pieces) < 2 or actual is None:
        return False
    size = actual.array().size
    return any(
        p.size == size and close(Quantity.from_array(p.reshape(actual.shape)), actual) is None for p in pieces
    )


def _explain_second_order(tape: Tape, i: int, got: str) -> Diagnosis:
    """A gradient after a backward through a gradient: the interior gradients of the first
    graph depend on how the rules were written, so the rules to check are all of them."""
    grads = ", ".join(tape.expression(j) for j, s in enumerate(tape.steps) if s.op == "grad")
    rules = [
        tape.expression(j)
        for j, s in enumerate(tape.steps)
        if s.op not in ("leaf", "parameter", "grad")
        and tape.expected[j]["grad"] is None
        and tape.actual[j]["grad"] is not None
    ]
    message = (
        f"wrong gradient of {tape.name(i)} from a backward through a gradient ({grads})\n{got}\n"
        f"  that backward differentiates the gradient rules of: {', '.join(rules) or 'none'}"
    )
    wrong = [j for j in tape.op_nodes() if tape.fixed_rule(j) is False]
    if wrong:  # a rule whose numbers are wrong: the gradient it builds, and its derivative, are too
        j = wrong[0]
        message += (
            f"\n  of those, {_op(tape, j)} ({tape.expression(j)}) gives other numbers than PyTorch's "
            "rule, probed alone: fix it first"
        )
        return Diagnosis(message, rule(_op(tape, j)), i)
    return Diagnosis(message, "", i)


def _path(tape: Tape, i: int, limit: int = 6) -> str:
    """From node i towards the output, following first consumers: where the op sits."""
    chain = [i]
    while len(chain) < limit:
        users = tape.consumers(chain[-1])
        if not users:
            break
        chain.append(users[0])
    text = " -> ".join(tape.name(j) for j in chain)
    return text + (" -> ..." if len(chain) == limit else " (output)")


def explain_results(mismatches: list[Mismatch]) -> str:
    lines = []
    for m in mismatches[:6]:
        note = _shape_note(m.expected, m.actual) if m.is_grad else ""  # only gradients: not an order
        lines.append(f"  {m.name}: {_expected_got(m.expected, m.actual)}{note}")
    if len(mismatches) > 6:
        lines.append(f"  ... and {len(mismatches) - 6} more")
    return "\n".join(lines)


def explain_orders(tape: Tape, mismatches: list[Mismatch]) -> str:
    """A topological order is compared as tape positions; show it as the case's nodes."""
    lines = []
    for m in mismatches:
        if "topological order" not in m.name or m.expected is None or m.actual is None:
            continue
        names = [", ".join(_node_name(tape, x) for x in q.data) for q in (m.expected, m.actual)]
        lines.append(f"\n  {m.name}, as nodes: expected {names[0]}\n    got {names[1]}")
    return "".join(lines)


def _node_name(tape: Tape, x: float) -> str:
    i = int(x)
    return tape.name(i) if x == i and 0 <= i < len(tape.steps) else "(a node the case did not make)"


def _about_detach(tape: Tape, m: Mismatch) -> bool:
    """Is a result about a detached node or one that feeds a detach()? (A wrong gradient
    elsewhere, the output's own among them, says nothing about detach().)"""
    if not any(s.op == "detach" for s in tape.steps):
        return False
    by_name = {name: i for i, name in tape.names.items()}
    i = by_name.get(m.name.removesuffix(".grad"))
    if i is None:
        return not m.is_grad and CONTRACT_RESULT not in m.name  # `x has an op`, nodes reached
    return tape.steps[i].op == "detach" or _feeds_detach(tape, i)


def _lazy_part(tape: Tape, mismatches: list[Mismatch]) -> str:
    """needle's lazy mode, when its flags are all that differ and each says a node's data was
    computed before anyone asked for it (`computed x`: expected 0, got 1; a constant made at
    once also lost its op, `x has an op`): the part that builds a node in lazy mode."""
    if not tape.hints.LAZY_PART or not any(m.name.startswith("computed") for m in mismatches):
        return ""
    for m in mismatches:
        early = (0.0, 1.0) if m.name.startswith("computed") else (1.0, 0.0)
        flag = m.name.startswith("computed") or m.name.endswith(" has an op")
        if not (flag and m.expected and m.actual and m.expected.shape == m.actual.shape == ()):
            return ""
        if (m.expected.data[0], m.actual.data[0]) != early:
            return ""
    return tape.hints.LAZY_PART


def _structure_hints(tape: Tape, mismatches: list[Mismatch]) -> str:
    """Results about the graph rather than numbers (lazy flags, what a detached node keeps)."""
    hints = []
    if any(m.name.startswith("computed") for m in mismatches) and tape.hints.LAZY:
        hints.append(tape.hints.LAZY)
    tensors = tape.tensors or any(m.expected is not None and m.expected.shape != () for m in mismatches)
    if tensors and any(_about_detach(tape, m) for m in mismatches):
        hints.append(tape.hints.DETACH)
    refused = [
        tape.name(i)
        for i in range(len(tape.steps) if tape.actual else 0)
        if (e := tape.expected[i].get("requires_grad")) is not None
        and (a := tape.actual[i].get("requires_grad")) is not None
        and e.data[0] == 1.0
        and a.data[0] == 0.0
    ]
    if refused:
        hints.append(f"the leaves {', '.join(refused[:MAX_USERS])}: {tape.hints.NO_GRADIENT}")
    return "".join(f"\n  {h}" for h in hints)


@dataclass
class Evidence:
    """What a slip's detector may read about one failed case: the tapes (`tape`; `at_pass`,
    the backward() call that first went wrong), the results that differ, the exception the
    submission raised, and the diagnosis found so far (what it blames, which node)."""

    tape: Tape
    mismatches: list[Mismatch]
    failure: Failure | None
    diagnosis: Diagnosis

    @property
    def at_pass(self) -> Tape:
        return _first_wrong_pass(self.tape)

    def op_nodes(self) -> list[int]:
        """The tape's op nodes (not leaves, parameters or gradients), in tape order."""
        return self.tape.op_nodes()

    def rule_pair(self, i: int) -> tuple[Any, Any] | None:
        """Node i's rule probed alone, (PyTorch's, the submission's) as flat arrays, when
        both are known and the submission's is wrong."""
        if self.tape.rule(i) is not False:
            return None
        e, a = self.tape.expected[i].get("rule"), self.tape.actual[i].get("rule")
        if e is None or a is None or len(e.data) != len(a.data):  # (a rule of the wrong shape: flat)
            return None
        return e.array().reshape(-1), a.array().reshape(-1)

    def single_adjoint(self, i: int) -> bool:
        """needle: is node i's gradient one of the partial adjoints its consumers sent,
        where it should be their sum?"""
        return _single_adjoint(self.tape, i, self.tape.consumers(i))

    def value(self, i: int) -> Any:
        """Node i's value (PyTorch's) as an array."""
        return self.tape.expected[i]["value"].array()

    def inputs(self, i: int) -> list[int]:
        return [r.index for r in self.tape.steps[i].inputs if isinstance(r, NodeRef)]


def name_slip(diagnosis: Diagnosis, evidence: Evidence, slips: tuple[Slip, ...]) -> Diagnosis:
    """The first catalogued slip whose detector recognises the case: its line goes right
    under the message's first line, and its name into the diagnosis."""
    for slip in slips:
        try:
            fields = slip.detect(evidence)
        except (KeyError, IndexError, ValueError, ZeroDivisionError, FloatingPointError):
            fields = None  # a detector that cannot read this tape does not recognise it
        if fields is None:
            continue
        first, _, rest = diagnosis.message.partition("\n")
        blamed = slip.laid_at(fields, diagnosis.blame)
        if (
            diagnosis.blame
            and rule(blamed) != rule(diagnosis.blame)
            and first.startswith("wrong gradient from ")
        ):
            # the slip lays the failure at another rule: the first line names that one
            at = fields.get("at", "")
            rest = f"  where it shows: {first}" + (f"\n{rest}" if rest else "")
            first = f"wrong gradient from {blamed}" + (f": {at}" if at else "")
        rest = _without(rest, slip.replaces)
        message = f"{first}\n  {slip.says(fields)}" + (f"\n{rest}" if rest else "")
        return replace(diagnosis, message=message, slip=slip.name, blame=blamed)
    return diagnosis


def _without(text: str, hints: tuple[str, ...]) -> str:
    """`text` less the hints a slip's line replaces, whole lines or the parts of a line that
    joins several (`AND`)."""
    kept = []
    for line in text.split("\n"):
        parts = line.strip().split(AND)
        left = [part for part in parts if part not in hints]
        if left == parts:
            kept.append(line)
        elif left:
            kept.append(line[: len(line) - len(line.lstrip())] + AND.join(left))
    return "\n".join(kept)


def _made_before_raising(expected: Run, actual: Run, hints: ModuleType) -> Tape | None:
    """The tape of a case that raised, read up to there (the nodes it made, the rest empty):
    a value already wrong among them is the cause (rsub reversed, so that log meets a
    negative number and raises)."""
    made = len(actual.tape)
    if not made or made > len(expected.tape):
        return None
    rest = [{"value": None, "grad": None, "rule": None} for _ in range(len(expected.tape) - made)]
    return Tape(expected, replace(actual, tape=[*actual.tape, *rest]), hints)


def uses_mlp(expected: Run) -> bool:
    """Does the case build an MLP from the submission's nn module?"""
    return any(step.op in ("parameter", "mlp") for step in expected.steps)


def mlp_note(expected: Run, assignment: str) -> str:
    """The MLP's contract, for a case that builds an MLP from the submission's nn module."""
    text = hints_for(assignment).MLP if uses_mlp(expected) else ""
    return f"\n  {text}" if text else ""


def _in_the_mlp(tape: Tape, diagnosis: Diagnosis, failure: Failure | None, assignment: str) -> bool:
    """Is the failure in the MLP's own code or its call, rather than in the engine it runs
    on? An exception outside backward(), the rules and the engine's node class; wrong numbers
    that no rule, no slip and no part of backward() explains, or the catalogue's slips of the
    MLP's own."""
    if failure is not None:
        func = failure.where[2] if failure.where else ""
        engine = func.startswith(f"{tape.hints.ENGINE_CLASS}.")  # `Value.__rmul__`, `Value.__eq__`
        return not (func.endswith("backward") or "_backward" in func or engine)
    wrong_rule = any(tape.rule(j) is False or tape.wrong_parts(j) for j in range(len(tape.steps)))
    mlp_slip = any(slip.name == diagnosis.slip and slip.blame == "mlp" for slip in slips_for(assignment))
    return mlp_slip or (diagnosis.blame in ("", "mlp") and not (diagnosis.slip or wrong_rule))


def diagnose(
    expected: Run, actual: Run, mismatches: list[Mismatch], assignment: str | None = None
) -> Diagnosis:
    """The diagnosis of a failed case: the op to fix first and, when the catalogue knows
    it, the slip; then the results that differ."""
    if assignment is None:
        assignment = "needle" if _tensor_entries(expected.tape) else "micrograd"
    hints = hints_for(assignment)
    tape = Tape(expected, actual, hints)
    if actual.failure is not None:
        # the exception's slips read no tape: one read up to the exception is only for its values
        tape = Tape(expected, replace(actual, tape=[]), hints)
        found = explain_failure(actual.failure, hints)
        evidence = Evidence(tape, mismatches, actual.failure, found)
        found = name_slip(found, evidence, slips_for(assignment))
        partial = _made_before_raising(expected, actual, hints)
        before = explain_forward(partial, len(actual.tape)) if partial is not None else None
        if before is not None:  # the exception is where it surfaced: the wrong value is the cause
            before = name_slip(before, Evidence(partial, [], None, before), slips_for(assignment))
            return before.plus(f"\n  and then the case raised: {found.message}")
        in_the_mlp = _in_the_mlp(tape, found, actual.failure, assignment)
        return found.plus(mlp_note(expected, assignment) if in_the_mlp else "")
    values = [m for m in mismatches if not m.is_grad]
    wrong_grad_node = any(s.op == "grad" and tape.differs(i, "value") for i, s in enumerate(tape.steps))
    head = explain_forward(tape) if values or wrong_grad_node else None
    if head is None:
        head = explain_gradient(tape)
    listing = explain_results(mismatches) + explain_orders(tape, mismatches)
    if head is None:
        # a topological order is the course's rule (PyTorch has none to compare with)
        ours = all(CONTRACT_RESULT in m.name for m in mismatches)
        title = "results differ from the contract:" if ours else "results differ from PyTorch:"
        leaky = _leaky_detaches(tape, list(range(len(tape.steps)))) if tape.tensors else []
        blame = "detach" if leaky else _lazy_part(tape, mismatches)  # what these results show
        untraced = f"\n  {hints.NO_TAPE}" if not expected.tape else ""  # a deep case (`trace=False`)
        head = Diagnosis(f"{title}\n{listing}{_structure_hints(tape, mismatches)}{untraced}", blame)
        listing = ""
    head = name_slip(head, Evidence(tape, mismatches, None, head), slips_for(assignment))
    head = head.plus(mlp_note(expected, assignment) if _in_the_mlp(tape, head, None, assignment) else "")
    return head.plus(f"\nresults that differ:\n{listing}") if listing else head


def op_name(tape: Tape, i: int) -> str:
    """Step i's op as messages name it (`truediv (EWiseDiv)` on a tensor tape)."""
    return _op(tape, i)
