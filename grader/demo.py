"""`python -m grader demo`: grade the bundled examples and show what a diagnostic looks like.

The examples are the reference solutions (full marks), the untouched student template
(forward cases pass, every gradient case is "not implemented yet") and a buggy submission:
the reference with the patches in examples/demo/ applied (micrograd with a wrong tanh
derivative, needle with a summation gradient that is not broadcast back). The demo needs
the kit's checkout: the installed package holds no solution, so nothing to patch.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from grader.pipeline import REPO, grade_submission
from grader.report.terminal import print_report
from grader.verdict.oracle import oracle_from

EXAMPLES = REPO / "examples" / "demo"


class PatchError(ValueError):
    """A demo patch does not apply to the reference (it is stale)."""


def apply_patch(patch: str, root: Path) -> None:
    """Apply a unified diff under `root`, each hunk found by its text (not its line numbers),
    exactly once."""
    path, old, new = None, [], []

    def flush() -> None:
        if path is None or not (old or new):
            return
        text = path.read_text()
        before, after = "".join(old), "".join(new)
        if text.count(before) != 1:
            raise PatchError(f"a hunk of the demo patch does not apply to {path.name}")
        path.write_text(text.replace(before, after))
        old.clear()
        new.clear()

    for line in patch.splitlines(keepends=True):
        if line.startswith("+++ "):
            flush()
            path = root / line[4:].strip().removeprefix("b/")
        elif line.startswith(("--- ", "#")):
            continue
        elif line.startswith("@@"):
            flush()
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or line == "\n":
            old.append(line[1:] or "\n")
            new.append(line[1:] or "\n")
    flush()


def buggy_example(dest: Path) -> Path:
    """The reference with every patch of examples/demo/ applied, written into `dest`."""
    patches = sorted(EXAMPLES.glob("*.patch"))
    shutil.copytree(REPO / "reference", dest, ignore=shutil.ignore_patterns("__pycache__"))
    for patch in patches:
        apply_patch(patch.read_text(), dest)
    return dest


def run_demo(console: Console | None = None) -> int:
    console = console or Console()
    if not (REPO / "reference").is_dir() or not EXAMPLES.is_dir():
        console.print("error: the demo needs the kit's checkout (reference/, examples/demo/)", markup=False)
        return 2
    oracle = oracle_from()  # PyTorch runs each case once, cached on disk
    names = ", ".join(p.stem for p in sorted(EXAMPLES.glob("*.patch")))
    with tempfile.TemporaryDirectory(prefix="grader-demo-") as tmp:
        examples = [
            ("the reference solutions", REPO / "reference"),
            ("the untouched student template", REPO / "student_template"),
            (f"a buggy submission ({names})", buggy_example(Path(tmp) / "buggy")),
        ]
        for title, directory in examples:
            console.rule(title)
            print_report(grade_submission(directory, oracle=oracle), console, failures=1)
    return 0
