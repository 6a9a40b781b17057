"""The class run: which submissions to grade, one oracle run, then all of them at once.

`grade_class` takes the submissions, hashes each, skips those the gradebook holds unchanged
(unless `force`), runs the oracle once for the whole class (the expected answers do not
depend on the student), names the place of one copy of the grader's worker modules that
every sandbox binds read-only (the first submission's process makes it), and hands the rest
to a backend: the local fork pool (all cores) or a Dask cluster, which reads each
submission's job as a slot frees up, so the first is graded while the others are unpacked.
Each answer is scored here by `pipeline.grade` and written to the gradebook in one
transaction as soon as it comes, so a kill loses only what was in flight.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from grader import intake
from grader.case.define import Case
from grader.classgrade.gradebook import Gradebook
from grader.classgrade.hashing import cases_key, files_hash
from grader.classgrade.layout import Submission
from grader.classgrade.pool import Finished, ForkPool
from grader.classgrade.runner import (
    CaseRef,
    Job,
    Outcome,
    default_secrets,
    report_for,
    sandbox_runs,
)
from grader.pipeline import refused, used_by, yardstick
from grader.report.model import DEFAULT_HIDDEN_VISIBILITY, Report
from grader.sandbox import Limits
from grader.sandbox.engine import shared_grader, strongest_isolation
from grader.verdict.oracle import Oracle

#: seconds a submission's worker may run beyond its grading budget before it is killed
GRACE = 60.0


class Backend(Protocol):
    def run(self, jobs: Iterable[Job]) -> Iterator[Finished]:
        """Each job's `Finished` (value: an `Outcome`), in any order; `jobs` may be made
        as they are read."""
        ...


@dataclass
class LocalBackend:
    """All cores of this machine: one fresh forked process per submission."""

    jobs: int
    deadline: float
    pool: ForkPool | None = field(default=None, init=False, repr=False)

    def start(self) -> None:
        """Start the fork server now: it imports what every submission's process needs and
        compiles the workers' bytecode (`grader.classgrade.warm`) on another core while the
        class run finds its submissions and the oracle's answers."""
        if self.pool is None:
            self.pool = ForkPool(self.jobs, self.deadline)

    def run(self, jobs: Iterable[Job]) -> Iterator[Finished]:
        self.start()
        assert self.pool is not None
        yield from self.pool.run(sandbox_runs, ((job.student, job) for job in jobs))


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    """`shard` = (i, n): a stable, disjoint split by the student's id (crc32 mod n)."""
    if shard is None:
        return True
    index, count = shard
    return zlib.crc32(student.encode()) % count == index


@dataclass
class ClassRun:
    """What happened: graded, skipped as unchanged, and the reports of those graded."""

    graded: dict[str, Report] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # student -> the worker's fault


def grade_class(
    submissions: Iterable[Submission],
    cases: Callable[[Submission], list[Case]] | list[Case],
    oracle: Oracle,
    book: Gradebook,
    backend: Backend | None = None,
    limits: Limits | None = None,
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
    force: bool = False,
    shard: tuple[int, int] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_done: Callable[[str, Report], None] | None = None,
    user: str | None = None,
) -> ClassRun:
    """Grade every submission not in the gradebook as it is now; see the module's docstring.
    `cases` is one list for all, or a function of the submission (e.g. its assignments)."""
    limits = limits or Limits()
    backend = backend or LocalBackend(1, limits.budget + GRACE)
    # bubblewrap's trial run (a sandbox started, a tenth of a second or more) waits meanwhile
    trial = threading.Thread(target=strongest_isolation, args=(user is not None,), daemon=True)
    trial.start()
    subs = sorted((s for s in submissions if in_shard(s.student, shard)), key=lambda s: s.student)
    choose = cases if callable(cases) else (lambda _sub, every=list(cases): every)  # one list, shared
    case_lists = {s.student: choose(s) for s in subs}
    everything = {c.id: c for group in case_lists.values() for c in group}
    oracle.prepare(everything.values())  # ONE oracle run (or cache read) for the whole class
    seen = book.stored()
    result = ClassRun()
    todo: list[tuple[Submission, str, str]] = []
    keys: dict[tuple, str] = {}  # a class has few distinct case lists: each key hashes the suites once
    for sub in subs:
        group = case_lists[sub.student]
        same = tuple((str(c.suites_dir), c.id, c.points) for c in group)
        if same not in keys:
            keys[same] = cases_key(group, visibility)
        key = keys[same]
        digest = files_hash(sub.path)
        old = seen.get(sub.student)
        if not force and old is not None and (old.hash, old.cases_key) == (digest, key):
            result.skipped.append(sub.student)
        else:
            todo.append((sub, digest, key))
    if on_start:
        on_start(len(todo), len(result.skipped))
    secrets = default_secrets(oracle)
    trial.join()
    isolation = strongest_isolation(switch_user=user is not None)  # found once, by the trial
    rules = used_by(oracle)
    with ExitStack() as stack:
        # one copy of the grader's worker modules for the whole class, if workers bind one
        copy = stack.enter_context(shared_grader(user)) if isolation == "bubblewrap" and todo else None
        by_student: dict[str, tuple[Submission, Path, str, str]] = {}
        shared: dict[int, tuple] = {}  # what a job takes of its case list, made once per list

        def jobs() -> Iterator[Job]:
            """Each submission's job, made as the backend asks for it: the first is graded
            while the others are unpacked."""
            for sub, digest, key in todo:
                group = case_lists[sub.student]
                try:
                    directory = intake.prepare(Path(sub.path), stack)  # a student's zip, unpacked safely
                except intake.IntakeError as exc:
                    report = refused(sub.path, group, str(exc), visibility)
                    _finish(book, result, sub, report, digest, key, None, on_done)
                    continue
                by_student[sub.student] = (sub, directory, digest, key)
                if id(group) not in shared:
                    shared[id(group)] = (
                        tuple(CaseRef.of(c) for c in group),
                        yardstick(group, oracle),
                        {case.id: oracle.expected(case).results for case in group},
                        {case.id: tuple(sorted(rules(case))) for case in group},
                    )
                refs, timing, wanted, needs = shared[id(group)]
                yield Job(
                    sub.student, directory, refs, timing, limits, secrets, user, wanted, isolation, needs,
                    grader_copy=copy,
                )  # fmt: skip

        for finished in backend.run(jobs()):
            sub, directory, digest, key = by_student[finished.key]
            outcome: Outcome | None = finished.value
            group = case_lists[sub.student]
            report = report_for(directory, group, oracle, outcome, visibility, finished.fault)
            report.submission, report.seconds = str(sub.path), finished.seconds
            _finish(book, result, sub, report, digest, key, finished.fault, on_done)
    return result


def _finish(
    book: Gradebook,
    result: ClassRun,
    sub: Submission,
    report: Report,
    digest: str,
    key: str,
    fault: str | None,
    on_done: Callable[[str, Report], None] | None,
) -> None:
    """Record one submission (one transaction) and tell the progress bar."""
    book.record(sub.student, report, digest, key, "graded" if fault is None else "error", sub.timestamp)
    result.graded[sub.student] = report
    if fault is not None:
        result.failed[sub.student] = fault
    if on_done:
        on_done(sub.student, report)
