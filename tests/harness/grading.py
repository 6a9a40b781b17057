"""The harness tests' short way to grade: positional options, as the tests read best."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from grader.case.define import Case
from grader.case.run import Run
from grader.pipeline import (
    REPO,
    SUITES_DIR,
    Engine,
    Request,
    Runs,
    engine_for,
    grade_submission,
)
from grader.report.model import Report
from grader.sandbox import Limits
from grader.scope import Scope
from grader.verdict.oracle import Oracle, oracle_from

REFERENCE = (REPO / "reference").resolve()

#: (suites directory, case id) -> the untouched reference's run of that case in this process,
#: as the in-process engine made it. The harness grades the reference in process again and
#: again (each scope, each bug bank's baseline: 6-8 s of CPU each), and its runs never change.
REFERENCE_RUNS: dict[tuple[Path, str], Run] = {}


@dataclass
class RememberedReference:
    """The in-process engine on the reference, running each case once per test process."""

    engine: Engine

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        new = [c for c in cases if (c.suites_dir, c.id) not in REFERENCE_RUNS]
        if new:
            done = self.engine.run(submission, new, yardstick)
            assert not done.notes and not done.flags, done  # the reference loads cleanly
            REFERENCE_RUNS.update(((c.suites_dir, c.id), run) for c, run in zip(new, done.runs, strict=True))
        return Runs([REFERENCE_RUNS[c.suites_dir, c.id] for c in cases])


def grade(
    submission: str | Path,
    suite: str = "all",
    only: Iterable[str] | None = None,
    suites_dir: Path = SUITES_DIR,
    oracle: Oracle | None = None,
    *,
    sandbox: bool = True,
    limits: Limits | None = None,
    keep: Callable[[Case], bool] | None = None,
    scopes: Mapping[str, Scope] | None = None,
) -> Report:
    """`grade_submission` with these options. The untouched reference, graded in process, runs
    each case once per test process (`REFERENCE_RUNS`); its report is made anew every time."""
    only = tuple(only) if only else None
    request = Request(suite, only, Path(suites_dir), sandbox, limits or Limits(), keep, scopes=scopes)
    if sandbox or limits is not None or Path(submission).resolve() != REFERENCE:
        return grade_submission(submission, request, oracle)
    oracle = oracle or oracle_from()
    return grade_submission(submission, request, oracle, RememberedReference(engine_for(request, oracle)))
