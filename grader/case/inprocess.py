"""The in-process engine: a submission's cases run in this process, within the time limits of
`grader.case.limits`.

Where no sandbox stands outside: a student's own pytest (`grader.plugin`), a notebook's test
cells (`grader.notebook`), `grade --in-process` and the mutant checks. It runs a case as the
sandbox's worker does: the probe before the first case, each case within its time limit
(its short CPU budget once the probe hung), what the case printed captured, and the tape,
which only a diagnosis reads, left unread until the caller asks for it: a case whose results
are right never runs the code that reading the tape runs (each op's gradient rule, probed
alone), so a rule that never returns fails only the cases that call it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from grader import assignments
from grader.case import hang
from grader.case.define import Case
from grader.case.limits import (
    PROBE_CPU,
    SHORT_TIMEOUT,
    TIMEOUT,
    TimePolicy,
    case_garbage,
    keep_heap,
    probe,
    settle_garbage,
)
from grader.case.loading import SubmissionError, running
from grader.case.run import Bounded, Run, describe_exception, exit_failure, exit_fault, run_case


class InProcessEngine:
    """Runs the cases of one assignment on its modules (a submission's package, or a
    notebook's namespace standing for it), in this process."""

    def __init__(
        self,
        assignment: str,
        modules: Mapping[str, Any],
        roots: list[Path],
        policy: TimePolicy | None = None,
        ends_after_run: bool = False,
    ) -> None:
        self.assignment = assignments.get(assignment)
        self.modules = modules
        #: the directories of the submission's own code: a failure names its innermost frame there
        self.roots = roots
        #: how long each case may run; shared by the engines of one submission
        self.policy = policy or TimePolicy()
        #: the process ends after its suite (a student's pytest): a deep case's graph is left
        #: frozen in memory, as the sandbox's worker leaves it (`limits.keep_garbage`), where
        #: a process that goes on (a notebook's kernel, the mutant checks) collects it
        self.ends_after_run = ends_after_run

    @classmethod
    def load(
        cls, directory: Path, assignment: str, policy: TimePolicy | None = None, ends_after_run: bool = False
    ) -> InProcessEngine:
        """The engine of a submission's directory (`SubmissionError` if its package does not import)."""
        modules = assignments.get(assignment).load(directory)
        return cls(assignment, modules, [Path(directory).resolve()], policy, ends_after_run)

    @property
    def name(self) -> str:
        return self.assignment.name

    @property
    def hung(self) -> bool:
        """backward() did not return on the probe's tiny graph."""
        return self.policy.hung.get(self.name, False)

    @property
    def notes(self) -> list[str]:
        """What loading noted: stand-ins for absent modules, a failed `__init__.py`."""
        return list(getattr(self.modules, "notes", []))

    def probe(self) -> bool:
        """Run the probe, unless this assignment was probed already: did backward() hang?"""
        seconds = self.policy.probing(self.name)
        if seconds:
            self.policy.probed(self.name, probe(self.assignment, self.modules, seconds, wall=SHORT_TIMEOUT))
        return self.hung

    def run(
        self,
        case: Case,
        yardstick: float = 0.0,
        *,
        needs: Iterable[str] = (),
        seconds: float | None = None,
        tape: bool | Callable[[Run], bool] = False,
    ) -> Run:
        """Run `case` within its time limit: `seconds` if given, else the policy's for its
        `yardstick` (how long it may take at least: SLOWER times PyTorch's time) and the ops
        it `needs` (PyTorch's run says which: a short budget if one's rule hung on the probe).
        `tape`: read the tape after the case (or a function of the run that says whether to)."""
        self.probe()
        with case_garbage(not case.trace, self.ends_after_run):
            return self._run(case, yardstick, list(needs), seconds, tape)

    def _run(
        self,
        case: Case,
        yardstick: float,
        needs: list[str],
        seconds: float | None,
        tape: bool | Callable[[Run], bool],
    ) -> Run:
        """`run`, holding the case's backend (and so its graph) until it returns."""
        budget = self.policy.cpu(self.name, yardstick, needs)
        wall = self.policy.seconds(self.name, yardstick, seconds, needs)
        limit = hang.cpu_budget(budget, wall=wall) if budget else hang.wall_limit(wall)
        if budget:
            settle_garbage()  # as the worker does: not charged for freeing an earlier case's graph
        buffer = Bounded()
        lib = None
        quiet = contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer)
        with quiet[0], quiet[1], running(self.modules):
            started = time.perf_counter()
            try:
                with limit:
                    lib = self.assignment.engine(self.modules, trace=case.trace)
                    run = run_case(case, lib, self.roots, tape=False, given=self.assignment.given)
            except hang.CaseTimedOut as exc:
                where = self._where(exc)
                fault = self.policy.out_of_budget(budget or 0.0, where, self.name, needs)
                run = Run(fault=fault, stuck_in=where[2] if where else "")
            except hang.WallTimeout as exc:
                where = self._where(exc)
                fault = self.policy.timed_out(wall, where, count=budget is None)
                run = Run(fault=fault, stuck_in=where[2] if where else "")
            except SystemExit as exc:  # the case's fault, and the run goes on, as in the sandbox
                run = Run(fault=exit_fault(exit_failure(exc, self.roots)))
            run.seconds = time.perf_counter() - started
        run.output = buffer.getvalue()
        ran = lib is not None and run.fault is None and not run.missing  # (a raised case: up to there)
        if ran and (tape(run) if callable(tape) else tape):
            run.tape = self.read_tape(lib, wall, values=run.failure is not None)
        return run

    def read_tape(self, lib: Any, seconds: float, values: bool = False) -> list[dict[str, Any]]:
        """The tape of the case `lib` just ran, read as the sandbox's worker reads it: its reading
        may run the submission's code (each rule probed alone), so it prints nowhere and gets
        the case's time limit, each rule PROBE_CPU of it; a tape that cannot be read is empty
        (the diagnosis says less). `values`: the nodes' values alone (a case that raised)."""
        lib.probe_cpu = PROBE_CPU
        quiet = contextlib.redirect_stdout(Bounded()), contextlib.redirect_stderr(Bounded())
        with quiet[0], quiet[1], running(self.modules):
            try:
                with hang.wall_limit(seconds):
                    return lib.read_values() if values else lib.read_tape()
            except (Exception, hang.WallTimeout, SystemExit):
                return []

    def _where(self, exc: BaseException) -> tuple[str, int, str] | None:
        return describe_exception(exc, self.roots, self.assignment.given).where


class Submission:
    """The in-process engines of one submission's directory: one per assignment, loaded when
    first asked for, sharing one time policy (as the sandbox's workers of one submission do)."""

    def __init__(
        self,
        directory: Path,
        refused: str | None = None,
        ends_after_run: bool = False,
        timeout: float = TIMEOUT,
    ) -> None:
        self.directory = Path(directory)
        #: why the submission cannot be read at all (a hostile zip): every engine is this error
        self.refused = refused
        self.ends_after_run = ends_after_run
        if ends_after_run:
            keep_heap()
        self.policy = TimePolicy(timeout)
        self.engines: dict[str, InProcessEngine | SubmissionError] = {}

    def engine(self, assignment: str) -> InProcessEngine | SubmissionError:
        """The assignment's engine, or why its package does not import. The import gets a
        case's time limit, as in the sandbox's worker: one that never ends (a loop at a
        module's top) fails every case of the assignment once, saying where it was stuck,
        instead of each case waiting on it anew."""
        if assignment not in self.engines:
            seconds = self.policy.seconds(assignment)
            try:
                if self.refused:
                    raise SubmissionError(self.refused)
                with hang.wall_limit(seconds):
                    self.engines[assignment] = InProcessEngine.load(
                        self.directory, assignment, self.policy, self.ends_after_run
                    )
            except SubmissionError as exc:
                self.engines[assignment] = exc
            except (hang.WallTimeout, SystemExit) as exc:
                self.engines[assignment] = SubmissionError(
                    f"importing {assignment} failed: {self._stopped(exc, seconds, assignment)}"
                )
        return self.engines[assignment]

    def _stopped(self, exc: hang.WallTimeout | SystemExit, seconds: float, assignment: str) -> str:
        """Why an import that did not end did not: it exited, or ran out of time."""
        roots = [self.directory.resolve()]
        if isinstance(exc, SystemExit):
            return exit_fault(exit_failure(exc, roots), during="")
        where = describe_exception(exc, roots, assignments.given(assignment)).where
        return self.policy.timed_out(seconds, where, count=False)

    @property
    def notes(self) -> list[str]:
        """What loading noted, over every assignment loaded so far."""
        found = [e.notes for e in self.engines.values() if not isinstance(e, SubmissionError)]
        return [note for notes in found for note in notes]
