"""How long grading one submission takes, end to end, as a student's upload would see it.

    python bench/bench_grade.py [--repeat 3] [--loop-timeout SECONDS]

Each figure is `python -m grader grade DIR --suite all` in a fresh process (sandboxed, the
default), median of --repeat runs: the reference, a buggy submission (one wrong rule in
each engine) and one whose backward() never returns (every case that calls it times out,
each after a short CPU budget once the probe before the cases has hung). The oracle is
timed cold (an empty cache: torch is imported and every case runs on it) and warm; the
reference is also graded in process, to show what the sandbox costs. The warm
per-submission cost is also given as a ratio to `python -c "import numpy"`, and in CPU
seconds: the machine's busy time while it ran, the sandboxed workers and the kernel's work
for them included (see `timing.grade_cpu`; run it on an otherwise idle machine). Last, the
time of the submission whose backward() never returns over the reference's (the grader's
probe finds it before the cases: see `grader.sandbox.engine`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from timing import REPO, cases_alone, grade_cpu, timed

BUGS = {
    "micrograd/engine.py": ("(1.0 - out.data**2) * out.grad", "(1.0 - out.data) * out.grad"),
    "needle/ops.py": ("        return out_grad * node\n", "        return out_grad * node.inputs[0]\n"),
}
LOOP = {
    "micrograd/engine.py": ("        topo, visited = [], set()\n", "        while True:\n            pass\n"),
}


def make(dest: Path, edits: dict[str, tuple[str, str]]) -> Path:
    shutil.copytree(REPO / "reference", dest, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, (old, new) in edits.items():
        path = dest / rel
        text = path.read_text()
        if old not in text:
            print(f"note: {rel} has no {old!r}; left as it is", file=sys.stderr)
        path.write_text(text.replace(old, new))
    return dest


def score_line(out: str) -> str:
    return next((line for line in out.splitlines() if line.startswith("Score:")), "?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--loop-timeout", type=float, default=None, help="its per-case timeout (default: the grader's)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-grade-") as tmp:
        tmp = Path(tmp)
        subs = {
            "reference": REPO / "reference",
            "buggy": make(tmp / "buggy", BUGS),
            "infinite loop": make(tmp / "loop", LOOP),
        }
        cache = tmp / "cache"
        grade = ["grade", "--suite", "all", "--cache-dir", str(cache)]

        cold, cold_cpu, _ = grade_cpu([*grade, str(subs["reference"])], 1)
        print(f"cold oracle (torch runs every case), reference: {cold:6.2f} s, {cold_cpu:5.2f} s CPU")
        wall, cpu = {}, {}
        for name, path in subs.items():
            looping = name == "infinite loop" and args.loop_timeout is not None
            extra = ["--timeout", str(args.loop_timeout)] if looping else []
            repeat = 1 if name == "infinite loop" else args.repeat
            wall[name], cpu[name], out = grade_cpu([*grade, *extra, str(path)], repeat)
            note = f" (--timeout {args.loop_timeout:g})" if extra else ""
            figures = f"{wall[name]:6.2f} s, {cpu[name]:5.2f} s CPU"
            print(f"warm oracle, {name:<13}: {figures}  {score_line(out)}{note}")
        local, local_cpu, _ = grade_cpu([*grade, "--in-process", str(subs["reference"])], args.repeat)
        print(f"warm oracle, reference, in process (no sandbox): {local:6.2f} s, {local_cpu:5.2f} s CPU")
        numpy_time, _ = timed([sys.executable, "-c", "import numpy"], args.repeat)
        print(f'python -c "import numpy"     : {numpy_time:6.2f} s')
        per_numpy = wall["reference"] / numpy_time
        print(f"warm per-submission cost (reference) = {per_numpy:.1f} x importing numpy")
        print(f"warm per-submission CPU (reference) = {cpu['reference']:.2f} s (target <= 1.5 s)")
        floor = sum(cases_alone(name) for name in ("micrograd", "needle"))
        print(
            f"  the floor: the reference runs every case of both assignments alone in {floor:.2f} s "
            f"of CPU; grading takes {cpu['reference'] / floor:.2f}x it"
        )
        ratio = wall["infinite loop"] / wall["reference"]
        print(f"infinite loop / reference, wall time = {ratio:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
