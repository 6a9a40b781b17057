"""`python -m grader.classroom [REPO]`: grade a student's repository for GitHub Classroom.

The released bundle's workflow (`.github/workflows/classroom.yml`) runs this on every push,
as its grading step with the id `autograd-tests`. It grades the repository's packages on
every public suite the repository holds (every assignment, present or not: deleting a
package must not shrink the total), the cases its scope files admit
(`grader/assignments/<name>/scope.toml`, which `grader release --scope` writes), in the
sandbox (per-case timeouts, a total budget, a crash or an infinite loop scored zero with its
reason), through the intake every front end uses (`grader.intake`: packages found however
deep, or in the zips at the top when there are none), and prints the student's report.

The result is one runner per point value (`grader.report.classroom`: so that the reporter's
two totals agree), in the grader-output format. Each is appended to `$GITHUB_ENV` as
`<RUNNER>_RESULTS=<base64 of compact JSON>`, the variable the reporter reads for it, and
their ids as `CLASSROOM_RUNNERS=worth1,worth2,...`, which the workflow hands to the reporter
(`runners: ${{ env.CLASSROOM_RUNNERS }}`): the steps after this one see both.

It always writes a result, with every case in it, also when grading itself fails or is
stopped (SIGTERM): then each case is an error with the reason and the grade is zero. Its
exit status is 0 whenever the result was written (the reporter fails the check, not this
step), 2 when it could not be.

A Classroom grade is computed in the student's own repository, which the student can
change: it is feedback on each push, and the instructor's grade comes from grading the
submissions with the hidden suites (`python -m grader grade`, Gradescope).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from grader.assignments import NAMES
from grader.case.define import Case

#: what the workflow hands to the reporter as its `runners` input
RUNNERS_ENV = "CLASSROOM_RUNNERS"

#: seconds: the whole grading stops well before the workflow step's timeout (10 minutes)
BUDGET = 420.0
TIMEOUT = 10.0


class Stopped(KeyboardInterrupt):
    """SIGTERM (the step's timeout, a cancelled run): raised like Ctrl-C, so that the
    sandbox's workers are killed on the way out, and then the result is written."""


def _stop(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped()


def assignments_in(suites: Path) -> list[str]:
    return [name for name in NAMES if (suites / "public" / name).is_dir()]


def locations(cases: list[Case], repo: Path) -> tuple[dict[str, tuple[str, int]], dict[str, str]]:
    """Each case's file (relative to the repository) and line, and the command that runs
    it alone."""
    where, rerun = {}, {}
    for case in cases:
        path = Path(case.path).resolve()
        try:
            filename = path.relative_to(repo).as_posix()
        except ValueError:
            filename = str(path)
        where[case.id] = (filename, case.fn.__code__.co_firstlineno)
        node = f"{filename}::{case.test_name}"
        rerun[case.id] = f"python -m pytest {shlex.quote(node)}"
    return where, rerun


def grade_repository(repo: Path, suites: Path, timeout: float, budget: float) -> dict[str, dict[str, Any]]:
    """The runners' grader-output documents for `repo`, by runner id; never raises (but on
    SIGINT)."""
    from grader.report.classroom import classroom, failed_to_grade

    cases: list[Case] = []
    try:
        from grader.pipeline import Request, engine_for, grade_handed_in, select_cases
        from grader.report.model import Audience
        from grader.report.terminal import print_report
        from grader.sandbox import Limits
        from grader.verdict.oracle import oracle_from

        names = assignments_in(suites)
        if not names:
            return failed_to_grade(f"no public suite under {suites}")
        limits = Limits(timeout=timeout, budget=budget)
        request = Request(suite="public", only=tuple(names), suites_dir=suites, limits=limits)
        oracle = oracle_from()
        # in scope (the repository's own grader/assignments/<name>/scope.toml), points scaled
        cases = select_cases(repo, request, oracle)
        report = grade_handed_in(repo, cases, oracle, engine_for(request, oracle))
        every = "`python -m pytest` in the repository shows each one"
        print_report(report, audience=Audience.STUDENT, failures=5, more=every)
        return classroom(report, *locations(cases, repo))
    except Stopped:
        reason = "grading was stopped before it finished (the step timed out or was cancelled)"
    except Exception as exc:  # the grader's own failure: still a result, every case an error
        traceback.print_exc()
        reason = f"grading could not run: {type(exc).__name__}: {exc}"
    print(f"error: {reason}", file=sys.stderr)
    return failed_to_grade(reason, [(f"{c.assignment} / {c.topic} / {c.title}", c.points) for c in cases])


def result_lines(documents: dict[str, dict[str, Any]]) -> str:
    """What the grading step appends to `$GITHUB_ENV`: each runner's result, where the
    reporter looks for it (`<ID upper-cased, hyphens kept>_RESULTS`), and the runners' ids."""
    from grader.report.classroom import encode

    lines = [f"{runner.upper()}_RESULTS={encode(document)}" for runner, document in documents.items()]
    return "\n".join([*lines, f"{RUNNERS_ENV}={','.join(documents)}"]) + "\n"


def write_result(documents: dict[str, dict[str, Any]], output: str | None) -> None:
    text = result_lines(documents)
    if output:
        with open(output, "a", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.classroom", description=__doc__.split("\n")[0])
    parser.add_argument("repo", nargs="?", default=".", help="the repository to grade (default: here)")
    parser.add_argument("--suites", metavar="DIR", help="where tests/public is (default: REPO/tests)")
    parser.add_argument(
        "--timeout", type=float, default=TIMEOUT, help="seconds per case (default %(default)s)"
    )
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds in all (default %(default)s)")
    parser.add_argument(
        "--output",
        metavar="FILE",
        default=os.environ.get("GITHUB_ENV"),
        help="append the runners' results here (default: $GITHUB_ENV; without it, standard output)",
    )
    args = parser.parse_args(argv)
    repo = Path(args.repo).resolve()
    suites = Path(args.suites).resolve() if args.suites else repo / "tests"
    if not repo.is_dir():
        print(f"error: {repo} is not a directory", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        documents = grade_repository(repo, suites, args.timeout, args.budget)
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        write_result(documents, args.output)
    except OSError as exc:
        print(f"error: cannot write the result to {args.output}: {exc}", file=sys.stderr)
        return 2
    from grader.report.classroom import totals

    earned, out_of = totals(documents)
    statuses = {document["status"] for document in documents.values()}
    status = "error" if "error" in statuses else "fail" if "fail" in statuses else "pass"
    print(f"Classroom result: {status}, {earned:g}/{out_of:g} points ({', '.join(documents)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
