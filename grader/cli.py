"""Command line: `python -m grader <command>`.

grade DIR [--suite public|hidden|all] [--results FILE] [--feedback FILE] [--pages DIR]
          [--timeout S] [--budget S] [--memory MIB] [--in-process] [--cache-dir DIR]
                                                         grade one submission (sandboxed)
template [--check]                                       write or check student_template/
notebooks [--check]                                      write or check the nbgrader course's notebooks
demo                                                     grade the bundled examples
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.assignments import NAMES
from grader.pipeline import REPO, SUITES_DIR, Request, grade_submission
from grader.report.gradescope import gradescope, write_json, write_text
from grader.report.markdown import markdown
from grader.report.model import VISIBILITIES, Audience
from grader.report.terminal import print_report
from grader.sandbox import Limits
from grader.verdict.oracle import Oracle, default_cache_dir


def cmd_grade(args: argparse.Namespace) -> int:
    """Exit 0 whenever grading completed, whatever the score; 2 when it could not run."""
    limits = Limits(timeout=args.timeout, budget=args.budget, memory=args.memory)
    oracle = Oracle(None if args.no_cache else (args.cache_dir or default_cache_dir()))
    request = Request(
        suite=args.suite,
        only=tuple(args.assignment) if args.assignment else None,
        suites_dir=Path(args.suites),
        sandbox=not args.in_process,
        limits=limits,
        visibility=args.hidden_visibility,
    )
    try:
        report = grade_submission(args.submission, request, oracle)
    except Exception:  # the grader's own failure, not the submission's
        traceback.print_exc()
        print("grader error: grading could not run", file=sys.stderr)
        return 2
    print_report(report, audience=Audience(args.audience))
    if args.results:
        write_json(gradescope(report), args.results)
    if args.feedback:
        write_text(markdown(report, Audience.STUDENT), args.feedback)
    if args.pages:
        from grader.report.html import write_pages

        name = Path(args.submission).resolve().name or "submission"
        write_pages({name: report}, Path(args.pages), args.hidden_visibility)
    return 0


def cmd_template(args: argparse.Namespace) -> int:
    from grader.authoring.template import check, generate

    reference, template = Path(args.reference), Path(args.template)
    if args.check:
        problems = check(reference, template)
        for problem in problems:
            print(problem)
        if problems:
            print("student_template/ is out of date: run `python -m grader template`", file=sys.stderr)
        return 1 if problems else 0
    for path in generate(reference, template):
        print(f"wrote {path}")
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from grader.authoring.notebooks import check, generate

    reference, suites, course = Path(args.reference), Path(args.suites), Path(args.course)
    if args.check:
        problems = check(reference, suites, course)
        for problem in problems:
            print(problem)
        if problems:
            print("the course's notebooks are out of date: run `python -m grader notebooks`", file=sys.stderr)
        return 1 if problems else 0
    for path in generate(reference, suites, course):
        print(f"wrote {path}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from grader.demo import run_demo

    return run_demo()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("grade", help="grade one submission directory")
    p.add_argument("submission", help="directory holding micrograd/ and/or needle/")
    p.add_argument("--suite", choices=("public", "hidden", "all"), default="all")
    p.add_argument("--results", metavar="FILE", help="write Gradescope's results.json here")
    p.add_argument("--feedback", metavar="FILE", help="write Markdown feedback for the student here")
    p.add_argument(
        "--pages",
        metavar="DIR",
        help="write HTML feedback here: students/<name>.html for the student, index.html for you",
    )
    p.add_argument("--assignment", action="append", choices=NAMES, help="grade only this")
    defaults = Limits()
    p.add_argument(
        "--timeout", type=float, default=defaults.timeout, help="seconds per case (default %(default)s)"
    )
    p.add_argument(
        "--budget", type=float, default=defaults.budget, help="seconds in all (default %(default)s)"
    )
    p.add_argument("--memory", type=int, default=defaults.memory, help="MiB per worker (default %(default)s)")
    p.add_argument("--in-process", action="store_true", help="no sandbox: only for trusted code")
    p.add_argument(
        "--cache-dir", metavar="DIR", help="oracle cache (default $GRADER_CACHE or ~/.cache/grader/oracle)"
    )
    p.add_argument("--no-cache", action="store_true", help="run the oracle without its disk cache")
    p.add_argument("--suites", metavar="DIR", default=str(SUITES_DIR), help=argparse.SUPPRESS)
    p.add_argument(
        "--hidden-visibility",
        default="after_published",
        choices=VISIBILITIES,
        help="what a student sees of hidden cases (Gradescope's visibility; default %(default)s)",
    )
    p.add_argument(
        "--audience",
        choices=[a.value for a in Audience],
        default=Audience.INSTRUCTOR.value,
        help="who reads the terminal report (feedback and results.json are always the student's)",
    )
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("template", help="generate student_template/ from reference/")
    p.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    p.add_argument("--reference", default=str(REPO / "reference"))
    p.add_argument("--template", default=str(REPO / "student_template"))
    p.set_defaults(func=cmd_template)

    p = sub.add_parser("notebooks", help="generate the nbgrader course's source notebooks")
    p.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    p.add_argument("--reference", default=str(REPO / "reference"))
    p.add_argument("--suites", default=str(SUITES_DIR), help=argparse.SUPPRESS)
    p.add_argument("--course", default=str(REPO / "assignments"))
    p.set_defaults(func=cmd_notebooks)

    p = sub.add_parser("demo", help="grade the bundled examples and show a diagnostic")
    p.set_defaults(func=cmd_demo)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt: `finally` blocks and context managers
    run on the way out (workers killed, sandbox directories removed), `except Exception` does
    not swallow it."""


def _stop(signum: int, frame: object) -> None:
    # one interruption is enough: a second signal must not cut the cleanup short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise in the main thread while the command runs."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and gets signals)
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    """The command's exit status; 130 after Ctrl-C (SIGINT), 143 after SIGTERM, as a shell
    reports a process killed by them, with one line on stderr and nothing left behind."""
    args = build_parser().parse_args(argv)
    try:
        with interruptible():
            return args.func(args)
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"grader: {'terminated' if terminated else 'interrupted'}, nothing graded", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
