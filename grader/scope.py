"""An assignment's scope as data: which ops and topics it grades, and for how many points.

A scope file is TOML with one table per assignment it covers:

    [needle]
    ops = ["EWiseAdd", "AddScalar", ...]      # the ops the course asks students to write
    features = []                             # other things a case may rely on ("int-axes")
    [needle.topics]                           # the graded topics, each with the factor
    forward = 1                               # its cases' declared points are multiplied by
    ops = 2

`grader/assignments/<name>/scope.toml` is each assignment's default: everything the shipped
suites grade, at their declared points (a test keeps it in step with the suites). A course
that asks for less passes its own file: `python -m grader grade --scope FILE`, `pytest
--scope FILE`, `python -m grader notebooks --scope FILE`; an assignment the file does not
cover keeps its default. Default scopes describe the shipped suites: they apply to those,
not to another suites directory.

A case is in scope when its topic is listed and everything it needs is among `ops` and
`features`: the ops it applies (recorded when it runs on PyTorch, `Oracle.needs`) and those
it declares (`@case(needs=...)`). Out-of-scope cases are not run and not counted.

A bad file (missing, not TOML, an unknown assignment, op, feature, topic or key, a factor
that is not a positive number) is a `ScopeError` whose message is one line.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grader.assignments import HERE as ASSIGNMENTS_DIR
from grader.assignments import NAMES
from grader.case.define import Case, collect

FILE = "scope.toml"
KEYS = {"ops", "features", "topics"}


class ScopeError(ValueError):
    """A scope file that cannot be used; the message is one line, for the user."""


def vocabulary(assignment: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ops and the features an assignment's cases may need, in its own words."""
    words = importlib.import_module(f"grader.assignments.{assignment}")
    return tuple(words.OPS), tuple(words.FEATURES)


@dataclass(frozen=True)
class Scope:
    assignment: str
    ops: frozenset[str]
    features: frozenset[str]
    #: graded topic -> the factor its cases' points are multiplied by, in the file's order
    topics: Mapping[str, float] = field(hash=False)
    source: str = ""

    @property
    def excluded(self) -> frozenset[str]:
        """What a case may not need: the vocabulary's words that the scope leaves out."""
        ops, features = vocabulary(self.assignment)
        return frozenset(ops + features) - self.ops - self.features

    def admits_topic(self, case: Case) -> bool:
        return case.assignment != self.assignment or case.topic in self.topics

    def admits(self, case: Case, needs: Iterable[str]) -> bool:
        return case.assignment != self.assignment or (
            case.topic in self.topics and not (set(needs) & self.excluded)
        )

    def scaled(self, case: Case) -> Case:
        factor = self.topics.get(case.topic, 1.0) if case.assignment == self.assignment else 1.0
        return case if factor == 1.0 else replace(case, points=case.points * factor)


def _fail(source: str, message: str) -> ScopeError:
    return ScopeError(f"scope {source}: {message}")


def _names(value: Any, what: str, known: Iterable[str], source: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(source, f"{what} must be a list of names")
    unknown = sorted(set(value) - set(known))
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise _fail(source, f"unknown {what[:-1]} {names} (known: {', '.join(known)})")
    return frozenset(value)


def known_topics(assignment: str, suites_dir: Path) -> list[str] | None:
    """The topics of the assignment's suites in `suites_dir`, in order; None without suites."""
    suites = [s for s in ("public", "hidden") if (Path(suites_dir) / s / assignment).is_dir()]
    if not suites:
        return None
    return list(dict.fromkeys(case.topic for case in collect(suites_dir, [assignment], suites)))


def parse(data: Mapping[str, Any], source: str, suites_dir: Path | None = None) -> list[Scope]:
    """The scopes one file describes (one per assignment table)."""
    if not data:
        raise _fail(source, f"no assignment table (one of {', '.join(f'[{n}]' for n in NAMES)})")
    scopes = []
    for assignment, table in data.items():
        if assignment not in NAMES:
            raise _fail(source, f"unknown assignment [{assignment}] (known: {', '.join(NAMES)})")
        if not isinstance(table, dict):
            raise _fail(source, f"[{assignment}] must be a table")
        extra = sorted(set(table) - KEYS)
        if extra:
            keys = ", ".join(extra)
            raise _fail(source, f"[{assignment}] has unknown key(s) {keys} (known: ops, features, topics)")
        where = f"{source} [{assignment}]"
        ops, features = vocabulary(assignment)
        chosen_ops = _names(table.get("ops", list(ops)), "ops", ops, where)
        chosen_features = _names(table.get("features", list(features)), "features", features, where)
        topics = table.get("topics")
        known = known_topics(assignment, suites_dir) if suites_dir is not None else None
        if topics is None:
            if known is None:
                raise _fail(where, "lists no [topics], and there are no suites to take them from")
            topics = dict.fromkeys(known, 1)
        if not isinstance(topics, dict) or not topics:
            raise _fail(where, "topics must be a table of topic = points factor")
        for topic, factor in topics.items():
            if known is not None and topic not in known:
                raise _fail(where, f"unknown topic {topic!r} (known: {', '.join(known)})")
            if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor > 0:
                raise _fail(where, f"topic {topic!r}: the points factor must be a positive number")
        scopes.append(
            Scope(assignment, chosen_ops, chosen_features, {t: float(f) for t, f in topics.items()}, source)
        )
    return scopes


def load(path: str | Path, suites_dir: Path | None = None) -> list[Scope]:
    """Read a scope file; topics are checked against the suites in `suites_dir` when given."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise _fail(str(path), "no such file") from None
    except OSError as exc:
        raise _fail(str(path), f"cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise _fail(str(path), "not a text file") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(str(path), f"not valid TOML: {exc}") from None
    return parse(data, str(path), suites_dir)


def default(assignment: str) -> Scope:
    """The assignment's own scope file: everything its shipped suites grade."""
    (scope,) = load(ASSIGNMENTS_DIR / assignment / FILE)
    return scope


def resolve(files: Iterable[str | Path], suites_dir: Path, shipped: bool) -> dict[str, Scope]:
    """The scope of each assignment: from the files given, else (for the shipped suites) the
    default. Two files for one assignment are an error."""
    chosen: dict[str, Scope] = {}
    for path in files:
        for scope in load(path, suites_dir):
            if scope.assignment in chosen:
                first = chosen[scope.assignment].source
                raise _fail(str(path), f"[{scope.assignment}] is already given by {first}")
            chosen[scope.assignment] = scope
    if shipped:
        for name in NAMES:
            chosen.setdefault(name, default(name))
    return chosen


def select(cases: list[Case], scopes: Mapping[str, Scope], needs: Any = None) -> list[Case]:
    """The cases in scope, with their points scaled. `needs(cases)` gives what each case needs
    (`Oracle.needs`, after running PyTorch); it is asked only when a scope leaves an op out."""
    kept = [c for c in cases if c.assignment not in scopes or scopes[c.assignment].admits_topic(c)]
    if needs is not None and any(scopes[c.assignment].excluded for c in kept if c.assignment in scopes):
        needed = needs(kept)
        kept = [c for c in kept if c.assignment not in scopes or scopes[c.assignment].admits(c, needed[c.id])]
    return [scopes[c.assignment].scaled(c) if c.assignment in scopes else c for c in kept]
