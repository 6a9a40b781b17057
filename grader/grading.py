"""Grade a submission: the pipeline as a list of small steps.

collect cases -> run the oracle -> run the submission -> compare -> score -> report.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import assignments
from grader.cases import Case, collect
from grader.compare import compare
from grader.diagnose import diagnose
from grader.loading import SubmissionError, present_packages
from grader.oracle import Oracle
from grader.runner import Run, run_case

REPO = Path(__file__).resolve().parent.parent
SUITES_DIR = REPO / "tests"
MAX_OUTPUT = 4000


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
    if actual.failure is None:
        mismatches = compare(expected.results, actual.results)
        if not mismatches:
            return CaseResult(case, True)
    else:
        mismatches = []
    return CaseResult(case, False, diagnose(expected, actual, mismatches))


class InProcessEngine:
    """Runs cases on a submission inside this process (for trusted code and local runs)."""

    def __init__(self, directory: Path, assignment: str) -> None:
        self.directory = directory
        self.assignment = assignments.get(assignment)
        self.modules = self.assignment.load(directory)
        self.roots = [directory.resolve()]

    def run(self, case: Case) -> Run:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            run = run_case(case, self.assignment.engine(self.modules, trace=case.trace), self.roots)
        run.output = buffer.getvalue()[:MAX_OUTPUT]
        return run


def grade(
    submission: str | Path,
    suite: str = "public",
    only: Iterable[str] | None = None,
    suites_dir: Path = SUITES_DIR,
    oracle: Oracle | None = None,
) -> Report:
    """Grade one submission directory in this process."""
    started = time.perf_counter()
    directory = Path(submission)
    report = Report(str(directory))
    oracle = oracle or Oracle()
    present = present_packages(directory) if directory.is_dir() else []
    wanted = list(only) if only else present
    if not directory.is_dir():
        report.errors.append(f"{directory} is not a directory")
    elif not wanted:
        report.errors.append(f"no micrograd/ or needle/ package in {directory}")
    for name in wanted:
        cases = collect(suites_dir, [name], suites_for(suite))
        try:
            engine = InProcessEngine(directory, name)
        except SubmissionError as exc:
            report.results.extend(CaseResult(c, False, str(exc)) for c in cases)
            continue
        for case in cases:
            actual = engine.run(case)
            result = verdict(case, oracle.expected(case), actual)
            result.output = actual.output
            report.results.append(result)
    report.seconds = time.perf_counter() - started
    return report


def by_topic(results: Iterable[CaseResult]) -> dict[tuple[str, str], list[CaseResult]]:
    table: dict[tuple[str, str], list[CaseResult]] = {}
    for r in results:
        table.setdefault((r.case.assignment, r.case.topic), []).append(r)
    return table


def summary(report: Report) -> dict[str, Any]:
    return {"score": report.score, "max_score": report.max_score, "errors": report.errors}
