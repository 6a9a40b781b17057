"""`nbgrader autograde` against the fast path, on the same N submissions of one course.

    python bench/bench_nbgrader.py [--students 50] [--assignment micrograd] [--jobs N] [--hanging K]
                                   [--repeat 3]

Every submission is the released notebook with the reference filled in; with --hanging K,
the last K of them have a backward() that never returns (a `while True` where the sort
begins), the bug that costs a grader most. Prints the wall time of `nbgrader autograde` (one
kernel per submission) and of `python -m grader grade-class --nbgrader` (the code extracted,
graded in the sandbox on all cores, the scores written into gradebook.db through nbgrader's
Gradebook), in all and per submission, their ratio, and whether `nbgrader export` gives
every student the same score after each. Each figure is one `measure_*` function returning
wall and CPU seconds; the gradebook is made anew before each. nbgrader runs once (it takes
minutes); the fast path `--repeat` times, and its figures are the medians.

It also prints the floor under both: the CPU time the submitted code itself needs to run
every case once, in one process with nothing around it (`timing.cases_alone`), measured just
before each run of the fast path and just after it, and that run compared with their mean: a
shared machine's speed drifts within minutes, by a fifth or more (seen here; one run against
one floor gave 2.1x and 2.6x for the same code within the hour). No path that grades every
case can take less than that per correct submission. Against it, the fast path's machine
time per submission (wall time x cores, what the class occupies; the target is at most 1.5x
the floor) and its CPU time per submission (the machine's busy time while it ran, its
sandboxed workers and the kernel's work for them included: `timing.grade_cpu`). Their ratio
is how fully the class kept the cores busy. Run it on an otherwise idle machine.

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
import statistics
import sys
import tempfile
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


def exported(course: Path, env: dict[str, str], name: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(student, assignment) -> (score, timestamp), as `nbgrader export` gives them."""
    return {
        (r["student_id"], r["assignment"]): (r["raw_score"], r["timestamp"])
        for r in export(course, env, name)
    }


def fresh_gradebook(course: Path, env: dict[str, str], assignment: str) -> None:
    (course / "gradebook.db").unlink(missing_ok=True)
    shutil.rmtree(course / "autograded", ignore_errors=True)
    nbgrader(course, "generate_assignment", assignment, "--force", env=env)


def measure_autograde(course: Path, env: dict[str, str], assignment: str) -> tuple[float, float]:
    """Its CPU counted as the fast path's is: the machine's busy time while it ran."""
    command = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--force"]
    wall, cpu, _ = busy_timed(command, 1, env, course)
    return wall, cpu


def measure_fast_path(course: Path, env: dict[str, str], assignment: str, *args: str) -> tuple[float, float]:
    jobs = ["--jobs", env["BENCH_JOBS"]] if env.get("BENCH_JOBS") else []  # else grade-class's own
    argv = ["grade-class", "--nbgrader", str(course), assignment, "--force", *jobs, *args]
    wall, cpu, _ = grade_cpu(argv, 1, env)
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
    return measure_fast_path(course, env, assignment, *only)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--assignment", default="micrograd", choices=("micrograd", "needle"))
    parser.add_argument("--jobs", type=int, help="submissions at once on the fast path (default: its own)")
    parser.add_argument(
        "--hanging", type=int, default=0, metavar="K", help="of them, K with a backward() that never returns"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of the fast path, each between two of the floor"
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not 0 <= args.hanging <= args.students:
        parser.error("--hanging must be between 0 and --students")
    with tempfile.TemporaryDirectory() as tmp:
        course, env = prepare(Path(tmp), args.assignment, args.students, args.hanging)
        env["BENCH_JOBS"] = str(args.jobs or "")
        cores, n = len(os.sched_getaffinity(0)), args.students
        slow, fast = "nbgrader autograde", "grade-class --nbgrader"
        kinds = f" ({args.hanging} hanging)" if args.hanging else ""

        def said(name: str, wall: float, cpu: float) -> None:
            print(
                f"{name}: {n} {args.assignment} submissions{kinds} in {wall:.1f} s, "
                f"{wall / n:.2f} s per submission; CPU {cpu / n:.2f} s per submission"
            )

        fresh_gradebook(course, env, args.assignment)
        slow_wall, slow_cpu = measure_autograde(course, env, args.assignment)
        expected = exported(course, env, "nbgrader.csv")
        said(slow, slow_wall, slow_cpu)
        runs, wrong = [], {}
        for _ in range(args.repeat):  # the floor measured just before and just after each
            fresh_gradebook(course, env, args.assignment)
            before = cases_alone(args.assignment) if not args.hanging else 0.0
            wall, cpu = measure_fast_path(course, env, args.assignment)
            got = exported(course, env, "grade-class.csv")
            for key in expected.keys() | got.keys():
                if expected.get(key) != got.get(key):
                    wrong[key] = (expected.get(key), got.get(key))
            if len(got) != n:
                wrong["submissions exported"] = (n, len(got))
            one_case = after = 0.0
            if not args.hanging:  # the floor is that of a correct submission
                fresh_gradebook(course, env, args.assignment)
                one_case = measure_one_case_each(course, env, args.assignment)[0]
                after = cases_alone(args.assignment)
            runs.append((wall, cpu, (before + after) / 2, one_case))
        wall, cpu = (statistics.median(r[i] for r in runs) for i in (0, 1))
        said(f"{fast} (median of {len(runs)})", wall, cpu)
        print(f"the fast path is {slow_wall / wall:.1f}x faster than {slow}")
        if not args.hanging:
            floor = statistics.median(r[2] for r in runs)
            print(
                f"the floor: the submitted code alone runs every case in {floor:.2f} s of CPU (each "
                f"run's mean of just before and just after it), so on {cores} cores no path that runs "
                f"every case is more than {slow_wall / (floor * n / cores):.1f}x faster than {slow}"
            )
            machine = [w * cores / n / f for w, _, f, _ in runs]
            busy = [c / n / f for _, c, f, _ in runs]
            print(
                f"{fast}: {statistics.median(w * cores / n for w, *_ in runs):.2f} s of machine time per "
                f"submission (wall x {cores} cores), {statistics.median(machine):.2f}x the floor "
                f"({', '.join(f'{x:.2f}' for x in machine)}); {cpu / n:.2f} s of CPU, "
                f"{statistics.median(busy):.2f}x (target <= 1.5x)"
            )
            fixed = statistics.median(o * cores / n / f for _, _, f, o in runs)  # in floors
            rest = statistics.median(machine) - 1 - fixed
            others = len(suites_cases(args.assignment)) - 2
            print(
                f"of that, in floors: the cases alone 1; a submission graded on one case of each suite "
                f"{fixed:.2f} (its processes, sandbox, imports, verdict and writes; the two are "
                f"{1 + fixed:.2f}x the floor); the rest {rest:.2f}, {1000 * rest * floor / others:.1f} ms "
                f"for each other case (its messages, checks and verdict)"
            )
        print(f"every exported score and timestamp agrees: {'NO' if wrong else 'yes'}")
        for key, (theirs, ours) in sorted(wrong.items(), key=str):
            print(f"  {key}: {slow} {theirs}, {fast} {ours}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
