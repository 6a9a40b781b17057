"""How long a case may run: one policy, wherever the cases run.

The sandbox's grader, its worker, a student's own pytest, a notebook's test cells and the
mutant checks all ask this module how long a case may take, and all say the same when it did
not end. The mechanisms that end a case (a CPU budget, a wall-clock limit, the stack dump
that says where it was stuck) are in `grader.case.hang`; this module decides the figures.

- **A timeout per case**: TIMEOUT seconds, or SLOWER times as long as PyTorch took for it
  (the yardstick: a 10**5-node graph takes a while on any engine), whichever is longer.
- **The probe.** A backward() that never returns would cost a full timeout on every case
  that calls it. So before the cases of an assignment, backward() runs on the tiniest graph
  with a node used twice (`a * 3 + a`) with PROBE_CPU seconds of CPU. A correct engine,
  however slow, returns in microseconds. One that does not gets, on each case, a CPU budget
  of SUSPECT_CPU (more where the yardstick is longer, at most SUSPECT_MAX): it fails each
  case in a hundredth of a second, saying where, and a case that never calls backward()
  still passes.
- **The cut-off.** Once cases have hung REPEATS times in one function, each later case
  gets at most SHORT_TIMEOUT: a backward() that hangs only on some graphs costs about a
  second per case, not a timeout.
"""

from __future__ import annotations

import contextlib
import gc
from collections import Counter
from typing import Any

from grader.case import hang
from grader.case.loading import running
from grader.case.run import Bounded

#: seconds a case may run (and the submission's import may take), unless its yardstick is longer
TIMEOUT = 10.0
#: a case may take this many times as long as the oracle took for it (a 10**5-node graph)
SLOWER = 3.0
#: cases hung in one function before later cases get SHORT_TIMEOUT
REPEATS = 2
#: seconds a case gets at most once REPEATS cases hung in one function
SHORT_TIMEOUT = 1.0
#: CPU seconds the probe's backward() may take (a correct engine takes microseconds)
PROBE_CPU = 0.1
#: wall seconds the sandbox's grader waits for the probe's answer (CPU time is what ends a
#: probe; this is for code that swallows the exception or loops outside Python)
PROBE_WAIT = 10.0
#: CPU seconds a case gets, at least, once backward() hung on the probe; a case whose
#: yardstick is longer gets that
SUSPECT_CPU = 0.01
#: ... and at most this: cases of 10**4 ops and more may then time out on an engine that
#: hung on the probe even where its backward() would get through their graphs (the reference
#: takes about half a second on the largest, 10**5 ops): the price of a quick verdict
SUSPECT_MAX = 0.25
#: a case that ran out of its short CPU budget, once backward() hung on the probe
OUT_OF_BUDGET = (
    "timed out after {budget:.2g} s of CPU{where} (backward() did not return on the grader's tiny probe "
    "graph either, `a * 3 + a`, so each case had a short budget)"
)

Location = tuple[str, int, str]  # (file, line, function) where a case was stuck


def suspect_cpu(yardstick: float) -> float:
    """A case's CPU budget once its assignment's backward() hung on the probe: SUSPECT_CPU,
    more where `yardstick` is longer, but at most SUSPECT_MAX (PyTorch's times are wall
    times, which a busy machine stretches)."""
    return min(SUSPECT_MAX, max(SUSPECT_CPU, yardstick))


def settle_garbage() -> None:
    """Before a case with a CPU budget: collect what is due now (the graph a deep case left),
    so that the next case is not charged for freeing it."""
    if any(count >= limit for count, limit in zip(gc.get_count(), gc.get_threshold(), strict=False)):
        gc.collect()


def probe(assignment: Any, modules: Any, seconds: float, wall: float | None = None) -> bool:
    """Did backward() fail to return, within `seconds` of CPU (and `wall` seconds, in process),
    on the smallest graph with a node used twice? Any other outcome (it returned, it raised)
    is not a hang."""
    lib = assignment.engine(modules, trace=False)
    with contextlib.redirect_stdout(Bounded()), contextlib.redirect_stderr(Bounded()), running(modules):
        try:
            with hang.cpu_budget(seconds, wall=wall):
                lib.probe_backward()
        except (hang.CaseTimedOut, hang.WallTimeout):
            return True
        except Exception:
            return False
    return False


class TimePolicy:
    """The time limits of one submission's cases, as they run: what the probe found for each
    assignment, and where cases hung so far."""

    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout
        #: assignment -> whether its backward() hung on the probe (absent: not probed yet)
        self.hung: dict[str, bool] = {}
        #: (file, function) -> how many cases hung there
        self.hangs: Counter[tuple[str, str]] = Counter()

    def probing(self, assignment: str) -> float:
        """The probe's CPU budget if `assignment` is still to be probed, else 0."""
        return PROBE_CPU if assignment not in self.hung else 0.0

    def cpu(self, assignment: str, yardstick: float = 0.0) -> float | None:
        """A case's CPU budget: None, unless its assignment's backward() hung on the probe."""
        return suspect_cpu(yardstick) if self.hung.get(assignment) else None

    def seconds(self, assignment: str, yardstick: float = 0.0, given: float | None = None) -> float:
        """A case's wall-clock limit: `given`, else TIMEOUT or its yardstick, whichever is
        longer; once the probe hung, a backstop behind the CPU budget; once cases hung
        REPEATS times in one function, at most SHORT_TIMEOUT."""
        seconds = given if given is not None else max(self.timeout, yardstick)
        budget = self.cpu(assignment, yardstick)
        if budget is not None:
            return min(seconds, max(SHORT_TIMEOUT, 20 * budget))
        return min(seconds, SHORT_TIMEOUT) if self.repeated() else seconds

    def repeated(self) -> tuple[str, str] | None:
        """The (file, function) where cases hung REPEATS times, if any."""
        place, count = max(self.hangs.items(), key=lambda item: item[1], default=(None, 0))
        return place if count >= REPEATS else None

    def timed_out(self, seconds: float, location: Location | None) -> str:
        """A case that ran out of its `seconds` of wall time, stuck at `location`: its
        message, and the hang counted."""
        was_repeated = self.repeated()
        message = f"timed out after {seconds:.3g} s{hang.describe(location)}"
        if location is not None:
            self.hangs[location[0], location[2]] += 1
        if was_repeated and seconds <= SHORT_TIMEOUT:
            message += f" (cut to {SHORT_TIMEOUT:g} s once {REPEATS} cases had hung in {was_repeated[1]})"
        return message

    def out_of_budget(self, budget: float, location: Location | None) -> str:
        """A case that ran out of its short CPU budget: its message, and the hang counted."""
        if location is not None:
            self.hangs[location[0], location[2]] += 1
        return OUT_OF_BUDGET.format(budget=budget, where=hang.describe(location))
