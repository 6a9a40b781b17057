"""Command line: `python -m grader <command>`.

grade DIR [--suite public|hidden|all] [--results FILE] [--feedback FILE]
          [--timeout S] [--budget S] [--memory MIB] [--in-process] [--cache-dir DIR]
                                                         grade one submission (sandboxed)
template [--check]                                       write or check student_template/
notebooks [--check]                                      write or check the nbgrader course's notebooks
demo                                                     grade the bundled examples
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from grader.pipeline import REPO, SUITES_DIR, grade
from grader.report.gradescope import gradescope, write_json, write_text
from grader.report.markdown import markdown
from grader.report.terminal import print_report
from grader.sandbox import Limits
from grader.verdict.oracle import Oracle, default_cache_dir


def cmd_grade(args: argparse.Namespace) -> int:
    """Exit 0 whenever grading completed, whatever the score; 2 when it could not run."""
    limits = Limits(timeout=args.timeout, budget=args.budget, memory=args.memory)
    oracle = Oracle(None if args.no_cache else (args.cache_dir or default_cache_dir()))
    try:
        report = grade(
            args.submission,
            suite=args.suite,
            only=args.assignment or None,
            oracle=oracle,
            sandbox=not args.in_process,
            limits=limits,
            suites_dir=Path(args.suites),
        )
    except Exception:  # the grader's own failure, not the submission's
        traceback.print_exc()
        print("grader error: grading could not run", file=sys.stderr)
        return 2
    print_report(report)
    if args.results:
        write_json(gradescope(report, args.hidden_visibility), args.results)
    if args.feedback:
        write_text(markdown(report), args.feedback)
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
    p.add_argument("--assignment", action="append", choices=("micrograd", "needle"), help="grade only this")
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
        choices=("hidden", "after_due_date", "after_published", "visible"),
        help="Gradescope visibility of hidden cases",
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
