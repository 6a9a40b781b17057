"""Which cases are forward cases: those that run none of the code students write.

"The untouched template scores only the forward points" needs the forward cases defined
apart from the template, or a template that gives a gradient away would define its own
answer. A case is a *forward case* when, run on the reference, it calls no function that
holds a `### BEGIN SOLUTION` region (a gradient rule, `backward`, the topological sort).
That is what the template can pass: everything else reaches a `raise NotImplementedError`.

`ReachingRunner` grades the reference in this process like `InProcessRunner` and watches
the calls of each case's own function with `sys.setprofile` until the first call into such a
function (then the hook is removed, so a gradient case pays only for its forward part).
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from grader.authoring.template import regions
from grader.case.define import Case
from grader.case.loading import SubmissionError
from grader.case.run import Run
from grader.pipeline import InProcessEngine, Runs


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


class ReachingRunner:
    """The in-process engine, noting for each case whether it reached a solution function."""

    def __init__(self, functions: set[tuple[str, int]]) -> None:
        self.functions = functions
        #: case id -> whether it called a function holding a solution region
        self.reached: dict[str, bool] = {}

    def _watched(self, engine: InProcessEngine, case: Case) -> Run:
        """Run `case`, watching the calls the case's own function makes (not the harness's:
        the micrograd backend probes every op's rule afterwards, for its diagnostics)."""
        hit = False

        def hook(frame: FrameType, event: str, arg: Any) -> None:
            nonlocal hit
            if event == "call" and (frame.f_code.co_filename, frame.f_code.co_firstlineno) in self.functions:
                hit = True
                sys.setprofile(None)

        def watched(*args: Any) -> Any:
            previous = sys.getprofile()
            sys.setprofile(hook)
            try:
                return case.fn(*args)
            finally:
                sys.setprofile(previous)

        run = engine.run(dataclasses.replace(case, fn=watched))
        self.reached[case.id] = hit
        return run

    def run(self, submission: Path, cases: list[Case], yardstick: dict[str, float]) -> Runs:
        engines: dict[str, InProcessEngine | SubmissionError] = {}
        runs: list[Run] = []
        for case in cases:
            if case.assignment not in engines:
                try:
                    engines[case.assignment] = InProcessEngine(submission, case.assignment)
                except SubmissionError as exc:
                    engines[case.assignment] = exc
            engine = engines[case.assignment]
            if isinstance(engine, SubmissionError):
                runs.append(Run(fault=str(engine)))
                self.reached[case.id] = True  # unknown: not counted as forward
            else:
                runs.append(self._watched(engine, case))
        notes = [n for e in engines.values() if not isinstance(e, SubmissionError) for n in e.notes]
        return Runs(runs, notes=notes)
