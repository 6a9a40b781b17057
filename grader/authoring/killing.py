"""Grade mutants of the reference, each in a fresh process, and find the cases none fails.

A mutant's package is imported, so two mutants must never share a process: each runs in a
child of its own (forked where the platform allows, so the suites collected in this process
come along instead of being collected again), at most `jobs` at a time. The child runs the
cases and sends each run back as plain data; the comparison with PyTorch's answers is made
here. A case is *killed* when some mutant fails it, as grading would: wrong numbers, an
error, or running out of time.

Only the cases still alive when a mutant starts are run on it, and of those only the ones
that call the function it changes (`reaches`; the rest cannot notice): which cases end up
killed does not depend on that (a case is killed iff some mutant fails it), only the time.

Limits are grading's own (`grader.case.limits`): a case may take `Limits().timeout` or SLOWER
times as long as the reference took, whichever is longer, cut short once the mutant has hung
repeatedly in one function (an infinite loop in `backward()` would otherwise cost every case
the full timeout). The child tells this process each case's limit as it starts it; a child
stuck where no signal reaches (inside NumPy) is killed, and the case it was on counts as killed.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import os
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader.authoring.mutants import Mutant
from grader.case.define import Case, collect
from grader.case.inprocess import InProcessEngine
from grader.case.loading import SubmissionError
from grader.case.run import Run
from grader.verdict.compare import compare

#: seconds a child may overrun a case's time limit before it is killed from here
GRACE = 5.0
#: address space a child may add to what it inherits, in bytes
MEMORY = 2048 * 2**20


def _slim(run: Run) -> Run:
    """What the comparison reads: the results and how the run ended, not the tape."""
    return Run(results=run.results, failure=run.failure, fault=run.fault, seconds=run.seconds)


def _limit_memory() -> None:
    """No more than MEMORY beyond the address space inherited at the fork."""
    try:
        with open("/proc/self/statm") as fh:
            inherited = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (inherited + MEMORY, resource.RLIM_INFINITY))
    except (OSError, ValueError):
        pass  # not Linux: no limit beyond the machine's


def child(
    mutant: Mutant,
    reference: Path,
    workdir: Path,
    suites_dir: Path,
    ids: list[str],
    timeouts: dict[str, float],
    rules: dict[str, tuple[str, ...]],
    conn: multiprocessing.connection.Connection,
) -> None:
    """Runs in the mutant's own process: write the mutant, import it, run the cases, and send
    `("start", id, seconds)` before each case (with its time limit) and `("done", id, run)`
    after it. `rules`: the ops each case uses, as grading's time limits take them."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)  # what a mutant prints past the engine's capture goes nowhere
        _limit_memory()
        mutant.write(reference, workdir)
        cases = {c.id: c for c in collect(suites_dir, [mutant.assignment], ("public", "hidden"))}
        try:
            engine = InProcessEngine.load(workdir, mutant.assignment)
        except SubmissionError as exc:
            conn.send(("load", str(exc)))
            return
        engine.probe()
        for case_id in ids:
            # the time limit as the yardstick too: once backward() hung on the probe, a case's
            # CPU budget is at least the one grading gives it, so no case counts as killed
            # that grading would let pass
            uses = rules.get(case_id, ())
            seconds = engine.policy.seconds(mutant.assignment, timeouts[case_id], timeouts[case_id], uses)
            conn.send(("start", case_id, seconds))
            try:
                run = engine.run(cases[case_id], timeouts[case_id], needs=uses, seconds=seconds)
            except RecursionError as exc:
                run = Run(fault=f"RecursionError: {exc}")
            conn.send(("done", case_id, _slim(run)))
        conn.send(("end",))
    except BaseException:  # the child's own failure: said to the parent, which counts nothing
        conn.send(("broken", traceback.format_exc()[-2000:]))
    finally:
        conn.close()


def passed(expected: Run, actual: Run) -> bool:
    """Whether grading would give the case its points (the pipeline's `status_of`)."""
    if actual.fault is not None or actual.failure is not None:
        return False
    return not compare(expected.results, actual.results)


@dataclass
class Kills:
    """What the mutants did to the cases."""

    cases: list[str]
    #: case id -> the first mutant seen failing it
    killers: dict[str, str] = field(default_factory=dict)
    #: mutants that ran / that failed at least one case / that could not be imported at all
    ran: int = 0
    killing: int = 0
    unloadable: int = 0
    #: mutants that had nothing left to run (every case of theirs already killed)
    skipped: int = 0
    #: the children's own failures (not a mutant's: a bug here), by mutant id
    broken: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def survivors(self) -> list[str]:
        return [c for c in self.cases if c not in self.killers]


@dataclass
class Job:
    mutant: Mutant
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    ids: list[str]
    current: str | None = None
    since: float = 0.0
    #: the time limit of the case it is on, as the child said
    allowed: float = 0.0
    killed_any: bool = False


def _context() -> multiprocessing.context.BaseContext:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods and sys.platform != "darwin" else "spawn")


def kill(
    mutants: list[Mutant],
    cases: list[Case],
    expected: Callable[[Case], Run],
    reference: Path,
    timeouts: dict[str, float],
    jobs: int = 2,
    progress: Callable[[int, int], None] | None = None,
    reaches: Callable[[Mutant, Case], bool] = lambda mutant, case: True,
    needs: Callable[[Case], Iterable[str]] = lambda case: (),
) -> Kills:
    """Run every mutant (in order, `jobs` at a time) on the cases of its assignment that no
    earlier mutant has killed yet and that `reaches` says it can change. `needs`: the ops a
    case uses (`pipeline.used_by`), so that a mutant whose rule hangs gets the short budget
    on the cases that use it, as grading gives it."""
    started = time.perf_counter()
    rules = {c.id: tuple(sorted(needs(c))) for c in cases}
    result = Kills([c.id for c in cases])
    by_id = {c.id: c for c in cases}
    suites = {c.suites_dir for c in cases}
    if len(suites) > 1:
        raise ValueError(f"cases from more than one suites directory: {sorted(map(str, suites))}")
    suites_dir = suites.pop() if suites else Path(".")
    context = _context()
    queue = list(mutants)
    running: list[Job] = []
    done = 0
    root = Path(tempfile.mkdtemp(prefix="grader-mutants-"))
    workdirs: dict[int, Path] = {}

    def finish(job: Job) -> None:
        nonlocal done
        job.conn.close()
        job.process.join(timeout=5)
        if job.process.is_alive():
            job.process.kill()
            job.process.join()
        running.remove(job)
        shutil.rmtree(workdirs.pop(id(job)), ignore_errors=True)
        result.killing += job.killed_any
        done += 1
        if progress:
            progress(done, len(mutants))

    def killed(job: Job, case_id: str) -> None:
        job.killed_any = True
        result.killers.setdefault(case_id, job.mutant.id)

    # A full collection in a child (the one due before its probe, those its cases bring
    # about) walks every object the child inherited from this process (the reference's
    # graded runs, PyTorch's answers), writing to the page of each: each child copied this
    # process's whole heap. Frozen, the collector leaves it be.
    gc.freeze()
    try:
        while queue or running:
            while queue and len(running) < jobs:
                mutant = queue.pop(0)
                ids = [
                    c.id
                    for c in cases
                    if c.assignment == mutant.assignment and c.id not in result.killers and reaches(mutant, c)
                ]
                if not ids:
                    result.skipped += 1
                    done += 1
                    continue
                receive, send = context.Pipe(duplex=False)
                job = Job(mutant, None, receive, ids)  # type: ignore[arg-type]
                workdir = workdirs[id(job)] = root / f"mutant-{result.ran}"
                job.process = context.Process(
                    target=child,
                    args=(mutant, reference, workdir, suites_dir, ids, timeouts, rules, send),
                    daemon=True,
                )
                job.process.start()
                send.close()
                result.ran += 1
                running.append(job)
            ready = multiprocessing.connection.wait([job.conn for job in running], timeout=0.5)
            for job in [j for j in running if j.conn in ready]:
                try:
                    message = job.conn.recv()
                except (EOFError, OSError):  # the child died: the case it was on failed
                    if job.current is not None:
                        killed(job, job.current)
                    finish(job)
                    continue
                kind = message[0]
                if kind == "start":
                    job.current, job.allowed, job.since = message[1], message[2], time.monotonic()
                elif kind == "done":
                    case_id, run = message[1], message[2]
                    job.current = None
                    if not passed(expected(by_id[case_id]), run):
                        killed(job, case_id)
                elif kind == "load":  # the mutant does not import: every case of it fails
                    result.unloadable += 1
                    for case_id in job.ids:
                        killed(job, case_id)
                    finish(job)
                elif kind == "broken":
                    result.broken[job.mutant.id] = message[1]
                    finish(job)
                else:
                    finish(job)
            now = time.monotonic()
            for job in list(running):
                if job.current is None:
                    continue
                if now - job.since > job.allowed + GRACE:  # stuck where the alarm cannot reach
                    job.process.kill()
                    killed(job, job.current)
                    finish(job)
    finally:
        for job in list(running):
            job.process.kill()
            finish(job)
        shutil.rmtree(root, ignore_errors=True)
        gc.unfreeze()
    result.seconds = time.perf_counter() - started
    return result
