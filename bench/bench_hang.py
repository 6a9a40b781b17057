"""A gradient rule that never returns, in a student's own run: the public micrograd suite on
the reference with relu's rule (`_backward`) looping, against the same suite on the reference.

    python bench/bench_hang.py [--repeat 1]

Each run is `python -m pytest -q tests/public/micrograd --impl=DIR` in a fresh interpreter
from the project's root, with an oracle cache of its own, made by one untimed run of each
on this machine as it is now: the time limits of a looping case are sized by PyTorch's time
for it, which a cache made while the machine was busy would keep too long. Once with
pytest-timeout (the plugin gives each graded test its default timeout) and once without it
(`-p no:timeout`, as with the bundle's requirements before it was added). It prints the wall
time and the CPU time (this run's children: the pytest process) of each, and for each way
the looping run's time as a multiple of the correct run's. Target: at most 3x. CPU time,
unlike wall time, does not grow when other work shares the machine's cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from timing import REPO, cpu_timed

from grader.verdict.oracle import CACHE_ENV

#: relu's rule in the reference, and what the looping copy has instead
RULE = "            self.grad += (1.0 if self.data > 0 else 0.0) * out.grad\n"
LOOP = "            while True:\n                pass\n"
#: a run that never ends is stopped here: the benchmark then says so
LIMIT = 1800.0


def looping_copy(root: Path) -> Path:
    """The reference's micrograd with relu's rule looping for ever."""
    shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
    engine = root / "micrograd" / "engine.py"
    text = engine.read_text()
    if text.count(RULE) != 1:
        raise SystemExit(f"relu's rule is not where this benchmark expects it in {engine}")
    engine.write_text(text.replace(RULE, LOOP))
    return root


def run(impl: Path, timeout_plugin: bool, cache: Path, repeat: int = 1) -> tuple[float, float, str]:
    """Median wall and CPU seconds of `repeat` pytest runs on `impl` with the oracle's answers
    in `cache`, and the last one's summary line."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/public/micrograd"]
    argv += [f"--impl={impl}"] + ([] if timeout_plugin else ["-p", "no:timeout"])
    env = {**os.environ, CACHE_ENV: str(cache)}
    wall, cpu, out = cpu_timed(argv, repeat, env, ok=(0, 1), timeout=LIMIT)
    summary = next((line for line in reversed(out.splitlines()) if " in " in line), "")
    return wall, cpu, summary.strip("= ")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind; the median is shown")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as tmp:
        looping, cache = looping_copy(Path(tmp)), Path(tmp) / "oracle"
        # makes the oracle's disk cache, the looping run's too: the random-program search
        # tries other programs on a submission that fails, and PyTorch's answers to them
        run(REPO / "reference", True, cache)
        run(looping, True, cache)
        for plugin, label in ((True, "with pytest-timeout"), (False, "without pytest-timeout")):
            figures = {}
            for name, impl in (("correct", REPO / "reference"), ("relu looping", looping)):
                wall, cpu, summary = run(impl, plugin, cache, options.repeat)
                figures[name] = wall, cpu
                print(f"{label:24} {name:13} {wall:7.1f} s wall {cpu:7.1f} s CPU   {summary}")
            (wall0, cpu0), (wall1, cpu1) = figures["correct"], figures["relu looping"]
            print(
                f"{label:24} ratio         {wall1 / wall0:6.2f}x wall {cpu1 / cpu0:6.2f}x CPU  (target <= 3x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
