"""What every benchmark here needs: the median wall time (and CPU time) of a command run in a
fresh process, and the floor under grading: the CPU the submitted code alone needs."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_once(
    argv: list[str],
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    ok: tuple[int, ...] = (0,),
    timeout: float | None = None,
) -> tuple[float, str]:
    """One run of `argv`: its wall seconds and its standard output. A run that exits with a
    status not in `ok`, or is still running after `timeout` seconds, stops the benchmark
    with what it printed."""
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{' '.join(argv)} did not end within {timeout:g} s") from None
    seconds = time.perf_counter() - started
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds, done.stdout


def timed(argv: list[str], repeat: int) -> tuple[float, str]:
    """The median wall time of `repeat` runs of `argv` from the project's root, and the last
    run's standard output."""
    runs = [run_once(argv) for _ in range(repeat)]
    return statistics.median(wall for wall, _ in runs), runs[-1][1]


def busy_seconds() -> float:
    """Seconds that every core of the machine has been busy since boot (Linux's /proc/stat:
    user, nice, system, interrupts, steal), the kernel's own threads included."""
    with open("/proc/stat") as fh:
        ticks = [int(t) for t in fh.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def busy_timed(
    argv: list[str], repeat: int, env: dict[str, str] | None = None, cwd: Path = REPO
) -> tuple[float, float, str]:
    """The median wall time and the median CPU seconds of `repeat` runs of `argv`, and the
    last run's standard output. CPU time, unlike wall time, does not grow when the cores are
    shared among more processes than they can run at once.

    The CPU time is the machine's busy time while the command ran, not a resource usage: no
    process reaps bubblewrap's sandboxed workers, nor the class run's fork server and the
    processes forked from it, into its own, and the kernel's work for them (namespaces made
    and torn down) is no process's at all. Exact on a machine with no other work (what every
    benchmark here needs anyway); counted in the kernel's ticks, a hundredth of a second."""
    walls, figures, out = [], [], ""
    for _ in range(repeat):
        busy = busy_seconds()
        wall, out = run_once(argv, cwd, env)
        figures.append(busy_seconds() - busy)
        walls.append(wall)
    return statistics.median(walls), statistics.median(figures), out


def grade_cpu(args: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """`busy_timed` for `python -m grader ARGS`: the grader, its sandbox and every worker."""
    return busy_timed([sys.executable, "-m", "grader", *args], repeat, env)


def cpu_timed(
    argv: list[str],
    repeat: int,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    ok: tuple[int, ...] = (0,),
    timeout: float | None = None,
) -> tuple[float, float, str]:
    """The median wall time and the median CPU time (user + system, the command's and the
    children's it waited for) of `repeat` runs of `argv`, and the last run's standard output.
    Precise to the microsecond, for a command whose every process is reaped (no sandbox: see
    `busy_timed`). On a machine shared with other work, CPU time is the steadier of the two."""
    walls, cpus, out = [], [], ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall, out = run_once(argv, cwd, env, ok, timeout)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(wall)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus), out


def cpu_timed_together(
    commands: dict[str, list[str]],
    repeat: int,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    ok: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, tuple[float, float]]:
    """`cpu_timed` of several commands, run in turn (one run of each, `repeat` times over):
    their medians compare with each other even where the machine's speed drifts during the
    measurement, which run after run of one command and then of the next would not."""
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            wall, cpu, _ = cpu_timed(argv, 1, env, cwd, (ok or {}).get(name, (0,)))
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in commands}


#: runs every case of one assignment's given suites on the reference in this process, as a
#: sandbox worker runs them (no tapes read; a deep case's graph frozen, not collected), and
#: prints the CPU seconds of the cases alone: not the imports, the suites' loading or a compare
_CASES_ALONE = """
import json, sys, time
from grader import assignments
from grader.case.define import collect
from grader.case.run import run_case
from grader.case.limits import case_garbage
from grader.pipeline import REPO
name, suites = sys.argv[1], sys.argv[2:]
cases = collect(REPO / "tests", [name], suites)
assignment = assignments.get(name)
modules = assignment.load(REPO / "reference")
cpu = 0.0
for case in cases:
    with case_garbage(not case.trace):
        started = time.process_time()
        run_case(case, assignment.engine(modules, trace=case.trace), [REPO], tape=False)
        cpu += time.process_time() - started
print(json.dumps({"cpu": cpu}))
"""


def cases_alone(assignment: str, repeat: int = 3, suites: tuple[str, ...] = ("public", "hidden")) -> float:
    """CPU seconds the reference takes to run every case of `assignment` (of `suites`) once, in
    one process: the floor under any grading that runs every case of a correct submission. The
    median of `repeat` runs: on a shared machine one run's CPU time drifts with the others' load."""
    figures = []
    command = [sys.executable, "-c", _CASES_ALONE, assignment, *suites]
    for _ in range(repeat):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
        figures.append(json.loads(done.stdout.strip().splitlines()[-1])["cpu"])
    return statistics.median(figures)
