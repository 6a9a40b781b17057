"""Grade a submission: the pipeline as a list of small steps, in the order data flows.

    collect cases -> run the oracle -> find the packages -> run the submission -> compare
    -> score -> report

`grade(submission, cases, oracle, engine) -> Report` runs them. The engine is where the
submission's code runs: `SandboxRunner` (worker processes that only return plain numbers;
the default for anything untrusted) or `InProcessRunner` (this process: trusted code, and
a student's own pytest). Either way the verdict, the oracle, the comparison and the score,
is computed here, in trusted code. Front ends (the pytest plugin, `grader grade`, class
grading, notebooks, Gradescope, GitHub Classroom) call these steps and render the report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader import assignments, intake
from grader.case.define import Case, collect
from grader.case.inprocess import Submission
from grader.case.limits import SLOWER, Limits
from grader.case.loading import SubmissionError, locate_assignment
from grader.case.quantity import Quantity
from grader.case.run import Run
from grader.report import places
from grader.report.model import DEFAULT_HIDDEN_VISIBILITY, CaseResult, Report, Status
from grader.scope import Scope, resolve, select
from grader.verdict.compare import compare, needs_tape
from grader.verdict.diagnose import diagnose, hints_for, mlp_note, slips_for
from grader.verdict.graph import case_graph, case_ops
from grader.verdict.integrity import Finding
from grader.verdict.oracle import NeedsTorch, Oracle, oracle_from

REPO = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO / "tests"
#: where the graded suites are when they are not in this checkout (an installed grader)
SUITES_ENV = "GRADER_SUITES"
#: the report's one note on isolation, by `SandboxEngine.isolation`
ISOLATION = {
    "bubblewrap": (
        "isolation: bubblewrap (workers saw only the Python runtime, numpy, their lib/ and work/ "
        "and a scratch /tmp; own PID, network, IPC and mount namespaces; no capabilities)"
    ),
    "mount namespace": (
        "isolation: mount namespace, the fallback (bubblewrap could not start here): a read-only "
        "file system with the suites, reference/ and the oracle cache covered, no network; workers "
        "could read other files of this machine and see other processes"
    ),
    "none": (
        "isolation: none (bubblewrap could not start, and the fallback needs Linux and root): "
        "workers could read and write wherever this user may, and read the suites by absolute path"
    ),
}
UNFILTERED = (
    "the sandbox ran without its seccomp filter (Linux x86-64 or AArch64 only): workers could "
    "start processes and signal others of this user"
)


# ---- engines: where the submission's code runs ----


@dataclass
class Runs:
    """What an engine brings back: one run per case, and what it saw on the way."""

    runs: list[Run]
    flags: dict[str, Finding] = field(default_factory=dict)  # assignment -> autodiff library seen
    notes: list[str] = field(default_factory=list)


class Engine(Protocol):
    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        """Run `cases` on the submission. `yardstick` gives each case the time it may take
        beyond the engine's own timeout (SLOWER times what PyTorch took)."""
        ...


@dataclass
class InProcessRunner:
    """The in-process engine (`grader.case.inprocess`): for trusted code and a student's own
    runs, within the same time limits as the sandbox's."""

    #: a case id's expected results (None: unknown), so that only a wrong case's tape is read
    expected: Callable[[str], Mapping[str, Quantity | None] | None] | None = None
    #: the ops a case uses (PyTorch's run says): a short budget if one's rule hung on the probe
    needs: Callable[[Case], Iterable[str]] | None = None
    #: of them, in process, the timeout applies: each case's, and the import's
    limits: Limits = field(default_factory=Limits)

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        engines = Submission(submission, timeout=self.limits.timeout)
        runs = []
        for case in cases:
            engine = engines.engine(case.assignment)
            if isinstance(engine, SubmissionError):
                runs.append(Run(fault=str(engine)))
            else:
                needs = self.needs(case) if self.needs is not None else ()
                runs.append(
                    engine.run(case, yardstick.get(case.id, 0.0), needs=needs, tape=self.wants_tape(case))
                )
        return Runs(runs, notes=engines.notes)

    def wants_tape(self, case: Case) -> Callable[[Run], bool]:
        """Whether a run of the case needs its tape (`compare.needs_tape`)."""
        expected = self.expected(case.id) if self.expected is not None else None
        return lambda run: needs_tape(expected, run)


@dataclass
class SandboxRunner:
    """The sandbox engine: each assignment in a confined worker process, each suite in a child of it."""

    limits: Limits = field(default_factory=Limits)
    #: directories a worker must never see (reference/, the oracle's cache, ...)
    secrets: list[Path] = field(default_factory=list)
    #: the unprivileged user workers run as (the grader must be root), or None
    user: str | None = None
    #: a case id's expected results (None: unknown), so that workers send only a wrong case's tape
    expected: Callable[[str], Mapping[str, Quantity | None] | None] | None = None
    #: how workers are isolated, when the caller has found out already (None: find out)
    isolation: str | None = None
    #: the ops a case uses (PyTorch's run says): a short budget if one's rule hung on the probe
    needs: Callable[[Case], Iterable[str]] | None = None
    #: a copy of the grader's worker modules shared by many runs (`sandbox.engine.shared_grader`)
    grader_copy: Path | None = None

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        from grader.sandbox import SandboxEngine  # Linux's: a student's own run never needs it

        timeouts = {c.id: max(self.limits.timeout, yardstick.get(c.id, 0.0)) for c in cases}
        suites = {case.suites_dir for case in cases}
        if len(suites) > 1:
            raise ValueError(f"cases from more than one suites directory: {sorted(map(str, suites))}")
        suites_dir = suites.pop() if suites else SUITES_DIR
        engine = SandboxEngine(
            submission,
            suites_dir,
            self.limits,
            hidden=self.secrets,
            user=self.user,
            expected=self.expected,
            isolation=self.isolation,
            needs=self.needs,
            grader_copy=self.grader_copy,
        )
        runs = engine.run_all(cases, timeouts, yardstick)
        notes = [ISOLATION[engine.isolation]] + ([] if engine.filtered else [UNFILTERED])
        return Runs(runs, dict(engine.flags), notes + engine.notes)


def used_by(oracle: Oracle) -> Callable[[Case], set[str]]:
    """The rules a case runs, by its run on PyTorch (the oracle must have it at hand): the
    ops it needs and those its graph exercises, an MLP's among them, if it calls backward()
    (its run has an output) or runs a rule alone (needle's `op_gradient`: a step
    `<Op>.gradient`); none if not, since only those run rules. A rule that hung on the probe
    gives the cases that run it a short CPU budget (`grader.case.limits`), and a case that
    builds an MLP without a backward() keeps its full time."""

    def used(case: Case) -> set[str]:
        try:
            expected = oracle.expected(case)
        except NeedsTorch:  # no expected run (a changed test without torch): not graded
            return set(case.needs)
        if not expected.outputs and not expected.runs_rules_alone():
            return set()
        return oracle.needs(case) | set(case_ops(expected, case.assignment))

    return used


def run_in_process(directory: Path, cases: list[Case], limits: Limits | None = None) -> list[Run]:
    return InProcessRunner(limits=limits or Limits()).run(directory, cases, {}).runs


# ---- the steps ----


def choose_assignments(directory: Path, only: Iterable[str] | None) -> list[str]:
    """The ones asked for, else all: an assignment the submission lacks scores zero (and
    the report says it is missing) unless `--assignment` leaves it out."""
    return list(only) if only else list(assignments.NAMES)


def missing_assignments(directory: Path, names: Iterable[str]) -> dict[str, str]:
    """Each assignment whose package is not in the submission -> what was found instead."""
    missing = {}
    for name in names:
        try:
            locate_assignment(directory, name)
        except SubmissionError as exc:
            missing[name] = str(exc)
    return missing


def yardstick(cases: list[Case], oracle: Oracle) -> dict[str, float]:
    """How long each case may take at least: SLOWER times as long as PyTorch took."""
    return {c.id: SLOWER * oracle.seconds.get(c.id, 0.0) for c in cases}


def status_of(run: Run, mismatched: bool) -> Status:
    if run.missing and run.fault is None:
        return Status.NOT_GRADED
    if run.fault is not None:
        return Status.TIMED_OUT if run.fault.startswith("timed out") else Status.ERROR
    if run.failure is not None:
        return Status.ERROR
    return Status.FAILED if mismatched else Status.PASSED


def not_graded_message(missing: list[str]) -> str:
    """`not graded: needs tanh`, and what that means for the student."""
    names = ", ".join(missing)
    which = "it" if len(missing) == 1 else "them"
    return (
        f"not graded: needs {names} (the submission does not have {which}: missing, or its forward "
        "raises NotImplementedError); 0 points, and the case's other ops are not blamed"
    )


def output_grads(expected: Run) -> set[str]:
    """The results that are the gradient of a node backward() started from (`y.grad`).
    That gradient is the seed backward() sets, one line of the engine: a case that asks
    for it by its own name checks it (one per assignment), and every other case leaves it
    out, so that one slip costs one case and not every case with a backward(). A case
    without a tape (a 10**5-op chain) knows them too (`Run.seeds`)."""
    return set(expected.seeds)


def verdict(
    case: Case, expected: Run, actual: Run, visibility: str = DEFAULT_HIDDEN_VISIBILITY
) -> CaseResult:
    """Compare and score one case (trusted code: only plain numbers come in)."""
    ran = actual.failure is actual.fault is None and not actual.missing
    seeds = output_grads(expected)
    mismatches = [m for m in compare(expected.results, actual.results) if m.name not in seeds] if ran else []
    status = status_of(actual, bool(mismatches))
    diagnosis = None
    if status is Status.NOT_GRADED:
        message = not_graded_message(actual.missing)
    elif actual.fault is not None:
        message = actual.fault + mlp_note(expected, case.assignment)
    elif status is Status.PASSED:
        message = ""
    else:
        diagnosis = diagnose(expected, actual, mismatches, case.assignment)
        message = diagnosis.message
    failed = status is Status.FAILED
    graph = case_graph(expected, actual, case.assignment, diagnosis) if failed else None
    blamed = diagnosis.blame if diagnosis is not None else ""
    if actual.fault is not None and actual.stuck_in:  # out of time, stuck in one of its parts
        hints = hints_for(case.assignment)
        part = hints.function_blame(actual.stuck_in)
        blamed = part if part in hints.PARTS else ""
    hidden = case.suite == "hidden"
    return CaseResult(
        id=case.id,
        name=case.title,
        assignment=case.assignment,
        topic=case.topic,
        max_points=case.points,
        status=status,
        message=message,
        output=actual.output,
        hidden=hidden,
        visibility=visibility if hidden else "visible",
        description=case.description,
        missing=list(actual.missing) if status is Status.NOT_GRADED else [],
        seconds=actual.seconds,
        ops=case_ops(expected, case.assignment),
        blame=blamed,
        slip=diagnosis.slip if diagnosis is not None else "",
        graph=graph,
    )


def score(
    cases: list[Case],
    oracle: Oracle,
    runs: list[Run],
    flags: dict[str, Finding],
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
) -> list[CaseResult]:
    """Each case's result; every case of a flagged assignment scores zero with the reason."""
    results = []
    for case, run in zip(cases, runs, strict=True):
        if case.assignment in flags:
            run = Run(fault=flags[case.assignment].reason)
        results.append(verdict(case, oracle.expected(case), run, visibility))
    lay_behind(cases, results)
    lay_unexplained(cases, results)
    return results


def _seen_by(cases: list[Case], results: list[CaseResult]) -> Iterator[tuple[str, bool, CaseResult]]:
    """Each failed case's (assignment, whether hidden cases may be laid by it, result): a
    hidden case lays only hidden ones (its blame is no public feedback), a public one both.
    Failed: wrong numbers, an exception, a timeout; a case not graded did not fail."""
    for case, result in zip(cases, results, strict=True):
        if result.status not in (Status.PASSED, Status.NOT_GRADED):
            for hidden in (True,) if result.hidden else (True, False):
                yield case.assignment, hidden, result


def lay_behind(cases: list[Case], results: list[CaseResult]) -> None:
    """A slip that another one causes wherever both are seen (`Slip.behind`: backward asking
    for the adjoints of a node too early, where find_topo_sort lists a node before its
    inputs) is laid where the failures of that other slip are: one case cannot tell which of
    the two is wrong, the submission's other cases can. For the class's count of what each
    part costs; the message is unchanged (it is made from the case alone)."""
    laid = {(a, hidden, r.slip): r.blame for a, hidden, r in _seen_by(cases, results) if r.blame}
    for case, result in zip(cases, results, strict=True):
        if result.passed or not result.slip:
            continue
        slip = next((s for s in slips_for(case.assignment) if s.name == result.slip), None)
        if slip is not None and slip.behind:
            result.blame = laid.get((case.assignment, result.hidden, slip.behind), result.blame)


def lay_unexplained(cases: list[Case], results: list[CaseResult]) -> None:
    """Some failures name no part: a case too big to keep a tape (`trace=False`: the 10**5-op
    chains), whose message sends the student to the smaller cases, and a case whose tape does
    not show the wrong rule run (one that ran only inside another rule's gradient, or inside
    an MLP's neurons). Where the failures of the same assignment that do name a part all name
    one, such a failure is laid there too, for the class's count of what each part costs: in
    the bug banks that part was always the one at fault. Its message is unchanged (it is made
    from the case alone, as a student's pytest run makes it). A public case is laid only by
    public ones (the blame of a hidden case is no public feedback)."""
    named: dict[tuple[str, bool], set[str]] = {}  # (assignment, hidden cases too) -> parts
    for assignment, hidden, result in _seen_by(cases, results):
        if result.status is Status.FAILED and result.blame:
            named.setdefault((assignment, hidden), set()).add(result.blame)
    for case, result in zip(cases, results, strict=True):
        if result.status is Status.FAILED and not result.blame:
            parts = named.get((case.assignment, result.hidden), set())
            if len(parts) == 1:
                (result.blame,) = parts


def grade(
    submission: str | Path,
    cases: list[Case],
    oracle: Oracle,
    engine: Engine,
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
) -> Report:
    """Grade one submission directory on `cases`. Faults of the submission become zero
    scores, never exceptions; an exception means the grader itself could not run."""
    started = time.perf_counter()
    directory = Path(submission)
    report = Report(str(directory))
    if not directory.is_dir():
        report.errors.append(f"{directory} is not a directory")
    oracle.prepare(cases)
    unanswered = [case for case in cases if oracle.results_of(case.id) is None]
    if unanswered:  # a test changed since the release, and no torch to check it: not scored
        cases = [case for case in cases if oracle.results_of(case.id) is not None]
        report.notes.append(unanswered_note(unanswered))
    names = sorted({case.assignment for case in cases})
    missing = missing_assignments(directory, names)
    todo = [case for case in cases if case.assignment not in missing]
    done = engine.run(directory, todo, yardstick(todo, oracle))
    flags = done.flags
    by_id = {case.id: run for case, run in zip(todo, done.runs, strict=True)}
    runs = [by_id.get(case.id) or Run(fault=missing[case.assignment]) for case in cases]
    report.results = score(cases, oracle, runs, flags, visibility)
    for name, reason in missing.items():
        points = sum(case.points for case in cases if case.assignment == name)
        report.errors.append(f"{name} is missing: 0 of its {points:g} points ({reason})")
    report.errors += [f"{name}: {finding.reason}; its cases score zero" for name, finding in flags.items()]
    report.notes += done.notes
    places.name_cells(report, directory)  # a notebook's code: its places are its cells
    report.seconds = time.perf_counter() - started
    return report


# ---- what a front end asks for ----


def suites_for(name: str) -> tuple[str, ...]:
    return {"public": ("public",), "hidden": ("hidden",), "all": ("public", "hidden")}[name]


@dataclass(frozen=True)
class Request:
    """A front end's options: which cases, where the code runs, what a student may see."""

    suite: str = "all"
    only: tuple[str, ...] | None = None
    suites_dir: Path = SUITES_DIR
    sandbox: bool = True
    limits: Limits = field(default_factory=Limits)
    keep: Callable[[Case], bool] | None = None
    visibility: str = DEFAULT_HIDDEN_VISIBILITY
    #: run the sandbox's workers as this unprivileged user (the grader must be root)
    user: str | None = None
    #: each assignment's scope (`grader.scope.resolve`); None: the defaults, for the shipped suites
    scopes: Mapping[str, Scope] | None = field(default=None, compare=False)


def default_scopes(suites_dir: Path) -> dict[str, Scope]:
    """The assignments' own scope files, which describe the shipped suites (not others)."""
    return resolve([], suites_dir, shipped=Path(suites_dir).resolve() == SUITES_DIR.resolve())


def needs_from(oracle: Oracle) -> Callable[[list[Case]], dict[str, set[str]]]:
    """What each case needs, from its run on PyTorch (the disk cache, the shipped answers,
    else PyTorch itself); a case with none of them (`NeedsTorch`) needs what it declares,
    and `grade` leaves it unscored, saying why."""

    def needs(cases: list[Case]) -> dict[str, set[str]]:
        oracle.prepare(cases)
        found = {}
        for case in cases:
            try:
                found[case.id] = oracle.needs(case)
            except NeedsTorch:
                found[case.id] = set(case.needs)
        return found

    return needs


def unanswered_note(cases: list[Case]) -> str:
    """Why cases were left out of the score: the one line of `NeedsTorch`, once."""
    first = NeedsTorch(cases[0])
    more = f" (and {len(cases) - 1} more cases like it)" if len(cases) > 1 else ""
    return f"not scored: {first}{more}"


def select_cases(directory: Path, request: Request, oracle: Oracle | None = None) -> list[Case]:
    """The cases to grade: of the assignments asked for, in the suites asked for, kept by
    `request.keep`, and in scope (with their points scaled). Out of scope: not run, not counted."""
    names = choose_assignments(Path(directory), request.only)
    found = collect(request.suites_dir, names, suites_for(request.suite))
    kept = [case for case in found if request.keep is None or request.keep(case)]
    scopes = request.scopes if request.scopes is not None else default_scopes(request.suites_dir)
    return select(kept, scopes, needs_from(oracle or oracle_from()))


def engine_for(request: Request, oracle: Oracle) -> Engine:
    if not request.sandbox:
        return InProcessRunner(oracle.results_of, used_by(oracle), request.limits)
    secrets = [REPO / "reference", *([oracle.cache_dir] if oracle.cache_dir else [])]
    return SandboxRunner(request.limits, secrets, request.user, oracle.results_of, needs=used_by(oracle))


def grade_submission(
    submission: str | Path,
    request: Request | None = None,
    oracle: Oracle | None = None,
    engine: Engine | None = None,
) -> Report:
    """The whole pipeline for one submission, as `grader grade` runs it (on `engine`, if
    given, instead of the one the request asks for)."""
    request = request or Request()
    oracle = oracle or oracle_from()
    cases = select_cases(Path(submission), request, oracle)
    engine = engine or engine_for(request, oracle)
    return grade_handed_in(submission, cases, oracle, engine, request.visibility)


def grade_handed_in(
    submission: str | Path,
    cases: list[Case],
    oracle: Oracle,
    engine: Engine,
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
) -> Report:
    """`grade`, for a submission as a student hands it in: a zip, or a folder holding only
    zips, is unpacked first (`grader.intake`, the one intake of every front end); one that
    cannot be read scores zero with the reason. The report names the submission as given."""
    with ExitStack() as stack:
        try:
            directory = intake.prepare(Path(submission), stack)
        except intake.IntakeError as exc:
            return refused(submission, cases, str(exc), visibility)
        report = grade(directory, cases, oracle, engine, visibility)
    report.submission = str(submission)
    return report


def refused(submission: str | Path, cases: list[Case], reason: str, visibility: str) -> Report:
    """Every case zero, for one reason: a submission that cannot be read at all, or a grading
    that could not finish (Gradescope's autograder stopped or out of time)."""
    report = Report(str(submission))
    report.results = [verdict(case, Run(), Run(fault=reason), visibility) for case in cases]
    report.errors.append(reason)
    return report
