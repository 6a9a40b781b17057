"""Which grader source files a file needs: its `grader...` imports, followed transitively.

The sandbox ships exactly these to its worker (and refuses the oracle's), and the oracle's
cache key hashes exactly these, so that editing an unrelated module (a report, a picture)
neither changes what a worker can reach nor throws the cached expected values away.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterable
from pathlib import Path

GRADER = Path(__file__).resolve().parent


def module_path(name: str) -> Path | None:
    """`grader.backends.base` -> its file; None for a name that is not a module."""
    parts = name.split(".")[1:]
    if not parts:
        return GRADER / "__init__.py"
    for candidate in (
        GRADER.joinpath(*parts[:-1], parts[-1] + ".py"),
        GRADER.joinpath(*parts, "__init__.py"),
    ):
        if candidate.is_file():
            return candidate
    return None


def grader_imports(path: Path) -> frozenset[tuple[str, bool]]:
    """(module, lazy) for every `grader...` import in `path`; lazy when inside a function."""
    stat = path.stat()
    return _imports(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=512)
def _imports(path: Path, mtime: int, size: int) -> frozenset[tuple[str, bool]]:
    found: set[tuple[str, bool]] = set()

    def visit(node: ast.AST, lazy: bool) -> None:
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found.update((n, lazy) for n in names if n == "grader" or n.startswith("grader."))
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), False)
    return frozenset(found)


def closure(
    start: Iterable[Path], follow: Callable[[Path, str, Path, bool], bool] | None = None
) -> set[Path]:
    """`start` and every grader file reached from it; `follow(module, name, importer, lazy)`
    decides whether an import is followed (and may raise to refuse it)."""
    todo, seen = list(start), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, lazy in grader_imports(path):
            module = module_path(name)
            if module is not None and (follow is None or follow(module, name, path, lazy)):
                todo.append(module)
    return seen
