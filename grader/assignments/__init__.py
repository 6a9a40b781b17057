"""The assignments: one folder each, with the same file names in every folder.

    <name>/__init__.py   its vocabulary: the ops (and features) its cases may need, nothing heavy
    <name>/backend.py    the API its cases are written against (`lib`), shared by both sides
    <name>/adapter.py    that API on the submission's engine; runs beside student code
    <name>/programs.py   random expression programs over that API
    <name>/oracle.py     that API on PyTorch in float64; trusted, never copied into the sandbox
    <name>/hints.py      what its diagnostics tell a student about its rules
    <name>/slips.py      the mistakes students make, each with its telltale sign and fix
    <name>/scope.toml    which ops and topics it grades, and for how many points

A third assignment is one more folder here (and its suites under tests/<suite>/<name>/):
this module finds the folders, so nothing else lists them. Everything here but `oracle.py`
runs beside student code; an oracle module is imported only when trusted code asks for it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
#: every assignment, by the name of its folder (and of the package a submission hands in)
NAMES: tuple[str, ...] = tuple(sorted(p.name for p in HERE.iterdir() if (p / "adapter.py").is_file()))


@dataclass(frozen=True)
class Assignment:
    name: str
    #: import the submission's package from a directory -> its modules by short name
    load: Callable[[Path], dict[str, ModuleType]]
    #: modules, trace -> the `lib` that runs cases on the submission
    engine: Callable[..., Any]
    #: files that make a folder named like the assignment its package (besides __init__.py)
    markers: tuple[str, ...] = ()
    #: the functions the template gives whole, by qualified name (its package's `GIVEN`)
    given: frozenset[str] = frozenset()

    def oracle(self, trace: bool = True) -> Any:
        """The PyTorch `lib` for this assignment (imports torch on first use)."""
        module = importlib.import_module(f"{__name__}.{self.name}.oracle")
        return module.ORACLE(trace=trace)

    def folder(self) -> Path:
        return HERE / self.name


#: what a slip's line calls the op whose rule made it, when its detector cannot tell which
SOME_RULE = "a gradient rule"


@dataclass(frozen=True)
class Slip:
    """One common mistake: what gives it away, and one line naming it and its fix.

    `detect` reads what the verdict already has about a failed case (`grader.verdict.
    diagnose.Evidence`: both tapes with each rule probed alone and the gradients after each
    backward() call, the results that differ, the exception) and returns None, or the
    fields `line` is formatted with (`{op}`: the op whose rule made the slip; `at`, the
    expression of the node where the slip is, when it is not where the failure showed). `blame`,
    when given, is the rule the failure is laid at once the slip is known (formatted too).
    `replaces`: the assignment's hints that say the same as `line`, less precisely: a message
    that names the slip does not repeat them. `behind`: another slip that causes this one
    wherever both are seen; one case cannot tell, but the submission's other cases can
    (`pipeline.lay_behind`)."""

    name: str
    line: str
    detect: Callable[[Any], dict[str, str] | None]
    blame: str = ""
    replaces: tuple[str, ...] = ()
    behind: str = ""

    def says(self, fields: dict[str, str]) -> str:
        return self.line.format(**fields)

    def laid_at(self, fields: dict[str, str], otherwise: str) -> str:
        """The rule the failure is laid at once the slip is known (`otherwise`: the slip does
        not say). Where the detector could not tell which rule made the slip, its line says
        SOME_RULE, and the failure is laid at no rule: not at a rule of that name, which the
        class's count would list beside the real ones (`pipeline.lay_unexplained` then lays
        it where the assignment's other failures are)."""
        blamed = self.blame.format(**fields) if self.blame else otherwise
        return "" if blamed == SOME_RULE else blamed


def raised(kind: str, saying: str = "", at: tuple[str, ...] = ()) -> Callable[[Any], dict[str, str] | None]:
    """A slip's detector for an exception the submission raised: of type `kind`, its message
    holding `saying` (RecursionError; TypeError "unhashable type: 'Value'"), and, given `at`,
    laid at one of those parts (a RecursionError is the sort's slip only where the sort
    raised it: an `__rmul__` that calls itself raises one too)."""

    def detect(evidence: Any) -> dict[str, str] | None:
        failure = evidence.failure
        if failure is None or failure.type != kind or saying not in failure.message:
            return None
        return {} if not at or evidence.diagnosis.blame in at else None

    return detect


#: the operator an r-method computes, for its slip's line (`2 * x` calls x.__rmul__(2))
REFLECTED = {
    "__radd__": "+",
    "__rsub__": "-",
    "__rmul__": "*",
    "__rtruediv__": "/",
    "__rpow__": "**",
    "__rmatmul__": "@",
}


def operator_method(function: str) -> bool:
    """Is `function` (a qualified name) a node class's operator method (`Value.__rmul__`)?
    One that recursed calls itself as an operator does for any graph (`calls_itself`); any
    other function that recursed walked the graph, a call per node."""
    method = function.rsplit(".", 1)[-1]
    return "." in function and method.startswith("__") and method.endswith("__")


def calls_itself(line: str) -> Slip:
    """The slip of an operator that calls itself without end (directly, or through the
    operators it uses): a RecursionError whose recursing function (`grader.case.run.
    recursing`, where the failure is laid) is a node class's operator method (`__neg__`,
    `__rmul__`). An operator does the same work for a deep graph as for a small one, so its
    recursion has no end; a sort or a backward that recursed once per node is the recursive
    sort's slip. `line`'s fields: the method, and why an r-operator comes back to itself, where
    it is one (`other * self` with a number as `other`: the number cannot multiply a node, so
    Python asks the node's `__rmul__` again)."""

    def detect(evidence: Any) -> dict[str, str] | None:
        failure = evidence.failure
        if failure is None or failure.type != "RecursionError" or failure.where is None:
            return None
        function = failure.where[2]
        if not operator_method(function):
            return None
        method = function.rsplit(".", 1)[-1]
        why = ""
        if method in REFLECTED:
            op = REFLECTED[method]
            why = (
                f"; `other {op} self` inside {method} is one way there: with a number as `other`, "
                f"Python asks the number first, which cannot do {op} with a node, and hands it back "
                f"to {method}"
            )
        return {"function": function, "why": why}

    return Slip("calls-itself", line, detect)


def unhashable(node_class: str, line: str) -> Slip:
    """The slip of a node class that defines __eq__ (a @dataclass does) and so lost its hash:
    the TypeError surfaces where the first set of nodes is made, and the __eq__ is at fault."""
    detect = raised("TypeError", f"unhashable type: '{node_class}'")
    return Slip("unhashable-node", line, detect, blame=f"{node_class}.__eq__")


def repeated(evidence: Any, tape: Any) -> dict[str, str] | None:
    """A slip's detector: the rules are right (backward is blamed), every node that uses the
    wrong node has its right gradient, and the wrong node's is a whole multiple (2, 3, ...)
    of PyTorch's: what its consumers sent was added more than once (a sort without `visited`
    lists a node once per path to it). `tape`: the tape, or one backward() call's view of it.
    Fields: the node and the multiple."""
    i = evidence.diagnosis.wrong
    if evidence.diagnosis.blame != "backward" or i is None or not tape.actual:
        return None
    got, should = tape.actual[i].get("grad"), tape.expected[i].get("grad")
    if got is None or should is None or got.shape != should.shape or not any(should.data):
        return None
    k = max(range(len(should.data)), key=lambda j: abs(should.data[j]))
    times = round(got.data[k] / should.data[k])
    pairs = zip(got.data, should.data, strict=True)
    if times < 2 or not all(math.isclose(g, e * times, rel_tol=1e-6, abs_tol=1e-9) for g, e in pairs):
        return None
    users = tape.consumers(i)
    if not users or any(tape.differs(j, "grad") for j in users):
        return None
    return {"node": tape.name(i), "times": str(times)}


def get(name: str) -> Assignment:
    found = markers(name)  # an unknown name is a KeyError here
    adapter = importlib.import_module(f"{__name__}.{name}.adapter")
    return Assignment(name, adapter.ENGINE.load, adapter.ENGINE, found, given(name))


def accounts() -> tuple[str, ...]:
    """Every assignment's own accounts of an exception, by name (its package's `ACCOUNTS`)."""
    return tuple(found for name in NAMES for found in importlib.import_module(f"{__name__}.{name}").ACCOUNTS)


def given(name: str) -> frozenset[str]:
    """The functions the template of assignment `name` gives whole, by qualified name (its
    package's `GIVEN`): a case stuck in one was stuck in the code that called it
    (`grader.case.hang.where`)."""
    return importlib.import_module(f"{__name__}.{name}").GIVEN


def markers(name: str) -> tuple[str, ...]:
    """The files that make a folder named `name` the assignment's package (its `__init__.py`
    says; the adapter, which imports numpy for needle, is not needed to find a package)."""
    if name not in NAMES:
        raise KeyError(f"unknown assignment {name!r} (known: {', '.join(NAMES)})")
    return tuple(importlib.import_module(f"{__name__}.{name}").MARKERS)
