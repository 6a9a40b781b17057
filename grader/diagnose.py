"""Turn a failed comparison into a message that names the op whose rule is wrong.

Both engines ran the same case, so their tapes line up node for node. A node's gradient is
the sum of what each operation that uses it sends back. Walking the tape from the output
towards the inputs, the first node whose gradient is wrong therefore has only correct
consumers: the fault lies in their gradient rules (or, with several consumers, in how the
contributions were summed). That consumer is the op to name, with its inputs, the incoming
gradient, and the expected and actual gradient it produced.
"""

from __future__ import annotations

from grader.compare import Mismatch, close
from grader.quantity import Quantity
from grader.runner import Failure, Run
from grader.trace import FORMATS, NodeRef, Step

SEED_HINT = "backward() must seed the output's gradient with 1 (ones for a tensor)"
ACCUMULATE_HINT = "each rule must add its contribution (`+=`); assigning with `=` keeps only the last one"


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
        return [j for j, s in enumerate(self.steps) if any(isinstance(r, NodeRef) and r.index == i for r in s.inputs)]

    def differs(self, i: int, key: str) -> bool:
        if not self.actual:
            return False
        e, a = self.expected[i][key], self.actual[i][key]
        if e is None:
            return False
        return a is None or close(e, a) is not None


def _q(x: Quantity | None) -> str:
    return "nothing" if x is None else x.describe()


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
    if failure.type == "RecursionError":
        text += "\n  a deep graph needs an iterative (loop and stack) topological sort, not recursion"
    return text


def explain_forward(tape: Tape) -> str | None:
    for i in range(len(tape.steps)):
        if tape.differs(i, "value"):
            inputs = _inputs(tape, i)
            return (
                f"wrong value from {tape.steps[i].op}: {tape.expression(i)}\n"
                f"  inputs: {inputs}\n"
                f"  {tape.name(i)}: expected {_q(tape.expected[i]['value'])}, got {_q(tape.actual[i]['value'])}"
                f"{_shape_note(tape.expected[i]['value'], tape.actual[i]['value'])}"
            )
    return None


def _inputs(tape: Tape, i: int) -> str:
    parts = []
    for ref in tape.steps[i].inputs:
        if isinstance(ref, NodeRef):
            parts.append(f"{tape.name(ref.index)} = {_q(tape.expected[ref.index]['value'])}")
        else:
            parts.append(repr(ref))
    return ", ".join(parts) or "none"


def explain_gradient(tape: Tape) -> str | None:
    for i in reversed(range(len(tape.steps))):
        if not tape.differs(i, "grad"):
            continue
        e, a = tape.expected[i]["grad"], tape.actual[i]["grad"]
        got = f"  {tape.name(i)}.grad: expected {_q(e)}, got {_q(a)}{_shape_note(e, a)}"
        users = tape.consumers(i)
        if not users:
            if i in tape.outputs:
                return f"wrong gradient at the output {tape.name(i)}\n{got}\n  {SEED_HINT}"
            return f"wrong gradient of {tape.name(i)}\n{got}"
        if len(users) == 1:
            j = users[0]
            step = tape.steps[j]
            return (
                f"wrong gradient from {step.op}: {tape.expression(j)}\n"
                f"  inputs: {_inputs(tape, j)}; incoming gradient {tape.name(j)}.grad = "
                f"{_q(tape.expected[j]['grad'])}\n{got}\n"
                f"  where: {_path(tape, j)}"
            )
        ops = ", ".join(f"{tape.steps[j].op} ({tape.expression(j)})" for j in users)
        return (
            f"wrong gradient of {tape.name(i)}, which feeds {len(users)} operations: {ops}\n"
            f"{got}\n  its gradient is the sum of their contributions; {ACCUMULATE_HINT}"
        )
    return None


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
        lines.append(f"  {m.name}: expected {_q(m.expected)}, got {_q(m.actual)}{_shape_note(m.expected, m.actual)}")
    if len(mismatches) > 6:
        lines.append(f"  ... and {len(mismatches) - 6} more")
    return "\n".join(lines)


def diagnose(expected: Run, actual: Run, mismatches: list[Mismatch]) -> str:
    """The message for a failed case: the op to fix first, then the results that differ."""
    if actual.failure is not None:
        return explain_failure(actual.failure)
    tape = Tape(expected, actual)
    values = [m for m in mismatches if not m.is_grad]
    head = explain_forward(tape) if values else None
    if head is None:
        head = explain_gradient(tape)
    listing = explain_results(mismatches)
    if head is None:
        return "results differ from PyTorch:\n" + listing
    return f"{head}\nresults that differ:\n{listing}"
