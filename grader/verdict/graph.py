"""What a failed case's expression looked like, as plain data for a report to carry.

Both engines ran the same case, so the oracle's tape is the expression the student's code
built, node for node (`diagnose.Tape`). For a case whose numbers are wrong this module
keeps, for the report, the part of that expression around the wrong node: each node's name,
op and inputs, PyTorch's value and gradient and the submission's where they differ, and
which node is wrong (the first wrong value, else the wrong gradient nearest the output,
the same node the diagnostic names). A feedback page draws it (`report.draw.draw_graph`)
with that node highlighted. Only plain strings and numbers go in: a report outlives the
grading run, and renderers never see a submission's objects.

`case_ops` serves the class dashboard: which rules a case exercises (from the oracle's tape,
so the same for every student); the rule a failure is laid at comes with the diagnosis
(`diagnose.Diagnosis.blame`), so the dashboard and the student's message agree and an
instructor sees which gradient rules the class gets wrong.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from grader.case.run import Run
from grader.case.trace import NodeRef
from grader.verdict.diagnose import Diagnosis, Tape, hints_for, op_name, rule

#: nodes of one graph kept for a picture: the ones nearest the wrong node
MAX_NODES = 12
#: tapes longer than this get no picture (a 10^6-op chain): indexing them costs more than it shows
MAX_TAPE = 20_000
NOT_OPS = ("leaf", "parameter", "grad")


def case_ops(expected: Run, assignment: str) -> list[str]:
    """The rules a case exercises, by the oracle's tape (`mul`, `EWiseDiv`, ...)."""
    if expected.ops is not None:  # worked out once, when the oracle ran the case
        return list(expected.ops)
    tape = Tape(expected, expected, hints_for(assignment))
    first: dict[tuple, int] = {}  # one step per kind: a name depends on the op and its arity
    for i, step in enumerate(tape.steps):
        if step.op not in NOT_OPS:
            nodes = sum(isinstance(r, NodeRef) for r in step.inputs)
            first.setdefault((step.op, nodes >= 2 or len(step.inputs) == 1), i)
    return sorted({rule(op_name(tape, i)) for i in first.values()})


def _consumers(tape: Tape) -> dict[int, list[int]]:
    users: dict[int, list[int]] = {}
    for j, step in enumerate(tape.steps):
        for ref in step.inputs:
            if isinstance(ref, NodeRef) and j not in users.setdefault(ref.index, [])[-1:]:
                users[ref.index].append(j)
    return users


def wrong_node(tape: Tape, diagnosis: Diagnosis | None = None) -> int | None:
    """The node the diagnostic is about (`diagnosis.wrong`, when its final numbers differ),
    else the first wrong value in tape order, else the wrong gradient nearest the output
    (whose consumers' gradients are all right)."""
    named = diagnosis.wrong if diagnosis is not None else None
    if named is not None and 0 <= named < len(tape.steps):
        if tape.differs(named, "value") or tape.differs(named, "grad"):
            return named
    for i in range(len(tape.steps)):
        if tape.differs(i, "value"):
            return i
    for i in reversed(range(len(tape.steps))):
        if tape.differs(i, "grad"):
            return i
    return None


def _near(start: int, tape: Tape, users: dict[int, list[int]], limit: int) -> list[int]:
    """Up to `limit` nodes, breadth first from `start` along inputs and consumers alike."""
    seen = {start}
    queue = deque([start])
    while queue and len(seen) < limit:
        i = queue.popleft()
        inputs = [r.index for r in tape.steps[i].inputs if isinstance(r, NodeRef)]
        for j in inputs + users.get(i, []):
            if j not in seen and len(seen) < limit:
                seen.add(j)
                queue.append(j)
    return sorted(seen)


def _text(quantity: Any) -> str:
    """A quantity in a few words for a picture: a number, or a shape and its first numbers."""
    if quantity is None:
        return "none"
    if quantity.shape == ():
        return f"{quantity.data[0]:.6g}"
    head = ", ".join(f"{x:.4g}" for x in quantity.data[:3])
    return f"shape {quantity.shape} [{head}{', ...' if len(quantity.data) > 3 else ''}]"


def case_graph(
    expected: Run, actual: Run, assignment: str, diagnosis: Diagnosis | None = None, limit: int = MAX_NODES
) -> dict | None:
    """The graph around the node `diagnosis` names, for a case whose numbers differ; None
    when the tapes do not line up (the submission raised, or its tape is another shape) or
    nothing differs."""
    if not expected.steps or len(expected.steps) > MAX_TAPE or len(actual.tape) != len(expected.tape):
        return None
    tape = Tape(expected, actual, hints_for(assignment))
    wrong = wrong_node(tape, diagnosis)
    if wrong is None:
        return None
    users = _consumers(tape)
    kept = _near(wrong, tape, users, limit)
    inside = set(kept)
    nodes = []
    for i in kept:
        step = tape.steps[i]
        refs = [r for r in step.inputs if isinstance(r, NodeRef)]
        node: dict[str, Any] = {
            "id": i,
            "name": tape.name(i),
            "op": "" if step.op in ("leaf", "parameter") else op_name(tape, i),
            "inputs": [r.index for r in refs if r.index in inside],
            "constants": [repr(c) for c in step.inputs if not isinstance(c, NodeRef)],
            "not_drawn": sum(r.index not in inside for r in refs),
            "value": _text(tape.expected[i]["value"]),
            "grad": _text(tape.expected[i]["grad"]),
        }
        for key in ("value", "grad"):
            if tape.differs(i, key):
                node[f"got_{key}"] = _text(tape.actual[i][key])
        nodes.append(node)
    return {"nodes": nodes, "wrong": wrong, "total": len(tape.steps)}
