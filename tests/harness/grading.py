"""The harness tests' short way to grade: positional options, as the tests read best."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from grader.case.define import Case
from grader.pipeline import SUITES_DIR, Request, grade_submission
from grader.report.model import Report
from grader.sandbox import Limits
from grader.verdict.oracle import Oracle


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
) -> Report:
    only = tuple(only) if only else None
    request = Request(suite, only, Path(suites_dir), sandbox, limits or Limits(), keep)
    return grade_submission(submission, request, oracle)
