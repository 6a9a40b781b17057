"""What every benchmark here needs: the median wall time (and CPU time) of a command run in a
fresh process, and the floor under grading: the CPU the submitted code alone needs."""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
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


#: runs `python -m grader ARGS` in this interpreter and reports on stderr, as its last line,
#: the CPU seconds of the whole grading: its own, its reaped children's, and the sandboxed
#: workers' (bubblewrap never reaps those into anyone's resource usage: see CpuLedger)
_CPU_DRIVER = """
import json, resource, sys
from grader.cli import main
from grader.sandbox.process import CpuLedger
status = main(sys.argv[1:])
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + CpuLedger.seconds
print(json.dumps({"cpu": cpu}), file=sys.stderr)
sys.exit(status)
"""


def grade_cpu(args: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """The median wall time and the median CPU seconds of `repeat` runs of `python -m grader
    ARGS` (the grader, its sandbox and every worker), and the last run's standard output. CPU
    time, unlike wall time, does not grow when other work shares the machine's cores."""
    walls, figures, out = [], [], ""
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CPU_DRIVER, *args], cwd=REPO, capture_output=True, text=True, env=env
        )
        walls.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"grader {' '.join(args)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        figures.append(json.loads(done.stderr.strip().splitlines()[-1])["cpu"])
        out = done.stdout
    return statistics.median(walls), statistics.median(figures), out


def cpu_timed(
    argv: list[str], repeat: int, env: dict[str, str] | None = None, cwd: Path = REPO
) -> tuple[float, float]:
    """The median wall time and the median CPU time (user + system, the command and the
    children it waited for) of `repeat` runs of `argv` from the project's root. On a machine
    shared with other work, CPU time is the steadier of the two."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


#: runs every case of one assignment's given suites on the reference in this process, as a
#: sandbox worker runs them (no tapes read; a deep case's graph frozen, not collected), and
#: prints the CPU seconds of the cases alone: not the imports, the suites' loading or a compare
_CASES_ALONE = """
import json, sys, time
from grader import assignments
from grader.case.define import collect
from grader.case.run import run_case
from grader.case.limits import deep_case
from grader.pipeline import REPO
name, suites = sys.argv[1], sys.argv[2:]
cases = collect(REPO / "tests", [name], suites)
assignment = assignments.get(name)
modules = assignment.load(REPO / "reference")
cpu = 0.0
for case in cases:
    with deep_case(not case.trace):
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
