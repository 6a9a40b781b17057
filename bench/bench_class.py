"""How fast a class grades: `grade-class` against one `grade` command per submission.

    python bench/bench_class.py [--sizes 16 50 200] [--alone 10] [--lean] [--jobs N] [--kinds K ...]

The class is the generated one of the tests (tests/harness/classroom.py: the reference, the
template, both bug banks, the hostile submissions, the layouts). Prints, for each size, the
wall time of `python -m grader grade-class ROOT --force` (all cores) and submissions per
second per core; the time of grading the same submissions one `python -m grader grade`
command at a time (measured on --alone of them, spread over the kinds, and scaled to the
class); their ratio; and how the class time grows from the first size to the last (linear
growth is the last size over the first). The oracle cache is warmed first, so neither side
pays for PyTorch. `--lean` grades both sides on the test's lean selection of cases (two
public cases per topic, no deep chain or random search), where per-submission start-up
costs dominate; by default every case of both suites. Each class run's CPU time (the machine's
busy time while it ran: `timing.grade_cpu`) is printed per submission.

The floor is what the reference's code alone needs to run every case of both assignments
once (`timing.cases_alone`): no grading of a correct submission can cost less. It is
measured before each size's class run and after the last, and each run is compared with the
mean of the two measured on either side of it: a shared machine's speed drifts by a fifth or
more within minutes, and a floor measured once, at the start, made the same class run 1.4x
or 1.1x the floor by when it ran. Each size's machine time per submission (wall time x
cores: what the class occupies) and CPU per submission are printed against it; the class's
start-up is what makes a small class cost more per submission than a large one. The
generated class holds hostile submissions that run to their time limits: `--kinds reference`
makes a class of the reference alone, whose figures compare with the floor exactly, and
whose CPU per submission beyond the first size is what one more correct submission of both
assignments costs."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from timing import REPO, cases_alone, grade_cpu, timed

sys.path.insert(0, str(REPO))

from tests.harness.classroom import make_class  # noqa: E402


def lean_patterns() -> list[str]:
    from collections import defaultdict

    from grader.case.define import collect
    from grader.pipeline import SUITES_DIR

    taken: dict[tuple[str, str], int] = defaultdict(int)
    ids = []
    for case in collect(SUITES_DIR, ("micrograd", "needle"), ("public",)):
        if case.topic not in ("deep", "random") and taken[case.assignment, case.topic] < 2:
            taken[case.assignment, case.topic] += 1
            ids.append(case.id.replace("[", "[[]"))  # a glob matching that id alone
    return ids


def both_floor() -> float:
    return cases_alone("micrograd") + cases_alone("needle")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 50, 200])
    parser.add_argument("--alone", type=int, default=10, help="submissions graded one command at a time")
    parser.add_argument("--lean", action="store_true", help="the tests' lean selection of cases")
    parser.add_argument("--jobs", type=int, help="submissions at once (default: grade-class's own)")
    parser.add_argument("--kinds", nargs="+", help="only these kinds of submission (default: every kind)")
    args = parser.parse_args()
    selection = [arg for pattern in lean_patterns() for arg in ("--only-cases", pattern)] if args.lean else []
    python = [sys.executable, "-m", "grader"]
    cores = len(os.sched_getaffinity(0))
    jobs = ["--jobs", str(args.jobs)] if args.jobs else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        largest = max(args.sizes)
        students = make_class(tmp / "class", largest, only=args.kinds)
        if not students:
            raise SystemExit(f"no such kind: {' '.join(args.kinds)}")
        names = sorted(students)
        timed([*python, "grade", str(tmp / "class" / names[0]), *selection], 1)  # warm the oracle cache
        floors = [] if args.lean else [both_floor()]
        times: dict[int, float] = {}
        cpus: dict[int, float] = {}
        for size in args.sizes:
            root = tmp / f"class{size}"
            root.mkdir()
            for name in names[:size]:
                (root / name).symlink_to(tmp / "class" / name)  # the same submissions, a subset
            command = ["grade-class", str(root), "--out", str(tmp / f"out{size}"), "--force"]
            seconds, cpu, _ = grade_cpu([*command, *jobs, *selection], 1)
            times[size], cpus[size] = seconds, cpu
            if floors:
                floors.append(both_floor())
            rate = size / seconds
            print(
                f"grade-class, {size} submissions on {cores} core(s): "
                f"{seconds:.1f} s, {rate:.2f} submissions/s, {rate / cores:.3f} per core; "
                f"CPU {cpu / size:.3f} s per submission (the machine's busy time)"
            )
            if floors:
                floor = (floors[-2] + floors[-1]) / 2
                machine = seconds * cores / size
                print(
                    f"  the floor around it: the reference runs every case of both assignments in "
                    f"{floors[-2]:.2f} s of CPU before, {floors[-1]:.2f} s after"
                )
                print(
                    f"  machine time {machine:.2f} s per submission (wall x {cores} cores), "
                    f"{machine / floor:.2f}x the floor; CPU {cpu / size / floor:.2f}x the floor"
                )
        step = max(1, largest // args.alone)
        sample = names[::step][: args.alone]
        started = time.perf_counter()
        for name in sample:
            timed([*python, "grade", str(tmp / "class" / name), *selection], 1)
        alone = (time.perf_counter() - started) / len(sample)
        print(f"one `grade` command at a time: {alone:.2f} s per submission (mean of {len(sample)})")
        for size, seconds in times.items():
            ratio = alone * size / seconds
            print(f"  {size} submissions: {alone * size:.1f} s one at a time; grade-class is {ratio:.1f}x")
        first, last = min(times), max(times)
        if first != last:
            print(
                f"growth {first} -> {last} submissions: {times[last] / times[first]:.2f}x the time "
                f"(linear: {last / first:.2f}x)"
            )
            extra = (cpus[last] - cpus[first]) / (last - first)
            print(f"  CPU per submission beyond the first {first}: {extra:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
