"""The slips needle students make: each with what gives it away and one line naming it.

As micrograd's (`grader/assignments/micrograd/slips.py`): after the diagnosis has found the
place, the first slip whose detector recognises the case puts its line under the message's
first line. A detector reads only what the verdict has (`grader.verdict.diagnose.Evidence`).
"""

from __future__ import annotations

from typing import Any

from grader.assignments import Slip
from grader.assignments.needle import hints


def recursion(evidence: Any) -> dict[str, str] | None:
    failure = evidence.failure
    return {} if failure is not None and failure.type == "RecursionError" else None


SLIPS = (Slip("recursive-sort", hints.RECURSION, recursion),)
