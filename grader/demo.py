"""`python -m grader demo`: grade the bundled examples and show what a diagnostic looks like."""

from __future__ import annotations

from rich.console import Console

from grader.grading import REPO, grade
from grader.oracle import Oracle
from grader.report import print_report

EXAMPLES = [
    ("the reference solutions", REPO / "reference"),
    ("the untouched student template", REPO / "student_template"),
    ("a buggy submission (examples/buggy)", REPO / "examples" / "buggy"),
]


def run_demo() -> int:
    console = Console()
    oracle = Oracle()  # PyTorch runs each case once for all three submissions
    for title, directory in EXAMPLES:
        console.rule(title)
        print_report(grade(directory, suite="all", oracle=oracle), console, failures=1)
    return 0
