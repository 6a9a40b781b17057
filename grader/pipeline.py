"""Grade a submission: the pipeline as a list of small steps.

    collect cases -> run the oracle -> check integrity -> run the submission -> compare -> score

`grade` runs them in that order. The submission runs in the sandbox by default
(`SandboxEngine`: worker processes that only return plain numbers); `sandbox=False` runs it
in this process (`InProcessEngine`, for trusted code and for the pytest plugin). Either
way the verdict (the oracle, the comparison, the score) is computed here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader import assignments
from grader.case.define import ASSIGNMENTS, Case, collect
from grader.case.loading import SubmissionError, present_packages
from grader.case.run import Run, run_case
from grader.case.worker import Bounded
from grader.sandbox import Limits, SandboxEngine
from grader.verdict import integrity
from grader.verdict.compare import compare
from grader.verdict.diagnose import diagnose
from grader.verdict.integrity import Finding
from grader.verdict.oracle import Oracle, default_cache_dir

REPO = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO / "tests"
#: a case may take this many times as long as the oracle took for it (a million-node graph)
SLOWER = 3.0
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


@dataclass
class CaseResult:
    case: Case
    passed: bool
    message: str = ""
    output: str = ""

    @property
    def score(self) -> float:
        return self.case.points if self.passed else 0.0


@dataclass
class Report:
    submission: str
    results: list[CaseResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # problems that are not one case's
    notes: list[str] = field(default_factory=list)  # for whoever runs the grader, not the student
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.case.points for r in self.results)


def suites_for(name: str) -> tuple[str, ...]:
    return {"public": ("public",), "hidden": ("hidden",), "all": ("public", "hidden")}[name]


def verdict(case: Case, expected: Run, actual: Run) -> CaseResult:
    """Compare and score one case (trusted code: only plain numbers come in)."""
    if actual.fault is not None:
        return CaseResult(case, False, actual.fault, actual.output)
    if actual.failure is None:
        mismatches = compare(expected.results, actual.results)
        if not mismatches:
            return CaseResult(case, True, "", actual.output)
    else:
        mismatches = []
    return CaseResult(case, False, diagnose(expected, actual, mismatches), actual.output)


class InProcessEngine:
    """Runs cases on a submission inside this process (for trusted code and local runs)."""

    def __init__(self, directory: Path, assignment: str) -> None:
        self.directory = directory
        self.assignment = assignments.get(assignment)
        self.modules = self.assignment.load(directory)
        self.roots = [Path(directory).resolve()]

    def run(self, case: Case) -> Run:
        buffer = Bounded()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            run = run_case(case, self.assignment.engine(self.modules, trace=case.trace), self.roots)
        run.output = buffer.getvalue()
        return run


def run_in_process(directory: Path, cases: list[Case]) -> list[Run]:
    engines: dict[str, InProcessEngine | SubmissionError] = {}
    runs = []
    for case in cases:
        if case.assignment not in engines:
            try:
                engines[case.assignment] = InProcessEngine(directory, case.assignment)
            except SubmissionError as exc:
                engines[case.assignment] = exc
        engine = engines[case.assignment]
        runs.append(Run(fault=str(engine)) if isinstance(engine, SubmissionError) else engine.run(case))
    return runs


# ---- the steps ----


def choose_assignments(directory: Path, only: Iterable[str] | None) -> list[str]:
    """The ones asked for; else the packages present; else all (each then scores zero)."""
    if only:
        return list(only)
    return (present_packages(directory) if directory.is_dir() else []) or list(ASSIGNMENTS)


def check_integrity(directory: Path, names: list[str]) -> dict[str, Finding]:
    return {name: found for name in names if (found := integrity.scan(directory, name))}


def run_submission(
    directory: Path,
    cases: list[Case],
    flags: dict[str, Finding],
    sandbox: bool,
    limits: Limits,
    suites_dir: Path,
    hidden: list[Path],
    timeouts: dict[str, float],
    notes: list[str],
) -> list[Run]:
    """Each case's run; a flagged assignment's cases do not run at all. Adds run-time flags."""
    todo = [c for c in cases if c.assignment not in flags]
    if sandbox:
        engine = SandboxEngine(directory, suites_dir, limits, hidden=hidden)
        done = engine.run_all(todo, timeouts)
        for name, finding in engine.flags.items():
            flags.setdefault(name, finding)
        notes.append(ISOLATION[engine.isolation])
        if not engine.filtered:
            notes.append(UNFILTERED)
    else:
        done = run_in_process(directory, todo)
    by_id = {case.id: run for case, run in zip(todo, done, strict=True)}
    return [by_id.get(c.id) or Run(fault=flags[c.assignment].reason) for c in cases]


def score(cases: list[Case], oracle: Oracle, runs: list[Run], flags: dict[str, Finding]) -> list[CaseResult]:
    results = []
    for case, run in zip(cases, runs, strict=True):
        if case.assignment in flags:
            run = Run(fault=flags[case.assignment].reason)
        results.append(verdict(case, oracle.expected(case), run))
    return results


def grade(
    submission: str | Path,
    suite: str = "public",
    only: Iterable[str] | None = None,
    suites_dir: Path = SUITES_DIR,
    oracle: Oracle | None = None,
    sandbox: bool = True,
    limits: Limits | None = None,
    keep: Callable[[Case], bool] | None = None,
) -> Report:
    """Grade one submission directory (only the cases `keep` accepts, if given). Faults of
    the submission become zero scores, never exceptions; an exception means the grader
    itself could not run. A case may run for `limits.timeout` seconds, or SLOWER times as
    long as PyTorch took for it, whichever is longer."""
    started = time.perf_counter()
    directory = Path(submission)
    report = Report(str(directory))
    if not directory.is_dir():
        report.errors.append(f"{directory} is not a directory")
    names = choose_assignments(directory, only)
    cases = [c for c in collect(suites_dir, names, suites_for(suite)) if keep is None or keep(c)]
    oracle = oracle or Oracle(default_cache_dir())
    oracle.prepare(cases, suites_dir)
    flags = check_integrity(directory, names)
    limits = limits or Limits()
    secrets = [REPO / "reference", *([oracle.cache_dir] if oracle.cache_dir else [])]
    timeouts = {c.id: max(limits.timeout, SLOWER * oracle.seconds.get(c.id, 0.0)) for c in cases}
    runs = run_submission(
        directory, cases, flags, sandbox, limits, suites_dir, secrets, timeouts, report.notes
    )
    report.results = score(cases, oracle, runs, flags)
    report.errors += [f"{name}: {finding.reason}; its cases score zero" for name, finding in flags.items()]
    report.seconds = time.perf_counter() - started
    return report


def by_topic(results: Iterable[CaseResult]) -> dict[tuple[str, str], list[CaseResult]]:
    table: dict[tuple[str, str], list[CaseResult]] = {}
    for r in results:
        table.setdefault((r.case.assignment, r.case.topic), []).append(r)
    return table
