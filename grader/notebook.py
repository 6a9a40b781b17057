"""Grade the classes a notebook defines: what the nbgrader course's test cells call.

    grade_cell("micrograd", "ops", globals())

runs the topic's public cases, and its hidden ones too when nbgrader autogrades (nbgrader
sets NBGRADER_EXECUTION), on the engine the notebook's cells built (every cell shares one
namespace, so the namespace stands for each of the package's modules), compares them with
PyTorch's runs, prints the same diagnostics as pytest and `python -m grader grade` (the
verdict's message) and returns the points earned. nbgrader takes a test cell's last
expression, a number, as the cell's partial credit. The call is the cell's whole source, the
same in every copy of the notebook, so nbgrader's checksum of the cell never changes.

Everything goes to stdout, never to stderr: nbgrader gives no credit to a cell that wrote
to stderr, so the student's own output and warnings are captured while a case runs. A case
runs for as long as `python -m grader grade` would let it (`Limits().timeout`, or SLOWER
times PyTorch's time, cut to SHORT_TIMEOUT once REPEATS cases hung in one function); a
backward() that does not return on the sandbox's tiny probe graph gives each case its short
CPU budget instead, as in the sandbox; a loop that a signal cannot stop is left to
nbgrader's cell timeout.

The hidden suite's report is framed by `grader.report.cell`'s HIDDEN_BEGIN and HIDDEN_END
lines, so that the feedback preprocessor (`grader.report.nbgrader_feedback`) can cut it down
to its points. What a cell prints is `grader.report.cell.printed` of its results: the fast
path into a course (`grade-class --nbgrader`) writes the same text into the autograded
notebook.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grader.case.define import Case, collect
from grader.case.hang import WallTimeout, wall_limit
from grader.case.inprocess import InProcessEngine
from grader.case.limits import SHORT_TIMEOUT, SLOWER, Limits, TimePolicy
from grader.case.run import Run
from grader.pipeline import SUITES_DIR, used_by, verdict
from grader.report.cell import printed
from grader.report.model import CaseResult
from grader.verdict.compare import compare
from grader.verdict.oracle import Oracle, oracle_from

#: the package a submission hands in, and its modules, for each assignment
LAYOUT: dict[str, tuple[str, ...]] = {"micrograd": ("engine", "nn"), "needle": ("autograd", "ops", "init")}
#: the class a notebook must define before its cases can run
ENTRY = {"micrograd": "Value", "needle": "Tensor"}
SUITES_ENV = "GRADER_SUITES"
TIMEOUT_ENV = "GRADER_CASE_TIMEOUT"
#: set by nbgrader in the kernels it runs: "autograde" when grading, "validate" when validating
EXECUTION_ENV = "NBGRADER_EXECUTION"


def suites_dir() -> Path:
    return Path(os.environ.get(SUITES_ENV) or SUITES_DIR)


# ---- the cases of a topic: one list, shared with the notebook generator ----


@dataclass
class Topic:
    name: str
    public: list[Case] = field(default_factory=list)
    hidden: list[Case] = field(default_factory=list)

    def cases(self, suite: str) -> list[Case]:
        return self.public if suite == "public" else self.hidden

    def points(self, suite: str | None = None) -> float:
        chosen = (self.public + self.hidden) if suite is None else self.cases(suite)
        return sum(c.points for c in chosen)


_TOPICS: dict[tuple[str, Path], list[Topic]] = {}


def topics(assignment: str, root: Path | None = None) -> list[Topic]:
    """The assignment's topics in the order their public cases come, each with its cases.
    This is the one list the notebook's test cells and the generator are made from."""
    root = Path(root or suites_dir()).resolve()
    key = (assignment, root)
    if key not in _TOPICS:
        table: dict[str, Topic] = {}
        for case in collect(root, [assignment], ("public", "hidden")):
            table.setdefault(case.topic, Topic(case.topic)).cases(case.suite).append(case)
        _TOPICS[key] = list(table.values())
    return _TOPICS[key]


def in_scope(topic: Topic, needs: Callable[[Case], set[str]], scale: float = 1.0, without=()) -> Topic:
    """The topic's cases that need nothing in `without`, worth `scale` times their points:
    a scope (`grader.scope`) as a test cell carries it."""
    left_out = set(without)

    def keep(cases: list[Case]) -> list[Case]:
        kept = [c for c in cases if not (left_out and needs(c) & left_out)]
        return [c if scale == 1.0 else replace(c, points=c.points * scale) for c in kept]

    return Topic(topic.name, keep(topic.public), keep(topic.hidden))


def topic(assignment: str, name: str, root: Path | None = None) -> Topic:
    for t in topics(assignment, root):
        if t.name == name:
            return t
    raise KeyError(f"{assignment} has no topic {name!r}")


# ---- the notebook's namespace as the package's modules ----


class NamespaceModule:
    """A module whose attributes are a namespace's names: setting one sets the global
    (needle's LAZY_MODE is read by functions whose globals are that namespace)."""

    def __init__(self, name: str, namespace: dict[str, Any]) -> None:
        object.__setattr__(self, "__name__", name)
        object.__setattr__(self, "_namespace", namespace)

    def __getattr__(self, key: str) -> Any:
        try:
            return self._namespace[key]
        except KeyError:
            raise AttributeError(f"the notebook defines no {key!r}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        self._namespace[key] = value


def modules_from(assignment: str, namespace: dict[str, Any]) -> dict[str, Any]:
    view = NamespaceModule(assignment, namespace)
    return {assignment: view, **{sub: view for sub in LAYOUT[assignment]}}


def code_roots(namespace: dict[str, Any]) -> list[Path]:
    """Directories of the files the notebook's own code was compiled from (a kernel's
    cells are files too), so a failure can name the innermost frame of the student's code."""
    name = namespace.get("__name__")
    files: set[str] = set()
    for obj in list(namespace.values()):
        if getattr(obj, "__module__", None) != name:
            continue
        members = vars(obj).values() if isinstance(obj, type) else (obj,)
        for member in members:
            code = getattr(getattr(member, "fget", member), "__code__", None)
            if code is not None and not code.co_filename.startswith("<"):
                files.add(code.co_filename)
    return sorted({Path(file).resolve().parent for file in files})  # each file resolved once


# ---- running a case with a time limit ----


class Runner:
    """Runs cases on a notebook's engine the way `python -m grader grade` scores them."""

    def __init__(self, oracle: Oracle | None = None, limits: Limits | None = None) -> None:
        self.oracle = oracle or oracle_from()
        self.limits = limits or Limits()
        self.prepared: set[tuple[str, str, Path]] = set()
        #: how long each case may run (`grader.case.limits`): probed afresh in each cell
        self.policy = TimePolicy(self.limits.timeout)
        #: the class the hangs were counted on (a kernel outlives a student's fix)
        self.counted: weakref.ref[type] | None = None

    def timeout(self, case: Case) -> float:
        given = os.environ.get(TIMEOUT_ENV)
        base = float(given) if given else self.limits.timeout
        yardstick = self.yardstick(case)
        return self.policy.seconds(case.assignment, yardstick, max(base, yardstick))

    def yardstick(self, case: Case) -> float:
        return SLOWER * self.oracle.seconds.get(case.id, 0.0)

    def count_hangs_of(self, engine: Any) -> None:
        """Start the hang counts afresh for a new engine class: a student who fixed a hang and
        ran the class's cell again gets each case's full time limit back in the same kernel."""
        if self.counted is None or self.counted() is not engine:
            self.policy.hangs.clear()
            try:
                self.counted = weakref.ref(engine)
            except TypeError:  # not a class (the notebook named something else Value)
                self.counted = None

    def expected(self, case: Case, root: Path) -> Run:
        key = (case.assignment, case.suite, Path(root))  # $GRADER_SUITES may name another root
        if key not in self.prepared:
            self.prepared.add(key)
            self.oracle.prepare(collect(root, [case.assignment], (case.suite,)), root)
        return self.oracle.expected(case)

    def needs(self, case: Case, root: Path) -> set[str]:
        """What the case needs (for a scope), from its run on PyTorch."""
        self.expected(case, root)
        return self.oracle.needs(case)

    def run(self, case: Case, modules: dict[str, Any], roots: list[Path], root: Path) -> Run:
        """One case on the in-process engine, within its time limit (the short CPU budget the
        sandbox gives it too, once backward() hung on the probe); the tape is read only when
        the results are wrong."""
        engine = InProcessEngine(case.assignment, modules, roots, self.policy)

        def wrong(run: Run) -> bool:
            return bool(compare(self.expected(case, root).results, run.results))

        self.expected(case, root)
        needs = used_by(self.oracle)(case)
        return engine.run(case, self.yardstick(case), needs=needs, seconds=self.timeout(case), tape=wrong)

    def check(self, cases: list[Case], namespace: dict[str, Any], root: Path) -> list[CaseResult]:
        """Each case's result. Before the first, as the sandbox does, backward() runs on a tiny
        graph (the probe); if it does not return, each case gets a short CPU budget, so a
        backward() that never returns costs a cell about a second, not ten per case. Probed
        again in each cell: the student may have fixed the engine and run its cell again."""
        results = []
        self.policy.hung.clear()
        roots = code_roots(namespace)  # once a cell, not once a case (2 ms each in a kernel)
        for case in cases:
            name = ENTRY[case.assignment]
            if name not in namespace:
                fault = Run(fault=f"the notebook defines no {name}: run the cells above first")
                results.append(verdict(case, Run(), fault))
                continue
            self.count_hangs_of(namespace[name])
            modules = modules_from(case.assignment, namespace)
            with warnings.catch_warnings():  # what the case printed is in its run's output
                warnings.simplefilter("ignore")
                actual = self.run(case, modules, roots, root)
                failed = actual.failure is not None or actual.fault is not None or bool(actual.missing)
                expected = Run() if failed else self.expected(case, root)
            results.append(verdict(case, expected, actual))
        return results


_RUNNER: Runner | None = None


def runner() -> Runner:
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = Runner()
    return _RUNNER


def backward_for_picture(output: Any, seconds: float = SHORT_TIMEOUT) -> None:
    """`output.backward()`, as a notebook's picture cell runs it before drawing the graph: for
    at most `seconds` of wall time, and never an error. The picture's graph has a handful of
    nodes, on which a correct backward(), however slow, takes microseconds. A backward() not
    written yet (the released notebook), one that raises and one that never returns all leave
    the gradients as they are, say so in one line on stdout, and the picture still shows the
    graph and its values. Without the limit, a backward() that never returns would hold the
    cell until the student interrupts it, or until nbgrader's cell timeout (five minutes of
    `nbgrader autograde` for each such submission)."""
    try:
        with wall_limit(seconds):
            output.backward()
    except WallTimeout:
        print(f"backward() did not return within {seconds:g} s; the picture shows no gradients")
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"[:300] if str(exc) else type(exc).__name__
        print(f"backward() raised {message}; the picture shows the gradients as they are")


def autograding() -> bool:
    """Whether nbgrader runs this kernel to autograde (the hidden cases run then)."""
    return os.environ.get(EXECUTION_ENV) == "autograde"


def grade_topic(
    assignment: str,
    name: str,
    suite: str,
    namespace: dict[str, Any],
    *,
    scale: float = 1.0,
    without: tuple[str, ...] = (),
) -> float:
    """Run one topic's cases of one suite on the notebook's engine; print the diagnostics
    to stdout; return the points earned. A notebook made for a scope passes it on: cases that
    need anything in `without` are not run, and each case is worth `scale` times its points."""
    root = suites_dir()
    cases = _scoped(assignment, name, root, scale, without).cases(suite)
    with contextlib.redirect_stderr(sys.stdout):
        results = runner().check(cases, namespace, root)
    print(printed(results, name, suite))
    return sum(r.points for r in results)


def _scoped(assignment: str, name: str, root: Path, scale: float, without: tuple[str, ...]) -> Topic:
    return in_scope(topic(assignment, name, root), lambda c: runner().needs(c, root), scale, without)


def grade_cell(
    assignment: str,
    name: str,
    namespace: dict[str, Any],
    *,
    scale: float = 1.0,
    without: tuple[str, ...] = (),
) -> float:
    """A test cell: the topic's public cases, then, when nbgrader autogrades and the topic has
    hidden cases, its hidden ones; returns the points earned (the cell's last expression)."""
    earned = grade_topic(assignment, name, "public", namespace, scale=scale, without=without)
    if autograding() and _scoped(assignment, name, suites_dir(), scale, without).hidden:
        earned += grade_topic(assignment, name, "hidden", namespace, scale=scale, without=without)
    return float(earned)
