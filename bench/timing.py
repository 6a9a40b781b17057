"""What every benchmark here needs: the median wall time of a command run in a fresh process."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], repeat: int) -> tuple[float, str]:
    """The median wall time of `repeat` runs of `argv` from the project's root, and the last
    run's standard output; a failed run stops the benchmark with its output."""
    times, out = [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        out = done.stdout
    return statistics.median(times), out
