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
- **Each rule too.** With the probe, each op's gradient rule runs alone on a tiny input,
  with PROBE_CPU seconds of CPU each (and backward() through the tiniest MLP, whose neurons
  apply rules the cases do not name). A case that uses an op whose rule did not return gets
  the short CPU budget: a rule that never returns fails the cases that call it in a moment,
  and the others, which never run it, keep their verdicts and their full time. The
  diagnosis of a wrong case runs rules alone too, on the case's own nodes: each of those
  gets PROBE_CPU as well, so a rule that never returns there costs that once, not the case's
  time limit (`Backend.probed_alone`).
- **The cut-off.** Once cases have hung REPEATS times in one function, each later case
  gets at most SHORT_TIMEOUT: a backward() that hangs only on some graphs costs about a
  second per case, not a timeout.
"""

from __future__ import annotations

import contextlib
import gc
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from grader.case import hang
from grader.case.loading import running
from grader.case.run import Bounded
from grader.case.wire import MAX_MESSAGE

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

#: a case that ran out of its short CPU budget, as it uses an op whose rule hung on the probe
RULE_OUT_OF_BUDGET = (
    "timed out after {budget:.2g} s of CPU{where} (backward() through {ops} did not return on the "
    "grader's tiny probe either, so each case that uses it had a short budget)"
)

Location = tuple[str, int, str]  # (file, line, function) where a case was stuck


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Times in seconds, sizes in MiB. The sandbox enforces
    them all; in process, only the timeout applies."""

    timeout: float = TIMEOUT  # per case, and for importing the submission
    budget: float = 600.0  # for the whole submission, every case of every suite
    memory: int = 2048  # address space of a worker
    file_size: int = 16  # largest file a worker may write
    message: int = MAX_MESSAGE  # bytes, largest message from a worker


def suspect_cpu(yardstick: float) -> float:
    """A case's CPU budget once its assignment's backward() hung on the probe: SUSPECT_CPU,
    more where `yardstick` is longer, but at most SUSPECT_MAX."""
    return min(SUSPECT_MAX, max(SUSPECT_CPU, yardstick))


def settle_garbage() -> None:
    """Before a case with a CPU budget: collect what is due now (the graph a deep case left),
    so that the next case is not charged for freeing it.

    Only the generations that are due, as Python's own collection would pick them: the full
    collection walks every object of a long-lived process (a kernel holding PyTorch, a test
    run's answers), a tenth of a second and more each time. It is made, too, where the young
    generations' collection would bring the oldest to its threshold, so that no full
    collection falls due during the case."""
    counts, limits = gc.get_count(), gc.get_threshold()
    due = [g for g, (count, limit) in enumerate(zip(counts, limits, strict=False)) if count >= limit]
    if due:
        gc.collect(2 if max(due) == 2 or counts[2] + 1 >= limits[2] else max(due))


def keep_garbage() -> None:
    """After a case that built a huge graph (a deep chain: its tape is off): never scan it.

    Every micrograd Value is a reference cycle, so only the cyclic collector frees a graph,
    and collecting a 10**5-op chain costs more than building it took. A process that ends
    after its suite (the sandbox's worker, a student's pytest) leaves the graph in memory
    instead, frozen: the collector skips it; its memory was needed during the case anyway,
    and a suite has only a few such cases. The collector was off during the case (a case that
    pauses it would otherwise collect as it resumes it); it is on again now."""
    gc.freeze()
    gc.enable()


def keep_heap() -> None:
    """In a process that ends after its suite (a student's pytest), before its first case:
    freeze what is in memory (the interpreter's, pytest's and NumPy's objects, the collected
    tests), so that the full collections a case's garbage brings about no longer walk it,
    at some 10 ms each. Only garbage already there is kept, and the process ends soon."""
    gc.freeze()


#: the collector's first threshold while a case runs (Python's is 700 allocations). A case's
#: graph is young garbage in reference cycles (every micrograd Value is one): at 700 the
#: collector scans it, and all it promoted, dozens of times while a 5000-op chain is built, a
#: third of that case's time. At this threshold it waits for ten thousand new objects, a few MB.
CASE_GC_THRESHOLD = 10_000


@contextlib.contextmanager
def case_garbage(deep: bool, ends_after_run: bool = True) -> Iterator[None]:
    """Around a case and its tape's reading, wherever cases run: the collector scans a case's
    young garbage in batches of CASE_GC_THRESHOLD objects. A deep case (its tape off) runs with
    the collector off, so its graph is never scanned, not even as the case ends. The graph is
    then left frozen (`keep_garbage`) where the process ends after its suite, or collected at
    once where it goes on (a notebook's kernel, the mutant checks): never inside a later
    case's time limit."""
    if not deep:
        threshold = gc.get_threshold()
        gc.set_threshold(CASE_GC_THRESHOLD, *threshold[1:])
        try:
            yield
        finally:
            gc.set_threshold(*threshold)
        return
    gc.disable()
    try:
        yield
    finally:
        if ends_after_run:
            keep_garbage()
        else:
            gc.enable()
            # the graph is young garbage (no collection ran while it was built): collecting
            # the young generations frees it without walking the rest of a long-lived heap
            gc.collect(1)


def probe(assignment: Any, modules: Any, seconds: float, wall: float | None = None) -> tuple[bool, list[str]]:
    """Did backward() fail to return, within `seconds` of CPU (and `wall` seconds, in process),
    on the smallest graph with a node used twice? And the ops whose rules, each run alone on
    a tiny input, did not return either."""
    lib = assignment.engine(modules, trace=False)
    with contextlib.redirect_stdout(Bounded()), contextlib.redirect_stderr(Bounded()), running(modules):
        hung = _hangs(lib.probe_backward, seconds, wall)
        rules = [op for op, rule in lib.rule_probes().items() if _hangs(rule, seconds, wall)]
    return hung, rules


def _hangs(call: Callable[[], object], seconds: float, wall: float | None) -> bool:
    """Did `call()` not return within its budget? Any other outcome (it returned, it raised)
    is not a hang: a correct engine, however slow, takes microseconds, but a collection
    of the garbage earlier cases left could take longer than the budget: it is made first."""
    settle_garbage()
    try:
        with hang.cpu_budget(seconds, wall=wall):
            call()
    except (hang.CaseTimedOut, hang.WallTimeout):
        return True
    except KeyboardInterrupt:  # a person's Ctrl-C (the sandbox's worker catches a rule's own)
        raise
    except BaseException:  # sys.exit() in a rule, or anything else it raises: its cases say so
        return False
    return False


class TimePolicy:
    """The time limits of one submission's cases, as they run: what the probe found for each
    assignment, and where cases hung so far."""

    def __init__(self, timeout: float = TIMEOUT) -> None:
        self.timeout = timeout
        #: assignment -> whether its backward() hung on the probe (absent: not probed yet)
        self.hung: dict[str, bool] = {}
        #: assignment -> the ops whose rules hung on the probe
        self.rules: dict[str, set[str]] = {}
        #: (file, function) -> how many cases hung there
        self.hangs: Counter[tuple[str, str]] = Counter()

    def probed(self, assignment: str, found: tuple[bool, Iterable[str]]) -> None:
        """What the probe found: whether backward() hung, and the ops whose rules did."""
        self.hung[assignment], rules = found
        self.rules[assignment] = set(rules)

    def suspects(self, assignment: str, needs: Iterable[str] = ()) -> list[str]:
        """The ops a case needs whose rules hung on the probe."""
        return sorted(self.rules.get(assignment, set()).intersection(needs))

    def probing(self, assignment: str) -> float:
        """The probe's CPU budget if `assignment` is still to be probed, else 0."""
        return PROBE_CPU if assignment not in self.hung else 0.0

    def cpu(self, assignment: str, yardstick: float = 0.0, needs: Iterable[str] = ()) -> float | None:
        """A case's CPU budget: None, unless its assignment's backward() hung on the probe, or
        the rule of an op it `needs` did."""
        suspect = self.hung.get(assignment) or self.suspects(assignment, needs)
        return suspect_cpu(yardstick) if suspect else None

    def seconds(
        self, assignment: str, yardstick: float = 0.0, given: float | None = None, needs: Iterable[str] = ()
    ) -> float:
        """A case's wall-clock limit: `given`, else TIMEOUT or its yardstick, whichever is
        longer; once the probe hung, a backstop behind the CPU budget; once cases hung
        REPEATS times in one function, at most SHORT_TIMEOUT."""
        seconds = given if given is not None else max(self.timeout, yardstick)
        budget = self.cpu(assignment, yardstick, needs)
        if budget is not None:
            return min(seconds, max(SHORT_TIMEOUT, 20 * budget))
        return min(seconds, SHORT_TIMEOUT) if self.repeated() else seconds

    def repeated(self) -> tuple[str, str] | None:
        """The (file, function) where cases hung REPEATS times, if any."""
        place, count = max(self.hangs.items(), key=lambda item: item[1], default=(None, 0))
        return place if count >= REPEATS else None

    def timed_out(self, seconds: float, location: Location | None, count: bool = True) -> str:
        """A case that ran out of its `seconds` of wall time, stuck at `location`: its
        message, and the hang counted (unless not to `count`: the wall-clock backstop of a
        case with a CPU budget, which the cut-off need not shorten)."""
        was_repeated = self.repeated()
        message = f"timed out after {seconds:.3g} s{hang.describe(location)}"
        if location is not None and count:
            self.hangs[location[0], location[2]] += 1
        if was_repeated and seconds <= SHORT_TIMEOUT:
            message += f" (cut to {SHORT_TIMEOUT:g} s once {REPEATS} cases had hung in {was_repeated[1]})"
        return message

    def out_of_budget(
        self, budget: float, location: Location | None, assignment: str = "", needs: Iterable[str] = ()
    ) -> str:
        """A case that ran out of its short CPU budget: its message. Not counted as a hang:
        the cut-off is for the cases that have no such budget."""
        where = hang.describe(location)
        suspects = self.suspects(assignment, needs)
        if self.hung.get(assignment) or not suspects:
            return OUT_OF_BUDGET.format(budget=budget, where=where)
        return RULE_OUT_OF_BUDGET.format(budget=budget, where=where, ops=" and ".join(suspects))
