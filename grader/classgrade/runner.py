"""One submission's run, split where the trust boundary is.

`sandbox_runs` is what a forked worker (or a Dask task) does for one submission: check its
files, run its cases in the sandbox, and return the raw runs. It needs no oracle and no
case functions: `CaseRef`s name the cases, and the sandbox's workers collect them anew.
`report_for` then scores those runs in the grading process through `pipeline.grade` itself,
with a `Replay` engine: the verdicts are made by the very code `grader grade` uses, so a
class grades exactly as its submissions would one by one.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.case.define import Case
from grader.case.quantity import Quantity
from grader.case.run import Run
from grader.pipeline import REPO, SUITES_DIR, Runs, SandboxRunner, grade, missing_assignments
from grader.report.model import Report
from grader.sandbox import Limits
from grader.verdict.integrity import Finding
from grader.verdict.oracle import Oracle


@dataclass(frozen=True)
class CaseRef:
    """What the sandbox needs of a case: which one, and where its suite is."""

    id: str
    assignment: str
    suite: str
    suites_dir: Path

    @classmethod
    def of(cls, case: Case) -> CaseRef:
        return cls(case.id, case.assignment, case.suite, case.suites_dir)


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to run one submission: plain, picklable data."""

    student: str
    path: Path
    cases: tuple[CaseRef, ...]
    yardstick: dict[str, float]
    limits: Limits
    secrets: tuple[Path, ...] = ()
    user: str | None = None  # run the sandbox's workers as this user (the grader must be root)
    #: each case's expected results: workers then send only a wrong case's tape (see `SandboxEngine`)
    expected: dict[str, dict[str, Quantity | None]] = field(default_factory=dict)
    #: the sandbox's isolation as this machine allows it, found once for the class (None: find out)
    isolation: str | None = None
    #: each case's rules, as PyTorch's run says (`pipeline.used_by`): a case that uses one whose
    #: rule hung on the probe gets the short CPU budget, as `grader grade` gives it
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: where the class's one copy of the grader's worker modules is, on this machine, made
    #: by the first run that binds it (None: each submission's run makes its own)
    grader_copy: Path | None = None


@dataclass
class Outcome:
    """A worker's answer: each run case's run by id, and what the engine saw on the way."""

    runs: dict[str, Run]
    flags: dict[str, Finding]
    notes: list[str]


def sandbox_runs(job: Job) -> Outcome:
    """Run the job's cases on its submission in the sandbox (but an assignment the
    submission lacks, as `grade` does: its cases score zero without running)."""
    directory = Path(job.path)
    missing = missing_assignments(directory, sorted({c.assignment for c in job.cases}))
    todo = [c for c in job.cases if c.assignment not in missing]
    if not todo:
        return Outcome({}, {}, [])
    expected = job.expected.get if job.expected else None
    needs = (lambda case: job.needs.get(case.id, ())) if job.needs else None
    runner = SandboxRunner(
        job.limits, list(job.secrets), job.user, expected, job.isolation, needs, job.grader_copy
    )
    done = runner.run(directory, todo, job.yardstick)  # type: ignore[arg-type]  # a CaseRef is enough
    return Outcome({c.id: run for c, run in zip(todo, done.runs, strict=True)}, done.flags, done.notes)


def sandbox_runs_of_files(job: Job, files: dict[str, bytes]) -> Outcome:
    """The same, for a worker on another machine: the submission comes as its files."""
    with tempfile.TemporaryDirectory(prefix="grader-class-") as tmp:
        root = Path(tmp) / "submission"
        for relative, data in files.items():
            target = root.joinpath(*Path(relative).parts)
            if root.resolve() not in target.resolve().parents:
                continue  # never outside the copy
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        root.mkdir(exist_ok=True)
        cases = tuple(c if c.suites_dir.is_dir() else replace(c, suites_dir=SUITES_DIR) for c in job.cases)
        # this machine's secrets, isolation and copy of the grader, not the client's
        here = dict(secrets=default_secrets(), isolation=None, grader_copy=None)
        return sandbox_runs(replace(job, path=root, cases=cases, **here))


def default_secrets(oracle: Oracle | None = None) -> tuple[Path, ...]:
    """What a worker must never see (for the sandbox's fallback): reference/, the oracle's cache."""
    cache = [oracle.cache_dir] if oracle is not None and oracle.cache_dir else []
    return (REPO / "reference", *cache)


class Replay:
    """An engine that hands `grade` the runs a worker already made."""

    def __init__(self, done: Outcome | None, fault: str | None = None) -> None:
        self.done, self.fault = done, fault

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        if self.done is None:
            return Runs([Run(fault=self.fault) for _ in cases])
        missing = "the grader's worker returned no result for this case"
        runs = [self.done.runs.get(c.id) or Run(fault=missing) for c in cases]
        return Runs(runs, dict(self.done.flags), list(self.done.notes))


def report_for(
    path: Path,
    cases: list[Case],
    oracle: Oracle,
    done: Outcome | None,
    visibility: str,
    fault: str | None = None,
) -> Report:
    """The submission's report from a worker's runs; with `fault` (the worker crashed or
    overran), every case is an error with that reason."""
    report = grade(path, cases, oracle, Replay(done, fault), visibility)
    if fault is not None:
        report.errors.append(fault)
    return report


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_jobs() -> int:
    """Submissions graded at once unless told: one more than the cores. A submission's
    sandbox worker waits while its grader checks it between cases, and starting a worker
    waits on the kernel; the extra submission runs in those gaps (`bench/bench_nbgrader.py`:
    30 submissions on 2 cores, 14.9 s with 2 at once, 13.4 s with 3)."""
    return cpu_count() + 1
