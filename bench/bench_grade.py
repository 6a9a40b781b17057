"""How long grading one submission takes, end to end, as a student's upload would see it.

    python bench/bench_grade.py [--repeat 3] [--loop-timeout SECONDS]

Each figure is `python -m grader grade DIR --suite all` in a fresh process (sandboxed, the
default), median of --repeat runs: the reference, a buggy submission (one wrong rule in
each engine) and one whose backward() never returns (every case that calls it times out:
the first two after the full per-case timeout, the later ones after the short one the
grader gives once two cases hung in one function; the budget caps it all). The oracle is
timed cold (an empty cache: torch is imported and every case runs on it) and warm; the
reference is also graded in process, to show what the sandbox costs. The warm
per-submission cost is also given as a ratio to `python -c "import numpy"`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from timing import REPO, timed

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
        grade = [sys.executable, "-m", "grader", "grade", "--suite", "all", "--cache-dir", str(cache)]

        cold, _ = timed([*grade, str(subs["reference"])], 1)
        print(f"cold oracle (imports torch, runs every case on it), reference: {cold:6.2f} s")
        figures = {}
        for name, path in subs.items():
            looping = name == "infinite loop" and args.loop_timeout is not None
            extra = ["--timeout", str(args.loop_timeout)] if looping else []
            repeat = 1 if name == "infinite loop" else args.repeat
            figures[name], out = timed([*grade, *extra, str(path)], repeat)
            note = f" (--timeout {args.loop_timeout:g})" if extra else ""
            print(f"warm oracle, {name:<13}: {figures[name]:6.2f} s  {score_line(out)}{note}")
        local, _ = timed([*grade, "--in-process", str(subs["reference"])], args.repeat)
        print(f"warm oracle, reference, in process (no sandbox): {local:6.2f} s")
        numpy_time, _ = timed([sys.executable, "-c", "import numpy"], args.repeat)
        print(f'python -c "import numpy"     : {numpy_time:6.2f} s')
        ratio = figures["reference"] / numpy_time
        print(f"warm per-submission cost (reference) = {ratio:.1f} x importing numpy")


if __name__ == "__main__":
    main()
