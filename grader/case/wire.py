"""The worker's end of the wire: what a worker sends the grader, framed.

Each message is a 4-byte big-endian length and that many bytes of JSON. The worker only
encodes; the grader's side (`grader.sandbox.protocol`) reads with a size cap and parses
strictly, because everything here is produced next to student code.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from grader.case.quantity import Quantity
from grader.case.run import Run

HEADER = struct.Struct(">I")
#: a message larger than this is malformed (a big needle case's tape fits many times over)
MAX_MESSAGE = 8 << 20
MAX_TEXT = 4000
#: "not graded: needs tanh": how many op names a run may report missing, and how long each
MAX_MISSING, MAX_NAME = 32, 40
#: notes on loading the submission, per message: how many, how long each
MAX_NOTES, MAX_NOTE = 8, 600
#: what each node of a tape carries (see `Backend.read`)
TAPE_KEYS = (
    "value",
    "grad",
    "rule",
    "rule_fixed",
    "parts",
    "passes",
    "requires_grad",
    "differentiable",
    "carries_over",
    "grad_is_node",
    "rules_get_node_grad",
    "listed_by_sort",
    "pairs_in_order",
    "processed_once",
    "walk",
)
#: the grader's byte, after a `run`, for "send this case's tape" (any other byte: go on)
ASK_TAPE = b"t"


def encode(obj: dict[str, Any]) -> bytes:
    """One framed message."""
    payload = json.dumps(obj, separators=(",", ":")).encode()
    return HEADER.pack(len(payload)) + payload


def _q(q: Quantity | None) -> dict[str, Any] | None:
    return None if q is None else q.to_plain()


def _tape(tape: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: _q(e.get(key)) for key in TAPE_KEYS} for e in tape]


def run_to_wire(case_id: str, run: Run, tape: bool | None = True) -> dict[str, Any]:
    """A Run as plain data: only what the verdict needs (no steps: the oracle has those).
    `tape=None`: the tape is held back until the grader asks (`ASK_TAPE`)."""
    return {
        "kind": "run",
        "id": case_id,
        "results": {name: _q(q) for name, q in run.results.items()},
        "tape": _tape(run.tape) if tape else None,
        "failure": run.failure.to_plain() if run.failure else None,
        "output": run.output[:MAX_TEXT],
        "missing": [name[:MAX_NAME] for name in run.missing[:MAX_MISSING]],
        "notes": [note[:MAX_NOTE] for note in run.notes[:MAX_NOTES]],
    }


def tape_to_wire(case_id: str, tape: list[dict[str, Any]]) -> dict[str, Any]:
    """The answer to ASK_TAPE: the tape of the case that just ran."""
    return {"kind": "tape", "id": case_id, "tape": _tape(tape)}
