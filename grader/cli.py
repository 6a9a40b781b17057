"""Command line: `python -m grader <command>`.

    grade DIR [--suite public|hidden|all] [--results FILE]   grade one submission
    template [--check]                                       write or check student_template/
    demo                                                     grade the bundled examples
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.grading import REPO, grade
from grader.report import print_report
from grader.results import gradescope, write_json


def cmd_grade(args: argparse.Namespace) -> int:
    report = grade(args.submission, suite=args.suite, only=args.assignment or None)
    print_report(report)
    if args.results:
        write_json(gradescope(report, args.hidden_visibility), args.results)
    return 0


def cmd_template(args: argparse.Namespace) -> int:
    from grader.template import check, generate

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
    p.add_argument("--assignment", action="append", choices=("micrograd", "needle"), help="grade only this")
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

    p = sub.add_parser("demo", help="grade the bundled examples and show a diagnostic")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
