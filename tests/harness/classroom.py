"""A generated class: the submissions a real class hands in, under one folder per student.

Shared by tests/harness/test_classgrade.py and bench/bench_class.py. Kinds of submission:
the reference, the untouched template, every bug of the bug banks, every hostile submission
(on its honest base), and the layouts a class hands in (one package only, packages nested a
folder down, an empty folder). `make_class(root, n)` writes n students cycling through the
kinds (student `s007-<kind>`), the slow hostile ones at most once each; `kind_of(student)`
reads the kind back.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from tests.harness.bugs import materialize
from tests.harness.bugs.micrograd import BUGS as MICROGRAD_BUGS
from tests.harness.bugs.needle import BUGS as NEEDLE_BUGS

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "tests" / "harness" / "hostile"
#: hostile kinds whose cases run into the timeout: once per class, to keep it lean
SLOW = {
    "hostile-loop_at_import",
    "hostile-loop_in_backward",
    "hostile-signals_ignored",
    "hostile-memory_exhaustion",
}
IGNORE = shutil.ignore_patterns("__pycache__")


def _copy(package: str, dest: Path) -> None:
    shutil.copytree(REPO / "reference" / package, dest / package, ignore=IGNORE)


def _hostile(name: str) -> Callable[[Path], None]:
    def make(dest: Path) -> None:
        _copy("micrograd", dest)
        engine = dest / "micrograd" / "engine.py"
        right = "self.grad += (1.0 - out.data**2) * out.grad"
        engine.write_text(engine.read_text().replace(right, "self.grad += (1.0 - out.data) * out.grad"))
        shutil.copytree(HOSTILE / name / "micrograd", dest / "micrograd", dirs_exist_ok=True, ignore=IGNORE)

    return make


def _template(dest: Path) -> None:
    for package in ("micrograd", "needle"):
        shutil.copytree(REPO / "student_template" / package, dest / package, ignore=IGNORE)


def _nested(dest: Path) -> None:
    _copy("micrograd", dest / "hw1")


def kinds() -> dict[str, Callable[[Path], None]]:
    """kind -> how to write that submission into an (existing) student folder."""
    found: dict[str, Callable[[Path], None]] = {
        "reference": lambda d: (_copy("micrograd", d), _copy("needle", d)),
        "template": _template,
        "micrograd-only": lambda d: _copy("micrograd", d),
        "needle-only": lambda d: _copy("needle", d),
        "nested": _nested,
        "empty": lambda d: None,
    }
    for bug in [*MICROGRAD_BUGS, *NEEDLE_BUGS]:
        found[f"bug-{bug.name}"] = lambda d, bug=bug: materialize(bug, d)
    for path in sorted(HOSTILE.iterdir()):
        if path.is_dir() and (path / "micrograd").is_dir():
            found[f"hostile-{path.name}"] = _hostile(path.name)
    return found


def kind_of(student: str) -> str:
    return student.split("-", 1)[1]


def make_class(root: Path, size: int, only: list[str] | None = None, first: int = 0) -> dict[str, str]:
    """Write `size` students under `root`, numbered from `first`; returns student -> kind."""
    makers = kinds()
    order = [k for k in makers if only is None or k in only]
    fast = [k for k in order if k not in SLOW]
    picks = [k for k in order if k in SLOW][:size] + fast * (size // max(1, len(fast)) + 1)
    students = {}
    for i, kind in enumerate(picks[:size]):
        student = f"s{first + i:03d}-{kind}"
        folder = root / student
        folder.mkdir(parents=True)
        makers[kind](folder)
        students[student] = kind
    return students
