"""Copies of the reference engines with some ops taken out, as a course that never asked for
them would hand in: micrograd's `Value` without the methods, needle's ops module without
the op classes and their helpers (so `Tensor.__pow__` with a tensor exponent finds no
`EWisePow`)."""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: the ops the core-only guarantee is about, in each assignment's words
REMOVED = {"micrograd": ("tanh", "exp"), "needle": ("Tanh", "Exp", "EWisePow")}
#: needle's helper for each op class taken out with it
HELPERS = {"Tanh": "tanh", "Exp": "exp", "EWisePow": "power"}


def _cut(text: str, nodes: Iterable[ast.stmt]) -> str:
    """`text` without the source lines of `nodes`."""
    lines = text.splitlines(keepends=True)
    drop = {i for node in nodes for i in range(node.lineno - 1, node.end_lineno)}
    return "".join(line for i, line in enumerate(lines) if i not in drop)


def without_methods(path: Path, cls: str, names: Iterable[str]) -> None:
    names = set(names)
    tree = ast.parse(path.read_text())
    (klass,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    gone = [n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in gone} == names, f"{path} has no {names - {n.name for n in gone}}"
    path.write_text(_cut(path.read_text(), gone))


def without_definitions(path: Path, names: Iterable[str]) -> None:
    names = set(names)
    tree = ast.parse(path.read_text())
    gone = [n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef) and n.name in names]
    assert {n.name for n in gone} == names, f"{path} has no {names - {n.name for n in gone}}"
    path.write_text(_cut(path.read_text(), gone))


def reference_without(root: Path, removed: dict[str, Iterable[str]] = REMOVED) -> Path:
    """`root` holding both reference packages, less the ops in `removed`."""
    for name in ("micrograd", "needle"):
        shutil.copytree(REPO / "reference" / name, root / name)
    without_methods(root / "micrograd" / "engine.py", "Value", removed.get("micrograd", ()))
    classes = list(removed.get("needle", ()))
    without_definitions(root / "needle" / "ops.py", [*classes, *(HELPERS[c] for c in classes)])
    return root
