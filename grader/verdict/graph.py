"""What a failed case's expression looked like, as plain data for a report to carry.

Both engines ran the same case, so the oracle's tape is the expression the student's code
built, node for node (`diagnose.Tape`). For a case whose numbers are wrong this module
keeps, for the report, the part of that expression around the wrong node: each node's name,
op and inputs, PyTorch's value and gradient and the submission's where they differ, and
which node is wrong (the first wrong value, else the wrong gradient nearest the output,
the same node the diagnostic names). A feedback page draws it (`report.draw.draw_graph`)
with that node highlighted. Only plain strings and numbers go in: a report outlives the
grading run, and renderers never see a submission's objects.

`ops` and `blame` serve the class dashboard: which rules a case exercises (from the oracle's
tape, so the same for every student) and which rule (or function) a failure is laid at,
read off the diagnostic's first line so that the dashboard and the student's message agree;
an instructor sees which gradient rules the class gets wrong.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from grader.case.run import Run
from grader.case.trace import NodeRef
from grader.verdict.diagnose import Tape, hints_for, op_name

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


def wrong_node(tape: Tape) -> int | None:
    """The node the diagnostic is about: the first wrong value in tape order, else the
    wrong gradient nearest the output (whose consumers' gradients are all right)."""
    for i in range(len(tape.steps)):
        if tape.differs(i, "value"):
            return i
    for i in reversed(range(len(tape.steps))):
        if tape.differs(i, "grad"):
            return i
    return None


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


#: a diagnostic's first line, and what it lays the failure at
BLAME = (
    (re.compile(r"^wrong (?:gradient|value) from several rules"), None),
    (re.compile(r"^wrong gradient of .* from backward\(\)"), "backward"),
    (re.compile(r"^wrong gradient at the output"), "backward"),
    (re.compile(r"^wrong (?:gradient|value) from (.+?):"), 1),
    (re.compile(r"^not implemented yet: (\S+)"), 1),
)


def blame(message: str) -> str:
    """What a diagnostic lays a failure at, in the dashboard's words: an op's rule (needle's
    class, micrograd's op or function), "backward", a function not written yet; "" when it
    names no one thing. Read off the message, so the dashboard and the student agree."""
    first = message.splitlines()[0] if message else ""
    for pattern, group in BLAME:
        found = pattern.match(first)
        if found:
            return "" if group is None else rule(group if isinstance(group, str) else found.group(group))
    return ""


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
    expected: Run, actual: Run, assignment: str, message: str = "", limit: int = MAX_NODES
) -> tuple[dict | None, str]:
    """(graph, blame) for a case whose numbers differ: the graph is None when the tapes do
    not line up (the submission raised, or its tape is another shape) or nothing differs."""
    blamed = blame(message)
    if not expected.steps or len(expected.steps) > MAX_TAPE or len(actual.tape) != len(expected.tape):
        return None, blamed
    tape = Tape(expected, actual, hints_for(assignment))
    wrong = wrong_node(tape)
    if wrong is None:
        return None, blamed
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
    graph = {"nodes": nodes, "wrong": wrong, "total": len(tape.steps)}
    return graph, blamed
