"""Run one case on one backend and keep only plain data: results, tape, or the error."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

from grader.assignments import operator_method
from grader.case import hang
from grader.case.backend import MissingOp
from grader.case.define import Case
from grader.case.quantity import Quantity
from grader.case.trace import Step

MAX_TEXT = 2000
#: (exception type, its message) -> what a student left in the code, where the exception's
#: own words do not say it: a prompt or a debugger stop that nothing answers while grading
LEFT_IN = {
    ("EOFError", "EOF when reading a line"): "input() left in the code gets no answer while grading",
    ("BdbQuit", ""): "a debugger stop (breakpoint(), pdb.set_trace()) left in the code is not answered "
    "while grading",
}
#: the characters of what a case printed that are kept (within a wire message's bound)
OUTPUT_KEPT = 3900


@dataclass
class Failure:
    """An exception raised by the submission while a case ran."""

    type: str
    message: str
    #: innermost frame of the submission's own code: (file, line, function)
    where: tuple[str, int, str] | None = None
    #: the op gradient rule (needle's `X.gradient`) it was raised in or under, if any (for a
    #: RecursionError in a helper of the student's, the part that called it: `entered_from`):
    #: what the failure is laid at and a slip's detector reads, where the message says it in words
    rule: str | None = None

    @property
    def not_implemented(self) -> bool:
        return self.type == "NotImplementedError"

    def to_plain(self) -> dict[str, Any]:
        where = list(self.where) if self.where else None
        return {"type": self.type, "message": self.message, "where": where, "rule": self.rule}


@dataclass
class Run:
    """What one engine produced for one case."""

    results: dict[str, Quantity | None] = field(default_factory=dict)
    tape: list[dict[str, Quantity | None]] = field(default_factory=list)
    #: the oracle's run only: each op the case recorded (nothing reads a submission's)
    steps: list[Step] = field(default_factory=list)
    failure: Failure | None = None
    #: tape index -> the name the case returned it under
    names: dict[int, str] = field(default_factory=dict)
    #: tape indices that backward was called on
    outputs: list[int] = field(default_factory=list)
    #: the results that are the gradient of a node backward was called on (`y.grad`), with
    #: or without a tape
    seeds: list[str] = field(default_factory=list)
    #: what the submission printed while the case ran (bounded)
    output: str = ""
    #: what the case needed (`Backend.needs`): on the oracle, what a scope must allow
    needs: list[str] = field(default_factory=list)
    #: the ops the case needs that the submission does not have: the case is not graded
    missing: list[str] = field(default_factory=list)
    #: set by trusted code when the case could not run to the end: a timeout, a crash, a
    #: load error, a malformed result. The case scores zero with this as its message.
    fault: str | None = None
    #: a case that ran out of time: the function of the submission it was stuck in, which its
    #: failure is laid at (`hints.function_blame`) for the count of what each part costs
    stuck_in: str = ""
    #: seconds the case took on the submission, as the grader's clock saw it (0 if unknown)
    seconds: float = 0.0
    #: what loading the submission noted while the case ran (a stand-in for an absent module)
    notes: list[str] = field(default_factory=list)
    #: on the oracle's run: the rules the case exercises (`grader.verdict.graph.case_ops`), kept
    #: with it so that a warm cache need not read the steps of a case that passed
    ops: list[str] | None = None
    #: on the oracle's run: whether a step runs a rule alone (needle's `op_gradient`), kept
    #: like `ops`: a case without an output runs no rule unless it does (`pipeline.used_by`)
    rules_alone: bool | None = None

    def runs_rules_alone(self) -> bool:
        """`rules_alone`, found in the steps (and kept) where the run was not told it."""
        if self.rules_alone is None:
            self.rules_alone = any(step.op.endswith(".gradient") for step in self.steps)
        return self.rules_alone


class Bounded(io.TextIOBase):
    """Keeps the first `limit` characters written and counts the rest."""

    def __init__(self, limit: int = OUTPUT_KEPT) -> None:
        self.limit, self.parts, self.kept, self.dropped = limit, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = str(text)
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def getvalue(self) -> str:
        more = f"\n... ({self.dropped} more characters)" if self.dropped else ""
        return "".join(self.parts) + more


def function_name(code: CodeType) -> str:
    """`Value.__mul__._backward` rather than `Value.__mul__.<locals>._backward`."""
    return code.co_qualname.replace(".<locals>", "")


def defined_at(function: Any) -> tuple[str, int, str] | None:
    """Where `function` is defined, as `describe_exception` names a place: a failure that the
    grader finds (not one raised there) is laid at it. None: not a Python function."""
    code = getattr(function, "__code__", None)
    return None if code is None else (Path(code.co_filename).name, code.co_firstlineno, function_name(code))


def said(exc: BaseException) -> str:
    """`str(exc)`, which may run the submission's code (a KeyError's message is its key's
    repr, a Value's `__repr__`): where that raises too, the message says so, and the case
    is reported as any other that raised. Left to propagate, it ended the sandbox's worker
    in every such case, each then saying only that the submission's process exited."""
    try:
        return str(exc)
    except Exception as inner:
        return f"(no message: the submission's __repr__ or __str__ raised {type(inner).__name__} making it)"


def describe_exception(exc: BaseException, roots: list[Path], given: frozenset[str] = frozenset()) -> Failure:
    """Keep the type, a bounded message and the innermost frame inside the submission. For a
    case that ran out of time, the innermost frame of the student's own code: not one of the
    functions the template gives whole (`given`: see `hang.where`). For a RecursionError, the
    innermost frame of the function that recursed (`recursing`). An exception raised in a
    function given whole (Reshape.compute, handed a shape it cannot take) keeps that place,
    and the message names the student's own line that called it (a helper of theirs, inside
    the rule that was running): the given line is right, and it is not where to look."""
    where = getattr(exc, "where", None)  # an account of the exception may say where
    where = where if isinstance(where, tuple) and len(where) == 3 else None
    rule = None  # the innermost op gradient rule (needle's `X.gradient`) on the way
    passed = given if isinstance(exc, (hang.CaseTimedOut, hang.WallTimeout)) else frozenset()
    own = None  # the innermost frame not in `passed`
    mine = None  # the innermost frame not in `given`: the student's own
    frames: list[tuple[str, int, str]] = []  # the submission's, outermost first
    tb = exc.__traceback__
    while tb is not None:
        filename = Path(tb.tb_frame.f_code.co_filename)
        if any(root in filename.parents for root in roots):
            where = (filename.name, tb.tb_lineno, function_name(tb.tb_frame.f_code))
            frames.append(where)
            own = own if where[2] in passed else where
            mine = mine if where[2] in given else where
            if where[2].endswith(".gradient"):
                rule = where
        tb = tb.tb_next
    where = own or where
    if isinstance(exc, RecursionError) and frames:
        where = recursing(frames)
        rule = where if where[2].endswith(".gradient") else entered_from(frames, where)
    message = said(exc)
    left_in = LEFT_IN.get((type(exc).__name__, message))
    if left_in is not None:
        message = f"{message}: {left_in}" if message else left_in
    if len(message) > MAX_TEXT:
        message = message[:MAX_TEXT] + " ..."
    caller = mine if mine not in (None, where, rule) and not isinstance(exc, RecursionError) else None
    running = f"while running {rule[2]}, {rule[0]} line {rule[1]}" if rule not in (None, where) else ""
    if caller is not None:
        running = f", {running}" if running else ""
        message += f" (called from {caller[2]}, {caller[0]} line {caller[1]}{running})"
    elif running:
        message += f" (raised {running})"
    return Failure(type(exc).__name__, message, where, rule[2] if rule is not None else None)


def entered_from(
    frames: list[tuple[str, int, str]], where: tuple[str, int, str]
) -> tuple[str, int, str] | None:
    """Of a RecursionError's frames (outermost first), the one that started the recursion of
    `where`'s function, when that is a helper of the student's, defined on its own (a method
    `Value._build_topo`, a function `build_topo`) and called from another part (backward, the
    sort): the failure is that part's, as it is when the helper is nested in it. None for an
    operator method (`__rmul__` calling itself is the operator's own slip), a nested helper
    (already laid at the function it is nested in), or a recursion with no caller of the
    submission's."""
    function = where[2]
    if operator_method(function):
        return None
    first = next(i for i, frame in enumerate(frames) if frame[2] == function)
    caller = frames[first - 1] if first > 0 else None
    if caller is None or function.startswith(caller[2] + "."):
        return None
    return caller


def recursing(frames: list[tuple[str, int, str]]) -> tuple[str, int, str]:
    """Of a RecursionError's frames (outermost first), the innermost frame of the function
    that recursed: the one with the most frames on the stack. Python's limit stops the
    recursion wherever the next call falls, often in a helper or a gradient rule that the
    recursing function calls (a recursive backward stopped inside MulScalar's rule): that is
    not where the mistake is."""
    counts = Counter(name for _, _, name in frames)
    most = max(counts.values())
    return next(frame for frame in reversed(frames) if counts[frame[2]] == most)


#: what a case's run lets through, for its caller to say: the case's time running out, the
#: submission ending the process (`exited`), and Ctrl-C (a person's, where a person runs the
#: cases: the sandbox's worker catches it as the submission's own). Any other exception, a
#: `GeneratorExit` or the submission's own subclass of BaseException too, is the case's failure.
PASSED_THROUGH = (hang.CaseTimedOut, hang.WallTimeout, SystemExit, KeyboardInterrupt)


def exited(exc: SystemExit) -> str:
    """`sys.exit(3) was called`: what ends a process, said where the grading goes on."""
    return f"sys.exit({'' if exc.code is None else repr(exc.code)}) was called"


def exit_failure(exc: SystemExit, roots: list[Path]) -> Failure:
    """A case that called sys.exit() (or exit()), as a failure the sandbox's worker can send:
    its `exit_fault` is the case's fault wherever it ran."""
    return Failure("SystemExit", exited(exc), describe_exception(exc, roots).where)


def exit_fault(failure: Failure, during: str = " during the case") -> str:
    """`sys.exit(0) was called during the case in Value.__mul__._backward (engine.py, line 52)`;
    `during=""` for an import."""
    return f"{failure.message}{during}{hang.describe(failure.where)}"


def _cause(lib: Any, exc: BaseException) -> BaseException:
    """The backend's better account of an exception, if it has one (needle: a gradient rule
    that returned a NumPy array, whatever later code tripped over it)."""
    explain = getattr(lib, "explain_exception", None)
    try:
        return (explain(exc) if explain else None) or exc
    except Exception:
        return exc


def run_case(
    case: Case,
    lib: Any,
    roots: list[Path] | None = None,
    tape: bool = True,
    given: frozenset[str] = frozenset(),
) -> Run:
    """Run `case` on `lib`. With `roots` (the submission's directories), an exception
    becomes a `Failure`; without (the oracle), it propagates: a broken oracle case is a bug.
    `tape=False` leaves the tape unread (`lib.read_tape()` reads it later, if need be).
    `given`: the functions the template gives whole (`describe_exception`).

    A case whose declared needs the submission lacks does not run; one that stops on an op
    the submission lacks (`MissingOp`) is not graded either. Everything else is graded."""
    if roots is not None and case.needs:
        missing = lib.lacking(case.needs)
        if missing:
            return Run(needs=list(case.needs), missing=missing)
    try:
        returned = case.run(lib)
        results = lib.flatten(returned)
        read = lib.read_tape() if tape else []
    except MissingOp as exc:
        if roots is None:
            raise
        return Run(needs=lib.needs(), missing=exc.needs)
    except BaseException as exc:
        if roots is None or isinstance(exc, PASSED_THROUGH):
            raise
        failure = describe_exception(_cause(lib, exc), roots, given)
        return Run(needs=lib.needs(), failure=failure)
    return Run(
        results=results,
        tape=read,
        # only the oracle's steps are read (by the verdict and the diagnosis): a submission's
        # would cost a 5000-op chain more than its backward()
        steps=list(lib.tape.steps) if roots is None else [],
        names=dict(lib.names),
        outputs=list(lib.tape.outputs),
        seeds=sorted(lib.seeds),
        needs=sorted({*lib.needs(), *case.needs}),
    )
