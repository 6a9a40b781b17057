"""How long nbgrader takes to autograde a class: `nbgrader autograde` on N submissions.

    python bench/bench_nbgrader.py [--students 50] [--assignment micrograd]

Every submission is the released notebook with the reference filled in. Prints the wall
time of `nbgrader autograde` in all and per submission. Each figure is one `measure_*`
function returning seconds: a second way of grading the same course (the fast path that
extracts the code and writes the gradebook) is one more function in FIGURES.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "harness"))

from nbgrader_course import environment, filled, make_course, nbgrader, submit  # noqa: E402


def prepare(root: Path, assignment: str, students: int) -> tuple[Path, dict[str, str]]:
    env = environment()
    course = make_course(root)
    nbgrader(course, "generate_assignment", assignment, "--force", env=env)
    nb = filled(course, assignment)
    for i in range(students):
        submit(course, f"student{i:03d}", assignment, nb)
    return course, env


def measure_autograde(course: Path, env: dict[str, str], assignment: str) -> float:
    started = time.perf_counter()
    nbgrader(course, "autograde", assignment, "--force", env=env)
    return time.perf_counter() - started


#: name -> how to grade every submission of the course once (seconds)
FIGURES: dict[str, Callable[[Path, dict[str, str], str], float]] = {"nbgrader autograde": measure_autograde}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--assignment", default="micrograd", choices=("micrograd", "needle"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        course, env = prepare(Path(tmp), args.assignment, args.students)
        for name, measure in FIGURES.items():
            seconds = measure(course, env, args.assignment)
            print(
                f"{name}: {args.students} {args.assignment} submissions in {seconds:.1f} s, "
                f"{seconds / args.students:.2f} s per submission"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
