"""Peak memory of grading one submission through the sandbox, the whole run at once.

    python bench/bench_memory.py [--interval 0.01]

Gradescope gives an autograder 768 MB by default, for everything it runs at once: the
grader, bubblewrap and the sandboxed workers. Each figure is the peak, over the run, of the
resident memory (RSS) of the whole process tree of `python -m grader grade DIR --suite all`,
sampled from /proc every --interval seconds (a sum of RSS counts pages two processes share
twice: an upper bound, which is what a limit needs). Graded: the reference with the oracle
cache cold (PyTorch imported and run on every case) and warm, and hostile submissions: one
whose backward() fills memory (tests/harness/hostile/memory_exhaustion over the reference)
under the default worker limit and under the limit Gradescope's autograder sets (`--memory
560`), and one whose backward() never
returns. Gradescope's autograder (`python -m grader gradescope`) ships the oracle's results,
so there grading is always the warm case: PyTorch is never imported. Linux only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import REPO

LIMIT_MB = 768
#: the worker limit the Gradescope autograder grades with
AUTOGRADER_MIB = 560
PAGE = os.sysconf("SC_PAGE_SIZE")


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, resident bytes) of every process we can read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[21]) * PAGE)
    return table


def tree_rss(root: int) -> int:
    """The summed RSS of `root` and all its descendants, now."""
    table = _processes()
    family, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _) in table.items():
            if ppid == parent and pid not in family:
                family.add(pid)
                frontier.append(pid)
    return sum(table[pid][1] for pid in family if pid in table)


def peak(argv: list[str], interval: float) -> tuple[float, str]:
    """Peak summed RSS of the command's process tree (MB), and the last line it printed
    that starts with 'Score:'."""
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    highest = 0
    # The output is read at the end: the grader's report is small, a pipe holds it.
    while proc.poll() is None:
        highest = max(highest, tree_rss(proc.pid))
        time.sleep(interval)
    out = proc.stdout.read() if proc.stdout else ""
    score = next((line for line in out.splitlines() if line.startswith("Score:")), "?")
    return highest / 1e6, score


def hostile(name: str, dest: Path) -> Path:
    """The reference with a hostile overlay (tests/harness/hostile/NAME) on its micrograd."""
    shutil.copytree(REPO / "reference", dest, ignore=shutil.ignore_patterns("__pycache__"))
    overlay = REPO / "tests" / "harness" / "hostile" / name / "micrograd"
    shutil.copytree(overlay, dest / "micrograd", dirs_exist_ok=True)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between samples")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        cache = Path(tmp) / "cache"
        hoard = hostile("memory_exhaustion", Path(tmp) / "hoard")
        loop = hostile("loop_in_backward", Path(tmp) / "loop")
        grade = [sys.executable, "-m", "grader", "grade", "--suite", "all", "--cache-dir", str(cache)]
        runs = [
            ("reference, oracle cold (PyTorch runs)", [*grade, str(REPO / "reference")]),
            ("reference, oracle warm", [*grade, str(REPO / "reference")]),
            ("hostile: backward() fills memory", [*grade, str(hoard)]),
            (
                f"hostile: fills memory, --memory {AUTOGRADER_MIB} (autograder's)",
                [*grade, "--memory", str(AUTOGRADER_MIB), str(hoard)],
            ),
            ("hostile: backward() never returns", [*grade, str(loop)]),
        ]
        for name, argv in runs:
            mb, score = peak(argv, args.interval)
            verdict = "under" if mb < LIMIT_MB else "OVER"
            print(f"{name:<48} peak RSS {mb:7.0f} MB  ({verdict} {LIMIT_MB} MB)  {score}")


if __name__ == "__main__":
    main()
