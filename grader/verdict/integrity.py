"""Is the submission computing gradients itself, or borrowing an autodiff library's?

Two checks, both in trusted code. Statically, every `.py` file of a graded package is
parsed and its imports (`import torch`, `from jax import grad`, `__import__("torch")`,
`importlib.import_module("autograd")`) are matched against the autodiff libraries. At run
time, the sandbox cannot import them (its sys.path has only the stdlib and numpy), and if
a submission smuggles one in anyway, the grader sees its shared objects in the worker's
memory map. Either way every case of that assignment scores zero, with the reason.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from grader.case.guard import AUTODIFF_LIBRARIES
from grader.case.loading import UNPARSABLE

#: top-level module -> the library named in the message: the worker's import guard's own list
LIBRARIES = AUTODIFF_LIBRARIES
#: text in a path of /proc/PID/maps -> the library whose shared objects those are
SHARED_OBJECTS = {
    "/torch/": "torch",
    "libtorch": "torch",
    "/jaxlib/": "jax",
    "/tensorflow/": "tensorflow",
    "libtensorflow": "tensorflow",
    "/mxnet/": "mxnet",
}


@dataclass(frozen=True)
class Finding:
    library: str
    where: str  # "engine.py line 3", or how it was seen

    @property
    def reason(self) -> str:
        return f"uses {self.library} to compute gradients ({self.where}): not allowed"


def _imported(node: ast.AST) -> str | None:
    """The module a node imports, if it is an import statement or a call with a literal name."""
    if isinstance(node, ast.Import):
        return next((a.name for a in node.names if a.name.split(".")[0] in LIBRARIES), node.names[0].name)
    if isinstance(node, ast.ImportFrom) and node.level == 0:
        return node.module
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in ("__import__", "import_module") and isinstance(node.args[0].value, str):
            return node.args[0].value
    return None


def scan_source(source: str, filename: str) -> list[Finding]:
    try:
        tree = ast.parse(source, filename)
    except UNPARSABLE:
        return []  # loading reports it
    found: list[tuple[int, Finding]] = []
    for node in ast.walk(tree):
        module = _imported(node)
        top = module.split(".")[0] if module else ""
        if top in LIBRARIES:
            found.append((node.lineno, Finding(LIBRARIES[top], f"{filename} line {node.lineno}")))
    return [finding for _, finding in sorted(found, key=lambda pair: pair[0])]


def scan(directory: Path, package: str) -> Finding | None:
    """The first autodiff-library import in `directory/package`, if any."""
    root = Path(directory) / package
    for path in sorted(root.rglob("*.py")) if root.is_dir() else []:
        if path.is_symlink() or "__pycache__" in path.parts:
            continue
        try:
            source = path.read_text(errors="replace")
        except OSError:
            continue
        found = scan_source(source, str(path.relative_to(root)))
        if found:
            return found[0]
    return None


@functools.lru_cache(maxsize=4)
def libraries_in(maps: bytes | None) -> frozenset[str] | None:
    """The autodiff libraries a process's /proc/PID/maps names; None for no map at all (the
    process has exited: a live one always has mappings). The grader reads a worker's map after
    every case, and between most cases it has not changed: a map seen just before is known
    (hashing and comparing a map costs a tenth of searching it)."""
    if not maps:
        return None
    text = maps.decode(errors="replace")
    return frozenset(library for marker, library in SHARED_OBJECTS.items() if marker in text)


#: the threads a worker waiting for the grader's go has of its own: the one that runs the cases
WORKER_THREADS = 1


def extra_threads(pid: int) -> int:
    """How many threads process `pid` runs beyond its own (0 when it cannot be told: the
    process has gone, and that is faulted elsewhere). Read from /proc, which the worker
    cannot forge, so a thread started around the worker's refusal (`grader.case.threads`)
    is seen."""
    try:
        return max(0, len(os.listdir(f"/proc/{pid}/task")) - WORKER_THREADS)
    except OSError:
        return 0
