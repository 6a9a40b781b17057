"""`nbgrader autograde` against the fast path, on the same N submissions of one course.

    python bench/bench_nbgrader.py [--students 50] [--assignment micrograd] [--jobs N] [--hanging K]

Every submission is the released notebook with the reference filled in; with --hanging K,
the last K of them have a backward() that never returns (a `while True` where the sort
begins), the bug that costs a grader most. Prints the wall time of `nbgrader autograde` (one
kernel per submission) and of `python -m grader grade-class --nbgrader` (the code extracted,
graded in the sandbox on all cores, the scores written into gradebook.db through nbgrader's
Gradebook), in all and per submission, their ratio, and whether `nbgrader export` gives
every student the same score after each. Each figure is one `measure_*` function returning
seconds; the gradebook is made anew before each.

It also prints the floor under both: the CPU time the submitted code itself needs to run
every case once, in one process with nothing around it (`cases_alone`). No path that grades
every case can take less than that per correct submission, spread over the machine's cores.

A backward() that never returns is found the same way on both paths: backward() is tried on
a tiny graph before the cases, and when it hangs each case gets 10 ms of CPU (see
`grader.sandbox.engine`); in a kernel, the picture cell's backward() also waits a second.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.harness.nbgrader_course import (  # noqa: E402
    edit,
    environment,
    export,
    fast_path,
    filled,
    make_course,
    nbgrader,
    submit,
)

#: assignment -> (old, new): the edit of the filled notebook whose backward() never returns
NEVER_RETURNS = {
    "micrograd": ("        topo, visited = [], set()\n", "        while True:\n            pass\n"),
    "needle": (
        "    node_to_output_grads_list = {output_tensor: [out_grad]}\n",
        "    while True:\n        pass\n",
    ),
}


def prepare(root: Path, assignment: str, students: int, hanging: int = 0) -> tuple[Path, dict[str, str]]:
    env = environment()
    course = make_course(root)
    nbgrader(course, "generate_assignment", assignment, "--force", env=env)
    nb = filled(course, assignment)
    stuck = edit(filled(course, assignment), *NEVER_RETURNS[assignment])
    for i in range(students):
        submit(course, f"student{i:03d}", assignment, stuck if i >= students - hanging else nb)
    return course, env


def fresh_gradebook(course: Path, env: dict[str, str], assignment: str) -> None:
    (course / "gradebook.db").unlink(missing_ok=True)
    shutil.rmtree(course / "autograded", ignore_errors=True)
    nbgrader(course, "generate_assignment", assignment, "--force", env=env)


def measure_autograde(course: Path, env: dict[str, str], assignment: str) -> float:
    started = time.perf_counter()
    nbgrader(course, "autograde", assignment, "--force", env=env)
    return time.perf_counter() - started


def measure_fast_path(course: Path, env: dict[str, str], assignment: str) -> float:
    jobs = env.get("BENCH_JOBS", str(len(os.sched_getaffinity(0))))
    started = time.perf_counter()
    fast_path(course, assignment, "--force", "--jobs", jobs, env=env)
    return time.perf_counter() - started


#: runs every public and hidden case of one assignment on the reference in this process, as a
#: sandbox worker runs them (no tapes read; a deep case's graph frozen, not collected), and
#: prints the CPU seconds of the cases alone: not the imports, the suites' loading or a compare
_CASES_ALONE = """
import gc, json, sys, time
from grader import assignments
from grader.case.define import collect
from grader.case.run import run_case
from grader.case.worker import keep_garbage
from grader.pipeline import REPO
name = sys.argv[1]
cases = collect(REPO / "tests", [name], ["public", "hidden"])
assignment = assignments.get(name)
modules = assignment.load(REPO / "reference")
cpu = 0.0
for case in cases:
    if not case.trace:
        gc.disable()
    started = time.process_time()
    run_case(case, assignment.engine(modules, trace=case.trace), [REPO], tape=False)
    cpu += time.process_time() - started
    if not case.trace:
        keep_garbage()
print(json.dumps({"cpu": cpu}))
"""


def cases_alone(assignment: str) -> float:
    """CPU seconds the reference takes to run every case of `assignment` once, in one process."""
    done = subprocess.run(
        [sys.executable, "-c", _CASES_ALONE, assignment], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])["cpu"]


#: name -> how to grade every submission of the course once (seconds)
FIGURES: dict[str, Callable[[Path, dict[str, str], str], float]] = {
    "nbgrader autograde": measure_autograde,
    "grade-class --nbgrader": measure_fast_path,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--assignment", default="micrograd", choices=("micrograd", "needle"))
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="for the fast path")
    parser.add_argument(
        "--hanging", type=int, default=0, metavar="K", help="of them, K with a backward() that never returns"
    )
    args = parser.parse_args()
    if not 0 <= args.hanging <= args.students:
        parser.error("--hanging must be between 0 and --students")
    with tempfile.TemporaryDirectory() as tmp:
        course, env = prepare(Path(tmp), args.assignment, args.students, args.hanging)
        env["BENCH_JOBS"] = str(args.jobs)
        seconds, scores = {}, {}
        for name, measure in FIGURES.items():
            fresh_gradebook(course, env, args.assignment)
            seconds[name] = measure(course, env, args.assignment)
            rows = export(course, env, f"{name.split()[0]}.csv")
            scores[name] = {
                (r["student_id"], r["assignment"]): (r["raw_score"], r["timestamp"]) for r in rows
            }
            kinds = f" ({args.hanging} hanging)" if args.hanging else ""
            print(
                f"{name}: {args.students} {args.assignment} submissions{kinds} in {seconds[name]:.1f} s, "
                f"{seconds[name] / args.students:.2f} s per submission"
            )
        (slow, fast) = FIGURES
        print(f"the fast path is {seconds[slow] / seconds[fast]:.1f}x faster than {slow}")
        if not args.hanging:  # the floor is that of a correct submission
            floor = cases_alone(args.assignment)
            best = seconds[slow] / (floor * args.students / args.jobs)
            print(
                f"the floor: the submitted code alone runs every case in {floor:.2f} s of CPU, so on "
                f"{args.jobs} cores no path that runs every case is more than {best:.1f}x faster than {slow}"
            )
        agree = scores[slow] == scores[fast] and len(scores[fast]) == args.students
        print(f"every exported score and timestamp agrees: {'yes' if agree else 'NO'}")
        if not agree:
            for key in sorted(set(scores[slow]) | set(scores[fast])):
                if scores[slow].get(key) != scores[fast].get(key):
                    print(f"  {key}: {slow} {scores[slow].get(key)}, {fast} {scores[fast].get(key)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
