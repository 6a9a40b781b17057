"""`nbgrader autograde` against the fast path, on the same N submissions of one course.

    python bench/bench_nbgrader.py [--students 50] [--assignment micrograd] [--jobs N] [--hanging K]

Every submission is the released notebook with the reference filled in; with --hanging K,
the last K of them have a backward() that never returns (a `while True` where the sort
begins), the bug that costs a grader most. Prints the wall time of `nbgrader autograde` (one
kernel per submission) and of `python -m grader grade-class --nbgrader` (the code extracted,
graded in the sandbox on all cores, the scores written into gradebook.db through nbgrader's
Gradebook), in all and per submission, their ratio, and whether `nbgrader export` gives
every student the same score after each. Each figure is one `measure_*` function returning
wall and CPU seconds; the gradebook is made anew before each.

It also prints the floor under both: the CPU time the submitted code itself needs to run
every case once, in one process with nothing around it (`timing.cases_alone`), measured just
before the fast path and just after it (a shared machine's speed drifts within minutes), and
compared with their mean. No path that grades every case can take less than that per correct
submission. Against it, the fast path's machine time per submission (wall time x cores, what
the class occupies; the target is at most 1.5x the floor) and its CPU time per submission
(the machine's busy time while it ran, its sandboxed workers and the kernel's work for them
included: `timing.grade_cpu`). Their ratio is how fully the class kept the cores busy. Run
it on an otherwise idle machine.

Last, what the fast path costs apart from the cases: the same class graded on one case of each
suite (`--only-cases`), in machine time per submission. The floor plus that is what the fast
path would cost if each other case cost nothing beyond its own run; what remains, divided
among the other cases, is each case's own overhead (the worker's message, the grader's checks
of the live worker, its verdict).

A backward() that never returns is found the same way on both paths: backward() is tried on
a tiny graph before the cases, and when it hangs each case gets 10 ms of CPU (see
`grader.sandbox.engine`); in a kernel, the picture cell's backward() also waits a second.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from timing import REPO, busy_timed, cases_alone, grade_cpu

sys.path.insert(0, str(REPO))

from tests.harness.nbgrader_course import (  # noqa: E402
    edit,
    environment,
    export,
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


def measure_autograde(course: Path, env: dict[str, str], assignment: str) -> tuple[float, float]:
    """Its CPU counted as the fast path's is: the machine's busy time while it ran."""
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    wall, cpu, _ = busy_timed(command, 1, env, course)
    return wall, cpu


def measure_fast_path(course: Path, env: dict[str, str], assignment: str) -> tuple[float, float]:
    jobs = ["--jobs", env["BENCH_JOBS"]] if env.get("BENCH_JOBS") else []  # else grade-class's own
    wall, cpu, _ = grade_cpu(["grade-class", "--nbgrader", str(course), assignment, "--force", *jobs], 1, env)
    return wall, cpu


def suites_cases(assignment: str) -> list[str]:
    """Every case id of the assignment's public and hidden suites, in order."""
    from grader.case.define import collect
    from grader.pipeline import SUITES_DIR

    return [case.id for case in collect(SUITES_DIR, [assignment], ["public", "hidden"])]


def measure_one_case_each(course: Path, env: dict[str, str], assignment: str) -> tuple[float, float]:
    """The fast path on the same submissions graded on the first case of each suite only:
    what grading a submission costs apart from its cases (its processes, sandbox, imports,
    verdict and writes, the class's start and end shared among them)."""
    ids = suites_cases(assignment)
    first = [next(i for i in ids if ("hidden" in i) == hidden) for hidden in (False, True)]
    only = [arg for case in first for arg in ("--only-cases", glob.escape(case))]
    jobs = ["--jobs", env["BENCH_JOBS"]] if env.get("BENCH_JOBS") else []
    argv = ["grade-class", "--nbgrader", str(course), assignment, "--force", *jobs, *only]
    wall, cpu, _ = grade_cpu(argv, 1, env)
    return wall, cpu


#: name -> how to grade every submission of the course once (wall and CPU seconds)
FIGURES: dict[str, Callable[[Path, dict[str, str], str], tuple[float, float]]] = {
    "nbgrader autograde": measure_autograde,
    "grade-class --nbgrader": measure_fast_path,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--assignment", default="micrograd", choices=("micrograd", "needle"))
    parser.add_argument("--jobs", type=int, help="submissions at once on the fast path (default: its own)")
    parser.add_argument(
        "--hanging", type=int, default=0, metavar="K", help="of them, K with a backward() that never returns"
    )
    args = parser.parse_args()
    if not 0 <= args.hanging <= args.students:
        parser.error("--hanging must be between 0 and --students")
    with tempfile.TemporaryDirectory() as tmp:
        course, env = prepare(Path(tmp), args.assignment, args.students, args.hanging)
        env["BENCH_JOBS"] = str(args.jobs or "")
        cores = len(os.sched_getaffinity(0))
        seconds, cpus, scores = {}, {}, {}
        (slow, fast) = FIGURES
        floors = []
        for name, measure in FIGURES.items():
            fresh_gradebook(course, env, args.assignment)
            if name == fast and not args.hanging:  # the floor is that of a correct submission
                floors.append(cases_alone(args.assignment))
            seconds[name], cpus[name] = measure(course, env, args.assignment)
            if name == fast and not args.hanging:
                floors.append(cases_alone(args.assignment))
            rows = export(course, env, f"{name.split()[0]}.csv")
            scores[name] = {
                (r["student_id"], r["assignment"]): (r["raw_score"], r["timestamp"]) for r in rows
            }
            kinds = f" ({args.hanging} hanging)" if args.hanging else ""
            print(
                f"{name}: {args.students} {args.assignment} submissions{kinds} in {seconds[name]:.1f} s, "
                f"{seconds[name] / args.students:.2f} s per submission; "
                f"CPU {cpus[name] / args.students:.2f} s per submission"
            )
        print(f"the fast path is {seconds[slow] / seconds[fast]:.1f}x faster than {slow}")
        if floors:
            floor = sum(floors) / len(floors)
            best = seconds[slow] / (floor * args.students / cores)
            print(
                f"the floor: the submitted code alone runs every case in {floors[0]:.2f} s of CPU "
                f"before {fast}, {floors[1]:.2f} s after, so on {cores} cores no path that runs "
                f"every case is more than {best:.1f}x faster than {slow}"
            )
            machine = seconds[fast] * cores / args.students
            cpu = cpus[fast] / args.students
            print(
                f"{fast}: {machine:.2f} s of machine time per submission (wall x {cores} cores), "
                f"{machine / floor:.2f}x the floor; {cpu:.2f} s of CPU, {cpu / floor:.2f}x (target <= 1.5x)"
            )
            fresh_gradebook(course, env, args.assignment)
            fixed = measure_one_case_each(course, env, args.assignment)[0] * cores / args.students
            rest, others = machine - floor - fixed, len(suites_cases(args.assignment)) - 2
            print(
                f"of that: the cases alone {floor:.2f} s; a submission graded on one case of each suite "
                f"{fixed:.2f} s (its processes, sandbox, imports, verdict and writes: the floor and "
                f"this are {(floor + fixed) / floor:.2f}x the floor); the rest {rest:.2f} s, "
                f"{1000 * rest / others:.1f} ms for each other case (its messages, checks and verdict)"
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
