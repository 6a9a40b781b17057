"""The worker's whole world: a private directory with `lib/` and `work/`.

`lib/` holds copies of only the grader modules the worker needs (found by following the
imports of the worker and of the suite files; the oracle, the comparison, the torch
backends and the diagnostics are refused), the suite files of one suite, and a link to
numpy. `work/` holds a copy of the submission's package under grading and is the worker's cwd. No path
in either leads to `reference/`, to the other suite or to the oracle's cache.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import numpy

from grader.imports import GRADER, closure

#: where the worker starts: everything else it needs is reached through imports
ENTRY = ("sandbox/worker.py", "backends/__init__.py")
#: never shipped: they hold or compute expected values, or import torch
REFUSED = (
    "oracle",
    "compare",
    "diagnose",
    "grading",
    "plugin",
    "bugbank",
    "integrity",
    "results",
    "feedback",
)


class SandboxError(RuntimeError):
    """The sandbox cannot be built or started: a problem of the grader, not of the submission."""


def _refused(path: Path) -> bool:
    rel = path.relative_to(GRADER)
    return rel.stem in REFUSED or rel.name.startswith("torch_")


def worker_modules(suite_files: list[Path]) -> list[Path]:
    """The grader source files the worker imports, transitively; SandboxError on a refused one."""
    start = [GRADER / e for e in ENTRY] + [p for p in (GRADER / "backends").glob("*.py") if not _refused(p)]

    def follow(module: Path, name: str, importer: Path, lazy: bool) -> bool:
        if module == GRADER / "sandbox" / "__init__.py":
            return False  # the real one imports the engine; the worker gets an empty one
        if not _refused(module):
            return True
        if lazy:
            return False  # e.g. assignments.py's oracle factories: never called in the worker
        raise SandboxError(f"{importer.name} imports {name}, which never goes into the sandbox")

    return sorted(p for p in closure([*start, *suite_files], follow) if GRADER in p.parents)


def _copy_trusted(src: Path, dest: Path) -> None:
    """A grader or suite file, with its bytecode when there is some (it stays valid: the
    copy keeps the source's mtime), so that workers do not compile everything anew."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)
    if src.suffix == ".py":
        cached = Path(importlib.util.cache_from_source(str(src)))
        if cached.is_file():
            target = Path(importlib.util.cache_from_source(str(dest)))
            target.parent.mkdir(exist_ok=True)
            shutil.copy2(cached, target)


def _copy_tree(src: Path, dest: Path, copy=shutil.copyfile) -> None:
    """Regular files only, no __pycache__ (a submission's bytecode need not match its
    source), no symlinks (a symlink in a submission could point at anything)."""
    for folder, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(folder, d))]
        target = dest / Path(folder).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                copy(path, target / name)


def build(root: Path, submission: Path, suites_dir: Path, suite: str, assignment: str) -> tuple[Path, Path]:
    """Create `root/lib` and `root/work` for running one suite of one assignment."""
    lib, work = root / "lib", root / "work"
    suite_src = suites_dir / suite / assignment
    suite_dest = lib / "suites" / suite / assignment
    suite_dest.mkdir(parents=True)
    if suite_src.is_dir():
        _copy_tree(suite_src, suite_dest, _copy_trusted)
    for path in worker_modules(sorted(suite_dest.rglob("*.py"))):
        if path.is_relative_to(suite_dest):
            continue
        _copy_trusted(path, lib / "grader" / path.relative_to(GRADER))
    for package in (lib / "grader").rglob("*"):
        if package.is_dir() and package.name != "__pycache__" and not (package / "__init__.py").exists():
            (package / "__init__.py").write_text("")
    (lib / "grader" / "sandbox" / "__init__.py").write_text("")  # the real one imports the engine
    numpy_dir = Path(numpy.__file__).resolve().parent
    for name in ("numpy", "numpy.libs"):
        if (numpy_dir.parent / name).exists():
            (lib / name).symlink_to(numpy_dir.parent / name)
    work.mkdir()
    package = submission / assignment  # only the package under grading
    if package.is_dir() and not package.is_symlink():
        _copy_tree(package, work / assignment)
    return lib, work
