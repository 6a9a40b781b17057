"""Graded cases: written once against a backend `lib`, run on two engines.

    @case("micrograd", topic="ops", points=1)
    def test_mul(lib):
        a, b = lib.value(2.0, "a"), lib.value(-3.0, "b")
        c = a * b
        lib.backward(c)
        return {"a": a, "b": b, "c": c}

The function builds an expression, runs backward and returns named results; a returned
node contributes its value and its gradient (`a`, `a.grad`). `params` turns one function
into several cases, one per value. Under pytest each case is a test of its own (the plugin
collects it as a `CaseItem`, runs it on the submission and on PyTorch and compares);
outside pytest, `collect` finds the same cases in the suite files.

A case in a directory named `hidden` belongs to the hidden suite.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.assignments import NAMES as ASSIGNMENTS

SUITES = ("public", "hidden")


@dataclass(frozen=True)
class Case:
    """One graded check: a function of `lib` and an optional parameter."""

    assignment: str
    topic: str
    name: str
    fn: Callable[..., Any] = field(repr=False, compare=False)
    module: str
    suite: str = "public"
    points: float = 1.0
    param_id: str | None = None
    param: Any = None
    trace: bool = True
    description: str = ""
    #: ops the case needs beyond those it applies through `lib` (which are found by running
    #: it): a submission without one of them does not run the case, which is not graded
    needs: tuple[str, ...] = ()
    #: the suite file it was written in (`<suites>/<suite>/<assignment>/test_x.py`)
    path: str = field(default="", compare=False, repr=False)

    @property
    def id(self) -> str:
        suffix = f"[{self.param_id}]" if self.param_id is not None else ""
        return f"{self.assignment}/{self.module}::{self.name}{suffix}"

    @property
    def test_name(self) -> str:
        """Its test's name in pytest's node id (`test_mul[param]`)."""
        suffix = f"[{self.param_id}]" if self.param_id is not None else ""
        return f"{self.fn.__name__}{suffix}"

    @property
    def title(self) -> str:
        suffix = f" [{self.param_id}]" if self.param_id is not None else ""
        return f"{self.name}{suffix}"

    @property
    def suites_dir(self) -> Path:
        return _suites_dir(self.path)

    def run(self, lib: Any) -> Mapping[str, Any]:
        return self.fn(lib) if self.param_id is None else self.fn(lib, self.param)


@functools.lru_cache(maxsize=1024)
def _suites_dir(path: str) -> Path:
    """`<suites>` of a suite file's path, resolved once (a class asks for every case's, per
    submission)."""
    return Path(path).resolve().parents[2]


def _suite_of(path: str) -> str:
    return "hidden" if "hidden" in Path(path).parts else "public"


def case(
    assignment: str,
    *,
    topic: str,
    points: float = 1.0,
    params: Mapping[str, Any] | Iterable[Any] | None = None,
    trace: bool = True,
    needs: Iterable[str] = (),
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a graded case (or one per parameter). See the module docstring.

    `needs` names ops (in the assignment's words, as a scope file does) the case relies on
    without applying them through `lib`; the ops it applies are found by running it.
    `trace=False` is for a deep chain: no tape (a failure names no op), the collector paused,
    and micrograd's visiting order not fixed (see `fix_visiting_order`), so the graph must be
    a chain (each op's other inputs leaves), whose every visiting order is topological."""
    if assignment not in ASSIGNMENTS:
        raise ValueError(f"unknown assignment {assignment!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        path = inspect.getsourcefile(fn) or ""
        module = Path(path).stem
        name = fn.__name__.removeprefix("test_")
        common = dict(
            assignment=assignment,
            topic=topic,
            name=name,
            fn=fn,
            module=module,
            suite=_suite_of(path),
            points=points,
            trace=trace,
            needs=tuple(needs),
            description=(fn.__doc__ or "").strip().split("\n")[0],
            path=path,
        )
        if params is None:
            cases = [Case(**common)]
        else:
            items = params.items() if isinstance(params, Mapping) else ((str(p), p) for p in params)
            cases = [Case(**common, param_id=str(pid), param=value) for pid, value in items]
        return _as_test(fn, cases)

    return decorate


def _as_test(fn: Callable[..., Any], cases: list[Case]) -> Callable[..., Any]:
    """What a suite module holds for `fn`'s cases: a function that carries them
    (`__grader_cases__`). The grader's pytest plugin collects it as one test per case
    (`grader.plugin.CaseItem`); the sandbox's workers and the release read the cases from it."""

    def test() -> None:
        raise RuntimeError(f"{fn.__name__}'s cases are run by the grader's pytest plugin (grader.plugin)")

    test.__name__ = fn.__name__
    test.__qualname__ = fn.__qualname__
    test.__module__ = fn.__module__
    test.__doc__ = fn.__doc__
    test.__grader_cases__ = cases  # type: ignore[attr-defined]
    return test


def cases_in(module: Any) -> list[Case]:
    found: list[Case] = []
    for obj in vars(module).values():
        found.extend(getattr(obj, "__grader_cases__", ()))
    return found


def load_module(path: Path) -> Any:
    """Import one suite file under a private name (it may share its stem with others): its
    stem and a checksum of its path (zlib's: hashlib would add 5 ms to a worker's start)."""
    name = f"_grader_suite_{path.stem}_{zlib.crc32(str(path.resolve()).encode()):08x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def collect(
    root: str | Path, assignments: Iterable[str] = ASSIGNMENTS, suites: Iterable[str] = ("public",)
) -> list[Case]:
    """Every case under `root/<suite>/<assignment>/test_*.py`, in file and source order."""
    root = Path(root)
    found: list[Case] = []
    for suite in suites:
        for assignment in assignments:
            for path in sorted((root / suite / assignment).glob("test_*.py")):
                found.extend(cases_in(load_module(path)))
    return found
