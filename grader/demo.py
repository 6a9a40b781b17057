"""`python -m grader demo`: grade the bundled examples and show what a diagnostic looks like.

The examples are the reference solutions (full marks), the untouched student template
(forward cases pass, every gradient case is "not implemented yet") and a buggy submission
built from the bug bank: micrograd with a wrong tanh derivative, needle with a summation
gradient that is not broadcast back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console

from grader import bugbank, bugbank_needle
from grader.grading import REPO, grade
from grader.oracle import Oracle, default_cache_dir
from grader.report import print_report

BUGS = ("tanh-no-square", "summation-not-broadcast-back")


def buggy_example(dest: Path) -> Path:
    """Write the buggy example submission into `dest`."""
    bank = {bug.name: bug for bug in [*bugbank.BUGS, *bugbank_needle.BUGS]}
    for name in BUGS:
        bugbank.materialize(bank[name], dest)
    return dest


def run_demo(console: Console | None = None) -> int:
    console = console or Console()
    oracle = Oracle(default_cache_dir())  # PyTorch runs each case once, cached on disk
    with tempfile.TemporaryDirectory(prefix="grader-demo-") as tmp:
        examples = [
            ("the reference solutions", REPO / "reference"),
            ("the untouched student template", REPO / "student_template"),
            (f"a buggy submission ({', '.join(BUGS)})", buggy_example(Path(tmp) / "buggy")),
        ]
        for title, directory in examples:
            console.rule(title)
            print_report(grade(directory, suite="all", oracle=oracle), console, failures=1)
    return 0
