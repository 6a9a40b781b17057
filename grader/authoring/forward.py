"""Which cases are forward cases: those that run none of the code students write.

"The untouched template scores only the forward points" needs the forward cases defined
apart from the template, or a template that gives a gradient away would define its own
answer. A case is a *forward case* when, run on the reference, it calls no function that
holds a `### BEGIN SOLUTION` region (a gradient rule, `backward`, the topological sort).
That is what the template can pass: everything else reaches a `raise NotImplementedError`.

`ReachingRunner` grades the reference in this process like `InProcessRunner` and watches
each case's calls: whether its own function called such a function, and which of the
reference's functions its whole run called. The second tells `grader check` which cases a
mutant can change at all: one in a function a case never calls cannot. It watches with
cProfile's C profiler, one while the case's own function runs and one around it: a Python
hook on every call made the needle reference's grading 2.8x slower than running it
unwatched (a 10**5-op chain makes millions of calls), cProfile 2.1x, with the same
answers (but for `__del__`, run wherever the garbage is collected).
"""

from __future__ import annotations

import ast
import cProfile
import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.authoring.template import regions
from grader.case.define import Case
from grader.case.inprocess import InProcessEngine
from grader.case.loading import SubmissionError
from grader.case.run import Run
from grader.pipeline import Runs


def solution_functions(reference: Path, assignments: tuple[str, ...] | list[str]) -> set[tuple[str, int]]:
    """(resolved file, first line) of every function whose body holds a solution region,
    as a code object names itself (`co_filename`, `co_firstlineno`)."""
    found: set[tuple[str, int]] = set()
    for name in assignments:
        for path in sorted((reference / name).rglob("*.py")):
            text = path.read_text()
            marked = [(r.start + 1, r.end + 1) for r in regions(text.splitlines(), str(path))]
            if not marked:
                continue
            for node in ast.walk(ast.parse(text)):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                end = node.end_lineno or node.lineno
                # the innermost function where a region starts (its END marker, a comment, lies
                # past the function's last statement)
                inner = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
                own = [
                    start
                    for start, _ in marked
                    if node.lineno < start <= end
                    and not any(n.lineno < start <= (n.end_lineno or 0) for n in inner)
                ]
                if own:
                    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                    found.add((str(path.resolve()), first))
    return found


Code = tuple[str, int]  # (co_filename, co_firstlineno): a function of the reference


class ReachingRunner:
    """The in-process engine, noting for each case whether its own function reached a
    solution function, and every function of the reference the case's run called at all."""

    def __init__(self, functions: set[Code], files: set[str]) -> None:
        self.functions = functions
        self.files = files  # the reference's resolved module files
        #: case id -> whether it called a function holding a solution region
        self.reached: dict[str, bool] = {}
        #: case id -> the reference's functions its run called (with those run on import)
        self.calls: dict[str, set[Code]] = {}

    def _codes(self, profiler: cProfile.Profile) -> set[Code]:
        """The reference's functions `profiler` saw called."""
        found = (entry.code for entry in profiler.getstats())
        return {
            (c.co_filename, c.co_firstlineno)
            for c in found
            if not isinstance(c, str) and c.co_filename in self.files
        }

    def _profiled(
        self, run: Callable[[], Any], calls: set[Code], profiler: cProfile.Profile | None = None
    ) -> Any:
        """`run()`, adding the reference's functions it calls (seen by `profiler`) to `calls`."""
        profiler = profiler or cProfile.Profile(builtins=False)
        previous = sys.getprofile()
        profiler.enable()
        try:
            return run()
        finally:
            profiler.disable()
            sys.setprofile(previous)
            calls |= self._codes(profiler)

    def _watched(self, engine: InProcessEngine, case: Case, on_import: set[Code], yardstick: float) -> Run:
        """Run `case`, telling the calls of the case's own function from the harness's (the
        probe before the first case, which runs backward(), is run before the watching starts):
        the case's function runs under a profiler of its own, the harness's code under another."""
        own = cProfile.Profile(builtins=False)
        harness = cProfile.Profile(builtins=False)

        def watched(*args: Any) -> Any:
            harness.disable()
            own.enable()
            try:
                return case.fn(*args)
            finally:
                own.disable()
                harness.enable()

        engine.probe()
        calls: set[Code] = set(on_import)
        run = self._profiled(
            lambda: engine.run(dataclasses.replace(case, fn=watched), yardstick), calls, harness
        )
        reached = self._codes(own)
        self.reached[case.id] = bool(reached & self.functions)
        self.calls[case.id] = calls | reached
        return run

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        engines: dict[str, InProcessEngine | SubmissionError] = {}
        on_import: dict[str, set[Code]] = {}
        runs: list[Run] = []
        for case in cases:
            if case.assignment not in engines:
                on_import[case.assignment] = set()
                try:
                    engines[case.assignment] = self._profiled(
                        functools.partial(InProcessEngine.load, submission, case.assignment),
                        on_import[case.assignment],
                    )
                except SubmissionError as exc:
                    engines[case.assignment] = exc
            engine = engines[case.assignment]
            if isinstance(engine, SubmissionError):
                runs.append(Run(fault=str(engine)))
                self.reached[case.id] = True  # unknown: not counted as forward
            else:
                watched = self._watched(engine, case, on_import[case.assignment], yardstick.get(case.id, 0.0))
                runs.append(watched)
        notes = [n for e in engines.values() if not isinstance(e, SubmissionError) for n in e.notes]
        return Runs(runs, notes=notes)
