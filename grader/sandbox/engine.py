"""`SandboxEngine`: run a submission's cases in worker processes, one case after another.

One worker serves one assignment, and runs each of its suites (public before hidden) in a
phase of its own: a child forked from it, or, for its last phase, the worker itself (see
`grader.case.worker`). The hidden suite enters the worker's `lib/` only once the public
phase's child is gone and has left no process behind: nothing a hidden case sees can reach
public feedback. When a case times out, crashes the child, exhausts its memory or answers
with anything malformed, that case gets a fault and a fresh worker takes the remaining ones.
A submission that cannot be imported faults every case of that phase. The total budget
bounds it all.

The time limits are `grader.case.limits`'s, as everywhere cases run: each assignment's
first worker runs the probe before its first case; if backward() hung on it, the worker
enforces each later case's short CPU budget itself (a case out of CPU fails as timed out,
where it was stuck, and the worker goes on: no restart). A timed-out case's message says
where the submission was stuck (see `hang`), and repeated hangs cut later cases short.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from grader.assignments import given
from grader.case import hang
from grader.case.define import Case
from grader.case.limits import PROBE_WAIT, REPEATS, TimePolicy
from grader.case.quantity import MalformedResult, Quantity
from grader.case.run import Run, exit_fault
from grader.sandbox import bwrap, confine, scratch
from grader.sandbox.process import (
    SUBMISSION_PROCESS,
    Crash,
    Fault,
    Limits,
    Timeout,
    WorkerProcess,
    malformed,
    out_of_memory,
)
from grader.sandbox.protocol import parse_notes, parse_run, parse_tape
from grader.sandbox.root import SandboxError, add_suite, build, copy_grader
from grader.verdict.compare import needs_tape
from grader.verdict.integrity import Finding, extra_threads, libraries_in

SUITE_ORDER = ("public", "hidden")
#: seconds a phase's child may take to exit after its last case (it exits at once)
PHASE_END = 5.0
#: seconds a timed-out worker has to dump its stacks (`hang`) before it is killed
DUMP_WAIT = 0.5
UNCHECKED = f"{SUBMISSION_PROCESS} exited before its result could be checked"
THREADS = (
    "{what} started {count} thread(s) still running {when}: threads are not allowed in graded code "
    "(what they do depends on timing, so would the score)"
)
#: a thread that outlives its case was started around the worker's refusal (`grader.case.threads`):
#: on purpose. Once REPEATS cases of an assignment did so, its other cases are not run (each
#: would cost a fresh worker and a second of waiting for the thread to go)
THREADS_AGAIN = (
    "not run: {count} cases of {assignment} started threads still running after them, around the "
    "grader's refusal; threads are not allowed in graded code"
)


class BudgetExhausted(Fault):
    pass


class Budget:
    """The wall-clock time left for one submission."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


def strongest_isolation(switch_user: bool = False) -> str:
    """The strongest isolation this machine allows: bubblewrap (Linux with user namespaces, or
    root), else the home-made mount and network namespaces (root), else none."""
    if bwrap.available(switch_user):
        return "bubblewrap"
    return "mount namespace" if confine.available() else "none"


@contextlib.contextmanager
def shared_grader(user: str | None = None) -> Iterator[Path]:
    """Where one copy of the grader's worker modules for many runs (a class's submissions)
    goes, in a run directory of its own that lasts as long as they do: bound read-only into
    every bubblewrap worker (`SandboxEngine`'s `grader_copy`), it is the same for every
    student, and no worker can change it. A run that makes its own copy writes some seventy
    files and removes them again, and on ext4 a file made just after others were removed is
    slow to make (the allocator passes over recently freed inodes): 20 copies of the reference
    graded on micrograd's 11 cases of addition kept the machine busy 7.2 core-s with a copy
    per submission, 6.1 with one for the class (five alternating runs of each). The first run
    that binds it makes it (`copy_once`): a class's submissions run in processes forked from
    a fork server that has compiled the modules already, where the class run would compile
    them again before its first submission could start (a quarter of a second). With
    `user`, the workers' user may read it."""
    with scratch.run_directory() as tmp:
        if user is not None:
            os.chmod(tmp, 0o711)
        yield tmp / "grader"


def copy_once(copy: Path, other_user: bool) -> Path:
    """`copy` (see `shared_grader`), made now if no run has made it yet: beside it, then
    renamed into place, so that runs starting together never bind a copy half made."""
    if copy.is_dir():
        return copy
    aside = Path(tempfile.mkdtemp(prefix="grader-copy-", dir=copy.parent))
    try:
        os.rename(copy_for_workers(aside, other_user), copy)
    except OSError:
        if not copy.is_dir():
            raise  # not another run's copy in place first: a real failure
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return copy


def copy_for_workers(folder: Path, other_user: bool) -> Path:
    """The grader's worker modules copied into `folder/grader`; readable by anyone where the
    workers run as a user of their own (`other_user`)."""
    copy = folder / "grader"
    copy_grader(copy)
    if other_user:
        readable(copy)
    return copy


def resolve_user(user: str | None) -> tuple[int, int] | None:
    """The (uid, gid) workers run as, for a user's name or number; None: the grader's own."""
    if user is None:
        return None
    if os.geteuid() != 0:
        raise SandboxError(f"running workers as {user!r} needs the grader to run as root")
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except (KeyError, ValueError):
        raise SandboxError(f"no such user: {user!r}") from None
    if entry.pw_uid == 0:
        raise SandboxError(f"{user!r} is root: workers must run as an unprivileged user")
    return entry.pw_uid, entry.pw_gid


def readable(tree: Path) -> None:
    """Let anyone read `tree` (the worker's user reads its `lib/` and the grader's modules)."""
    for folder, _dirs, files in os.walk(tree):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)


def hand_over(root: Path, lib: Path, work: Path, user: tuple[int, int]) -> None:
    """Let the worker's user through `root`, read `lib` and own `work`: nothing more."""
    uid, gid = user
    os.chmod(root, 0o711)
    readable(lib)
    for folder, dirs, files in os.walk(work):
        os.lchown(folder, uid, gid)
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), uid, gid)


class SandboxEngine:
    """Runs cases on the submission in `directory`; `flags` gets what integrity saw at run time."""

    def __init__(
        self,
        directory: Path,
        suites_dir: Path,
        limits: Limits | None = None,
        budget: Budget | None = None,
        hidden: Iterable[Path] = (),
        isolation: str | None = None,
        user: str | None = None,
        expected: Callable[[str], Mapping[str, Quantity | None] | None] | None = None,
        needs: Callable[[Case], Iterable[str]] | None = None,
        grader_copy: Path | None = None,
    ) -> None:
        """`user` (the grader must be root): workers run as this unprivileged user.
        `expected`: a case id's expected results, so that only a case whose results are
        wrong has its tape sent (None: every case that ran to its end sends it). `needs`: the
        ops a case uses (by PyTorch's run), so that a case that uses an op whose rule hung on
        the probe gets a short CPU budget (None: only a hung backward() gives one).
        `grader_copy`: a copy of the grader's worker modules that outlives this run
        (`shared_grader`: a class's), bound read-only into each bubblewrap worker instead of
        the run's own."""
        self.grader_copy = grader_copy
        self.needs = needs
        self.expected = expected
        #: (uid, gid) the workers become before any student code runs, or None
        self.user = resolve_user(user)
        self.directory = Path(directory).resolve()
        self.suites_dir = Path(suites_dir)
        self.limits = limits or Limits()
        self.budget = budget or Budget(self.limits.budget)
        #: paths the worker must not see (the suites, reference/, the oracle cache)
        self.hidden = [Path(self.suites_dir), self.directory, *hidden]
        #: how workers are isolated: "bubblewrap", else "mount namespace" (root), else "none"
        self.isolation = isolation or (strongest_isolation(True) if self.user else strongest_isolation())
        #: whether workers run with a confined file system (they see an allow-list, or these
        #: paths covered)
        self.confined = self.isolation != "none"
        self.flags: dict[str, Finding] = {}
        #: what loading the submission noted (stand-ins for absent modules, a failed __init__.py)
        self.notes: list[str] = []
        self.timeouts: dict[str, float] = {}
        #: how long each case may run: what the probe found, where cases hung
        self.policy = TimePolicy(self.limits.timeout)
        #: assignment -> cases after which threads were still running (see THREADS_AGAIN)
        self.threaded: Counter[str] = Counter()
        #: assignment -> why its import timed out: its other suite's worker would import the
        #: same code, and wait as long, for the same verdict
        self.import_hung: dict[str, str] = {}
        #: whether every worker so far runs under the seccomp filter
        self.filtered = True
        #: case id -> the time it may take at least, from PyTorch's (see pipeline.yardstick)
        self.yardstick: dict[str, float] = {}
        #: the run's one copy of the grader's worker modules, bound into each wrapped worker
        #: (None: each worker's lib/ holds its own copy)
        self.grader: Path | None = None
        #: assignment -> its live worker, between phases
        self.workers: dict[str, WorkerProcess] = {}
        #: whether the phase being served ended as planned, its child exiting by itself under
        #: the seccomp filter (no process of its own can outlive it): then its worker may
        #: begin another phase
        self.phase_over = False

    def run_all(
        self,
        cases: Iterable[Case],
        timeouts: dict[str, float] | None = None,
        yardstick: dict[str, float] | None = None,
    ) -> list[Run]:
        """Each case's run, in order. `timeouts` may give a case more than `limits.timeout`;
        `yardstick` is how long each case may take at least (it sizes the short budgets)."""
        cases = list(cases)
        self.timeouts = timeouts or {}
        self.yardstick = yardstick or {}
        runs: dict[str, Run] = {}
        groups: dict[tuple[str, str], list[Case]] = {}
        for case in sorted(cases, key=lambda c: SUITE_ORDER.index(c.suite)):
            groups.setdefault((case.assignment, case.suite), []).append(case)
        left = Counter(assignment for assignment, _ in groups)  # each assignment's groups still to run
        with scratch.run_directory() as tmp, confine.undumpable():
            self.grader = None
            if self.isolation == "bubblewrap" and groups:  # one copy, bound read-only into each
                other_user = self.user is not None
                if self.grader_copy is not None:
                    self.grader = copy_once(self.grader_copy, other_user)
                else:
                    self.grader = copy_for_workers(tmp, other_user)
            roots: dict[str, tuple[Path, Path]] = {}
            try:
                for (assignment, suite), group in groups.items():
                    if assignment not in roots:
                        roots[assignment] = self._root(tmp, assignment)
                    lib, work = roots[assignment]
                    added = add_suite(lib, self.suites_dir, suite, assignment)
                    if self.user is not None:
                        readable(added.parent)
                    left[assignment] -= 1
                    self._run_group(lib, work, assignment, suite, group, runs, last=not left[assignment])
            finally:
                while self.workers:
                    self.workers.popitem()[1].close()
        return [runs[case.id] for case in cases]

    def _root(self, tmp: Path, assignment: str) -> tuple[Path, Path]:
        """The `lib/` and `work/` of one assignment's workers (see `grader.sandbox.root`)."""
        root = tmp / assignment
        root.mkdir()
        lib, work = build(root, self.directory, assignment, grader=self.grader is None)
        if self.user is not None:
            hand_over(tmp, lib, work, self.user)
            os.chmod(root, 0o711)
        return lib, work

    def _worker(self, lib: Path, work: Path, assignment: str) -> WorkerProcess:
        """The assignment's worker, started now if it has none (or its last one failed)."""
        if assignment not in self.workers:
            confined = self.isolation == "mount namespace"  # and then it becomes the user itself
            job = {
                "assignment": assignment,
                "memory_mib": self.limits.memory,
                "file_mib": self.limits.file_size,
                "user": list(self.user) if self.user is not None and not confined else None,
            }
            wrapped = self.isolation == "bubblewrap"
            preexec = confine.preexec(work, self.hidden, self.user) if confined else None
            self.workers[assignment] = WorkerProcess(
                lib,
                work,
                job,
                self.limits,
                preexec,
                wrapped=wrapped,
                switch_user=self.user is not None,
                grader=self.grader,
            )
        return self.workers[assignment]

    def _run_group(
        self,
        lib: Path,
        work: Path,
        assignment: str,
        suite: str,
        group: list[Case],
        runs: dict[str, Run],
        last: bool,
    ) -> None:
        """Run `group` (one suite's cases) on the assignment's worker, in phases: a fresh
        worker for the rest after a fault. The `last` group of the assignment runs in the
        worker itself, which then exits."""
        remaining = group
        while remaining:
            if assignment in self.import_hung:
                for case in remaining:
                    runs[case.id] = Run(fault=self.import_hung[assignment])
                return
            if self.threaded[assignment] >= REPEATS:
                fault = THREADS_AGAIN.format(count=self.threaded[assignment], assignment=assignment)
                for case in remaining:
                    runs[case.id] = Run(fault=fault)
                return
            if self.budget.left() <= 0:
                for case in remaining:
                    runs[case.id] = Run(fault=f"grading budget exhausted ({self.budget.seconds:g} s)")
                return
            worker = self._worker(lib, work, assignment)
            worker.begin(
                {
                    "suite": suite,
                    "ids": [c.id for c in remaining],
                    "probe": self.policy.probing(assignment),
                    "cpu": {c.id: cpu for c in remaining if (cpu := self._cpu(c))},
                    "last": last,
                }
            )
            self.phase_over = False
            try:
                remaining = self._serve(worker, work, assignment, remaining, runs)
            finally:
                if last or not (self.phase_over and worker.end(min(PHASE_END, max(self.budget.left(), 0.1)))):
                    self.workers.pop(assignment).close()  # the next phase gets a fresh worker

    def _timeout(self, case: Case) -> float:
        given = self.timeouts.get(case.id, self.limits.timeout)
        return self.policy.seconds(
            case.assignment, self.yardstick.get(case.id, 0.0), given, self._needs(case)
        )

    def _cpu(self, case: Case) -> float:
        return self.policy.cpu(case.assignment, self.yardstick.get(case.id, 0.0), self._needs(case)) or 0.0

    def _needs(self, case: Case) -> list[str]:
        return list(self.needs(case)) if self.needs is not None else []

    def _probe(self, worker: WorkerProcess, assignment: str, cases: list[Case], runs: dict[str, Run]) -> bool:
        """Wait for the probe's answer. True: go on with these cases on this worker; False:
        start another (with short CPU budgets, if backward() hung)."""
        try:
            answer = self._wait(worker, PROBE_WAIT)
        except BudgetExhausted as fault:
            for case in cases:
                runs[case.id] = Run(fault=str(fault))
            return False
        except Crash:
            self.policy.hung[assignment] = False  # not a hang; the cases will say what it is
            return False
        except Fault:  # no answer in PROBE_WAIT: it hung where CPU time could not end it
            self.policy.hung[assignment] = True
            return False
        if answer.get("kind") != "probe":  # out of step: start afresh, without a probe
            self.policy.hung[assignment] = False
            return False
        rules = answer.get("rules")
        rules = [r for r in rules if isinstance(r, str)] if isinstance(rules, list) else []
        self.policy.probed(assignment, (answer.get("hung") is True, rules))
        return not any(self._cpu(case) for case in cases)  # else a worker that enforces budgets

    def _timed_out(self, case: Case, run: Run) -> Run:
        """A case the worker ended when its CPU budget ran out: a timeout, saying where."""
        location = run.failure.where if run.failure is not None else None
        fault = self.policy.out_of_budget(self._cpu(case), location, case.assignment, self._needs(case))
        return Run(fault=fault, seconds=run.seconds, stuck_in=location[2] if location else "")

    def _deadline(self, seconds: float) -> tuple[float, bool]:
        """When to give up waiting, and whether it is the budget (not the timeout) that ends it."""
        mine = time.monotonic() + seconds
        return min(mine, self.budget.deadline), self.budget.deadline < mine

    def _wait(
        self,
        worker: WorkerProcess,
        seconds: float,
        work: Path | None = None,
        case: Case | None = None,
        assignment: str = "",
    ) -> dict:
        """The worker's next message. On a timeout, with `work`, say where it was stuck (in
        the code of `case`'s assignment, or of `assignment` while none runs)."""
        deadline, by_budget = self._deadline(seconds)
        try:
            return worker.receive(deadline)
        except Timeout:
            if by_budget:
                raise BudgetExhausted(f"grading budget exhausted ({self.budget.seconds:g} s)") from None
            if work is None:
                raise Fault(f"timed out after {seconds:.3g} s") from None
            raise self._hung(worker, seconds, work, case, assignment) from None

    def _hung(
        self, worker: WorkerProcess, seconds: float, work: Path, case: Case | None, assignment: str
    ) -> Fault:
        """A timeout, saying where the worker was stuck; a case with a CPU budget (this was
        its backstop) is no hang that the cut-off counts."""
        budgeted = case is not None and bool(self._cpu(case))
        location = self._stuck_at(worker, work, given(case.assignment if case is not None else assignment))
        message = self.policy.timed_out(seconds, location, count=not budgeted)
        return Fault(message, stuck_in=location[2] if location else "")

    @staticmethod
    def _stuck_at(worker: WorkerProcess, work: Path, given: frozenset[str]) -> tuple[str, int, str] | None:
        """Where the worker's case is stuck (not in the functions the template gives whole,
        `given`: see `hang.where`): its stacks, asked for now, read as they come for at most
        DUMP_WAIT seconds (a live process writes them at once)."""
        if not worker.ask_stacks():
            return None
        deadline = time.monotonic() + DUMP_WAIT
        while True:
            dump = worker.read_noise()
            if hang.complete(dump) or not worker.wait_noise(deadline):
                return hang.where(dump, work, given)

    def _serve(
        self, worker: WorkerProcess, work: Path, assignment: str, cases: list[Case], runs: dict[str, Run]
    ) -> list[Case]:
        """Run `cases` on this worker; return those left when it failed."""
        try:
            first = self._wait(worker, max(self.limits.timeout, 30.0))  # sent before any student code runs
        except BudgetExhausted as fault:
            for case in cases:
                runs[case.id] = Run(fault=str(fault))
            return []
        except Fault as fault:
            raise SandboxError(
                f"the sandbox worker did not start: {fault}; {worker.noise[-2000:].decode(errors='replace')}"
            ) from None
        if first.get("kind") != "collected" or first.get("missing"):
            raise SandboxError(f"the sandbox worker could not collect the cases: {first}"[:2000])
        filtered = first.get("seccomp") is True
        self.filtered = self.filtered and filtered
        try:
            loaded = self._wait(worker, self.limits.timeout, work, assignment=assignment)
            # a child that could not import the submission says so and exits
            self.phase_over = filtered and loaded.get("kind") == "load_error"
        except Fault as fault:
            loaded = {"kind": "load_error", "message": f"importing {assignment} failed: {fault}"}
            if str(fault).startswith("timed out") and not isinstance(fault, BudgetExhausted):
                self.import_hung[assignment] = loaded["message"]
        if loaded.get("kind") == "ready":
            try:
                notes = parse_notes(loaded.get("notes", []))
                self._note([self._local(n, work) for n in notes], cases[0].suite)
            except MalformedResult:
                loaded = {"kind": "load_error", "message": f"importing {assignment} failed: malformed notes"}
        if loaded.get("kind") != "ready":
            message = loaded.get("message") if loaded.get("kind") == "load_error" else None
            if type(message) is not str:
                message = f"importing {assignment} failed: {malformed('message')}"
            for case in cases:
                runs[case.id] = Run(fault=self._local(message, work))
            return []
        if not self._check(worker, assignment):
            for case in cases:
                runs[case.id] = Run(fault=f"importing {assignment} failed: {UNCHECKED}")
            return []
        if count := extra_threads(worker.pid):
            fault = THREADS.format(what=f"importing {assignment}", count=count, when="after the import")
            for case in cases:
                runs[case.id] = Run(fault=fault)
            return []
        worker.proceed()
        if self.policy.probing(assignment):
            if not self._probe(worker, assignment, cases, runs):
                return [case for case in cases if case.id not in runs]
            worker.proceed()
        for i, case in enumerate(cases):
            started = time.monotonic()
            try:
                answer = self._wait(worker, self._timeout(case), work, case)
                run = parse_run(answer, case.id)
                if answer["tape"] is None and self._wants_tape(case, run):
                    worker.ask_tape()
                    run.tape = parse_tape(self._wait(worker, self._timeout(case), work, case), case.id)
                run.seconds = time.monotonic() - started
            except (Fault, MalformedResult) as fault:
                reason = str(fault) if isinstance(fault, Fault) else f"{malformed('result')}: {fault}"
                during = " during the case" if isinstance(fault, Crash) else ""
                runs[case.id] = Run(fault=reason + during, stuck_in=getattr(fault, "stuck_in", ""))
                return cases[i + 1 :]
            if not self._check(worker, assignment, last=i == len(cases) - 1):
                runs[case.id] = Run(fault=UNCHECKED)
                return cases[i + 1 :]
            if count := extra_threads(worker.pid):  # they would go on running into later cases
                runs[case.id] = Run(fault=THREADS.format(what="the case", count=count, when="after it"))
                self.threaded[assignment] += 1
                return cases[i + 1 :]  # a fresh worker for the rest
            if run.failure is not None and run.failure.type == "CaseTimedOut":
                run = self._timed_out(case, run)
            elif run.failure is not None and run.failure.type == "SystemExit":  # as in process
                fault = self._local(exit_fault(run.failure), work)
                run = Run(fault=fault, output=run.output, seconds=run.seconds)
            elif run.failure is not None:
                if run.failure.type == "MemoryError":
                    runs[case.id] = Run(fault=out_of_memory(self.limits.memory))
                    return cases[i + 1 :]  # a fresh worker: this one may hold the memory still
                run.failure.message = self._local(run.failure.message, work)
            runs[case.id] = run
            self._note([self._local(n, work) for n in run.notes], case.suite)
            worker.proceed()
        self.phase_over = filtered
        return []

    def _wants_tape(self, case: Case, run: Run) -> bool:
        """Does the verdict need this run's tape (`compare.needs_tape`)?"""
        return needs_tape(self.expected(case.id) if self.expected is not None else None, run)

    def _note(self, notes: list[str], suite: str) -> None:
        """Loading notes, once each (every worker loads the submission anew), from public
        phases only. The report shows its notes to the student whatever the visibility of
        hidden cases, and a note's text is the submission's to choose (an `__init__.py` that
        fails says what it likes): in a hidden phase, with the hidden suite in its `lib/`
        and hidden inputs in its hands. The same code loads the same way in both phases, so
        an honest submission's notes are all said by its public phase."""
        if suite == "public":
            self.notes += [note for note in notes if note not in self.notes]

    def _local(self, text: str, work: Path) -> str:
        """Messages name the submission's own directory, as the in-process path does."""
        return text.replace(str(work), str(self.directory))

    def _check(self, worker: WorkerProcess, assignment: str, last: bool = True) -> bool:
        """Is the worker, waiting for our go, still there to be checked? Flag any autodiff
        library mapped into it. Between a phase's first check and its `last`, its maps are
        read again only once its address space has changed size: a library is mapped by
        growing it, and reading the maps of a process with NumPy costs the grader more than
        checking a case's results (reading them after every case took a twentieth of the
        CPU a submission's grading costs; its size changes after a few cases in a hundred)."""
        size = worker.mapped_pages()
        if size is None:
            return False
        if not last and size == worker.maps_read_at:
            return True
        found = libraries_in(worker.read_proc("maps"))
        for library in sorted(found or ()):
            self.flags.setdefault(assignment, Finding(library, "loaded while its cases ran"))
        worker.maps_read_at = size
        return found is not None
