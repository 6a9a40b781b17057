"""Turn a failed comparison into a message that names the op whose rule is wrong.

Both engines ran the same case, so their tapes line up node for node. A node's gradient is
the sum of what each operation that uses it sends back. Walking the tape from the output
towards the inputs, the first node whose gradient is wrong therefore has only correct
consumers: the fault lies in their gradient rules (or, with several consumers, in how the
contributions were summed). That consumer is the op to name, with its inputs, the incoming
gradient, and the expected and actual gradient it produced.

Unless those rules are right: micrograd's tapes also hold each op's rule probed alone on
fresh leaves (`ScalarBackend.probe_rule`). When every consumer's rule matches PyTorch's,
backward() handed them a wrong out.grad (wrong order, or a second backward that did not
start from zero), and the message says so instead of blaming a correct rule.
"""

from __future__ import annotations

from grader.case.quantity import Quantity
from grader.case.run import Failure, Run
from grader.case.trace import FORMATS, NodeRef, Step
from grader.verdict.compare import Mismatch, close

SEED_HINT = "backward() must seed the output's gradient with 1 (ones for a tensor)"
TENSOR_SEED_HINT = (
    "backward(out_grad) must set the output's gradient to out_grad (ones when none is given), "
    "replacing the gradient of any earlier backward"
)
ASSIGN_HINT = (
    "backward ran more than once in this case: each backward assigns the gradients for its own "
    "output, replacing those of an earlier backward, never adding to them"
)
LAZY_HINT = (
    "in lazy mode (LAZY_MODE = True) an op only builds its node; its data is computed when "
    "realize_cached_data() or numpy() asks for it, and must equal eager mode's"
)
ORDER_HINT = "find_topo_sort lists each node after its inputs: a post-order depth-first search"
TOPO_HINT = (
    "backward reached a node before every op that uses it had sent its gradient: "
    "find_topo_sort must put each node after its inputs (post-order), and backward walk it in reverse"
)
HIGHER_ORDER_HINT = (
    "this case differentiates a gradient: gradient rules must build their result from the "
    "library's ops (not NumPy on .numpy() or cached_data), so the gradient has a graph to differentiate"
)
SUM_ADJOINTS_HINT = "backward must add up the partial adjoints a node receives from every op that uses it"
DETACH_HINT = "no gradient flows through detach(): the detached tensor is a new leaf, without op or inputs"
ACCUMULATE_HINT = "each rule must add its contribution (`+=`); assigning with `=` keeps only the last one"
BACKWARD_ORDER_HINT = (
    "backward() must run a node's _backward only after every node that uses it has run its own "
    "(reverse topological order), so that out.grad is complete when the rule reads it"
)
BACKWARD_RESET_HINT = (
    "backward() ran more than once in this case: each call must start the interior nodes' "
    "gradients from zero (leaves keep accumulating, as in PyTorch), or it pushes the earlier "
    "calls' gradients through again; and each call runs the rules in reverse topological order"
)
VALUE_DETACH_HINT = "detach() must return a new leaf Value with the same data: no gradient flows through it"
MAX_USERS = 6  # consumers listed in a message


class Tape:
    """The oracle's tape, with names for its nodes and both engines' numbers."""

    def __init__(self, expected: Run, actual: Run) -> None:
        self.steps: list[Step] = expected.steps
        self.names = expected.names
        self.outputs = expected.outputs
        self.expected = expected.tape
        self.actual = actual.tape if len(actual.tape) == len(expected.tape) else []

    def name(self, i: int) -> str:
        return self.names.get(i) or self.steps[i].label or f"t{i}"

    def arg(self, ref: object) -> str:
        return self.name(ref.index) if isinstance(ref, NodeRef) else repr(ref)

    def expression(self, i: int) -> str:
        step = self.steps[i]
        if step.op in ("leaf", "parameter"):
            return self.name(i)
        args = [self.arg(r) for r in step.inputs]
        if step.op in FORMATS and len(args) >= FORMATS[step.op].count("{"):
            text = FORMATS[step.op].format(*args)
        else:
            extra = [f"{k}={v!r}" for k, v in step.kwargs.items() if v is not None]
            text = f"{step.op}({', '.join(args + extra)})"
        return f"{self.name(i)} = {text}"

    def consumers(self, i: int) -> list[int]:
        uses = lambda s: any(isinstance(r, NodeRef) and r.index == i for r in s.inputs)
        return [j for j, s in enumerate(self.steps) if uses(s)]

    def differs(self, i: int, key: str) -> bool:
        if not self.actual:
            return False
        e, a = self.expected[i][key], self.actual[i][key]
        if e is None:
            return False
        return a is None or close(e, a) is not None

    def rule_is_right(self, i: int) -> bool:
        """Did node i's op rule, probed alone, give what PyTorch's gives? (False if unknown.)"""
        if not self.actual:
            return False
        e, a = self.expected[i].get("rule"), self.actual[i].get("rule")
        return e is not None and a is not None and close(e, a) is None


def _op(tape: Tape, i: int) -> str:
    """A step's op, with the needle op class it builds on a tensor tape: `truediv (EWiseDiv)`."""
    step = tape.steps[i]
    if _tensors(tape):
        from grader.assignments.needle.backend import needle_class

        cls = needle_class(step.op, step.inputs)
        if cls:
            return f"{step.op} ({cls})"
    return step.op


def _q(x: Quantity | None) -> str:
    """A quantity on one line (NumPy prints a matrix over several)."""
    return "nothing" if x is None else " ".join(x.describe().split())


def _expected_got(e: Quantity | None, a: Quantity | None) -> str:
    """`expected X, got Y`, with the gap when both print the same (1 and 0.9999996)."""
    te, ta = _q(e), _q(a)
    if te == ta and e is not None and a is not None and e.shape == a.shape:
        ta += f" (off by {float(abs(e.array() - a.array()).max()):.2g})"
    return f"expected {te}, got {ta}"


def _shape_note(e: Quantity | None, a: Quantity | None) -> str:
    if e is not None and a is not None and e.shape != a.shape:
        return f" — a gradient must have its input's shape {e.shape}, got shape {a.shape}"
    return ""


def explain_failure(failure: Failure) -> str:
    where = ""
    if failure.where:
        file, line, func = failure.where
        where = f" in {func} ({file}, line {line})"
    if failure.not_implemented:
        func = failure.where[2] if failure.where else "a function of the submission"
        return f"not implemented yet: {func}" + (f" — {failure.message}" if failure.message else "")
    text = f"{failure.type}{where}: {failure.message}"
    if failure.type == "KeyError" and failure.where and failure.where[2] == "compute_gradient_of_variables":
        first = failure.message.splitlines()[0] if failure.message else ""
        text = f"{failure.type}{where}: {first}{' ...' if first != failure.message else ''}\n  {TOPO_HINT}"
    if failure.type == "RecursionError":
        text += "\n  a deep graph needs an iterative (loop and stack) topological sort, not recursion"
    return text


def explain_rule(tape: Tape, i: int) -> str:
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
    return (
        f"wrong gradient from {op}: {op}.gradient(out_grad, node) for input {k} ({wrt_name}), "
        f"where node = {op}({', '.join([tape.arg(r) for r in forward.inputs] + args)})\n"
        f"  inputs: {_inputs(tape, node_ref.index)}; "
        f"out_grad = {_with_shape(tape.expected[out_grad_ref.index]['value'])}\n"
        f"  gradient for {wrt_name}: {_expected_got(e, a)}{shape_note}"
    )


def explain_forward(tape: Tape) -> str | None:
    for i in range(len(tape.steps)):
        if tape.differs(i, "value") and tape.steps[i].op.endswith(".gradient"):
            return explain_rule(tape, i)
        if tape.differs(i, "value"):
            inputs = _inputs(tape, i)
            return (
                f"wrong value from {_op(tape, i)}: {tape.expression(i)}\n"
                f"  inputs: {inputs}\n"
                f"  {tape.name(i)}: {_expected_got(tape.expected[i]['value'], tape.actual[i]['value'])}"
                f"{_shape_note(tape.expected[i]['value'], tape.actual[i]['value'])}"
            )
    return None


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


def explain_gradient(tape: Tape) -> str | None:
    head = _first_wrong_gradient(tape)
    if head is not None and _higher_order(tape):
        head += f"\n  {HIGHER_ORDER_HINT}"
    return head


def _higher_order(tape: Tape) -> bool:
    return any(step.op == "grad" for step in tape.steps)


def _tensors(tape: Tape) -> bool:
    """A tensor library's tape (needle), rather than micrograd's scalars."""
    return any(e["value"] is not None and e["value"].shape != () for e in tape.expected)


def _assign(tape: Tape) -> str:
    """needle's backward assigns: with several backward passes in a case, say so."""
    if len(tape.outputs) > 1 and _tensors(tape) and not _higher_order(tape):
        return f"\n  {ASSIGN_HINT}"
    return ""


def _feeds_detach(tape: Tape, i: int) -> bool:
    """Is node i an ancestor of some detach()?"""
    todo = [r.index for s in tape.steps if s.op == "detach" for r in s.inputs if isinstance(r, NodeRef)]
    seen: set[int] = set()
    while todo:
        j = todo.pop()
        if j == i:
            return True
        if j not in seen:
            seen.add(j)
            todo += [r.index for r in tape.steps[j].inputs if isinstance(r, NodeRef)]
    return False


def _first_wrong_gradient(tape: Tape) -> str | None:
    for i in reversed(range(len(tape.steps))):
        if not tape.differs(i, "grad"):
            continue
        e, a = tape.expected[i]["grad"], tape.actual[i]["grad"]
        got = f"  {tape.name(i)}.grad: {_expected_got(e, a)}{_shape_note(e, a)}"
        detach = f"\n  {DETACH_HINT}" if _tensors(tape) and _feeds_detach(tape, i) else ""
        if not _tensors(tape) and tape.steps[i].op == "detach":
            detach = f"\n  {VALUE_DETACH_HINT}"
        users = tape.consumers(i)
        unknown = [j for j in users if tape.expected[j]["grad"] is None and tape.steps[j].op != "grad"]
        if _higher_order(tape) and unknown:
            return _explain_second_order(tape, i, got)
        if users and not detach and not _tensors(tape) and all(tape.rule_is_right(j) for j in users):
            return _explain_backward(tape, i, users, got)
        if not users:
            if i in tape.outputs:
                hint = TENSOR_SEED_HINT if _tensors(tape) else SEED_HINT
                return f"wrong gradient at the output {tape.name(i)}\n{got}\n  {hint}"
            return f"wrong gradient of {tape.name(i)}\n{got}{detach}"
        if len(users) == 1:
            j = users[0]
            incoming = tape.expected[j]["grad"]
            return (
                f"wrong gradient from {_op(tape, j)}: {tape.expression(j)}\n"
                f"  inputs: {_inputs(tape, j)}"
                + ("" if incoming is None else f"; incoming gradient {tape.name(j)}.grad = {_q(incoming)}")
                + f"\n{got}\n  where: {_path(tape, j)}{detach}{_assign(tape)}"
            )
        ops = ", ".join(f"{tape.steps[j].op} ({tape.expression(j)})" for j in users[:MAX_USERS])
        ops += f", ... ({len(users) - MAX_USERS} more)" if len(users) > MAX_USERS else ""
        if detach or _assign(tape):
            hint = (detach or _assign(tape)).strip()
        elif _higher_order(tape):
            hint = "its gradient is the sum of their contributions"
        elif _tensors(tape):
            hint = f"its gradient is the sum of their contributions; {SUM_ADJOINTS_HINT}"
        else:
            hint = f"its gradient is the sum of their contributions: check their rules; {ACCUMULATE_HINT}"
        head = f"wrong gradient of {tape.name(i)}, which feeds {len(users)} operations: {ops}"
        return f"{head}\n{got}\n  {hint}"
    return None


def _explain_backward(tape: Tape, i: int, users: list[int], got: str) -> str:
    """The rules that feed node i are right on their own: backward() misused them."""
    rules = ", ".join(f"{_op(tape, j)} ({tape.expression(j)})" for j in users[:MAX_USERS])
    rules += f", ... ({len(users) - MAX_USERS} more)" if len(users) > MAX_USERS else ""
    hint = BACKWARD_RESET_HINT if len(tape.outputs) > 1 else BACKWARD_ORDER_HINT
    return (
        f"wrong gradient of {tape.name(i)} from backward(): the rules that send it its gradient are "
        f"right on their own ({rules}), so backward() ran them with a wrong out.grad\n{got}\n  {hint}"
    )


def _explain_second_order(tape: Tape, i: int, got: str) -> str:
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
    return (
        f"wrong gradient of {tape.name(i)} from a backward through a gradient ({grads})\n{got}\n"
        f"  that backward differentiates the gradient rules of: {', '.join(rules) or 'none'}"
    )


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
        note = _shape_note(m.expected, m.actual)
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
    return "".join(lines) + (f"\n  {ORDER_HINT}" if lines else "")


def _node_name(tape: Tape, x: float) -> str:
    i = int(x)
    return tape.name(i) if x == i and 0 <= i < len(tape.steps) else "(a node the case did not make)"


def _structure_hints(tape: Tape, mismatches: list[Mismatch]) -> str:
    """Results about the graph rather than numbers (lazy flags, what a detached node keeps)."""
    hints = []
    if any(m.name.startswith("computed") for m in mismatches):
        hints.append(LAZY_HINT)
    tensors = _tensors(tape) or any(m.expected is not None and m.expected.shape != () for m in mismatches)
    if tensors and any(s.op == "detach" for s in tape.steps):
        hints.append(DETACH_HINT)
    return "".join(f"\n  {h}" for h in hints)


def diagnose(expected: Run, actual: Run, mismatches: list[Mismatch]) -> str:
    """The message for a failed case: the op to fix first, then the results that differ."""
    if actual.failure is not None:
        return explain_failure(actual.failure)
    tape = Tape(expected, actual)
    values = [m for m in mismatches if not m.is_grad]
    head = explain_forward(tape) if values else None
    if head is None:
        head = explain_gradient(tape)
    listing = explain_results(mismatches) + explain_orders(tape, mismatches)
    if head is None:
        return "results differ from PyTorch:\n" + listing + _structure_hints(tape, mismatches)
    return f"{head}\nresults that differ:\n{listing}"


def op_name(tape: Tape, i: int, tensors: bool | None = None) -> str:
    """Step i's op as messages name it (`truediv (EWiseDiv)` on a tensor tape); pass
    `tensors` (`is_tensor_tape`) when naming many steps of one tape."""
    if tensors is None:
        return _op(tape, i)
    step = tape.steps[i]
    if tensors:
        from grader.assignments.needle.backend import needle_class

        cls = needle_class(step.op, step.inputs)
        if cls:
            return f"{step.op} ({cls})"
    return step.op


def is_tensor_tape(tape: Tape) -> bool:
    return _tensors(tape)
