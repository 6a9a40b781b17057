"""Import a submission's packages from its directory, fresh every time.

Two submissions graded in one process must not see each other's code: each load removes
any earlier module of the same package from `sys.modules`, imports from the submission's
directory alone, and takes the new modules out of `sys.modules` again once they are in hand.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from grader.assignments import NAMES


class SubmissionError(Exception):
    """The submission cannot be loaded: a missing package, a syntax error, a failing import."""


def _drop(package: str) -> None:
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def load_package(
    directory: str | Path, package: str, submodules: tuple[str, ...] = ()
) -> dict[str, ModuleType]:
    """Import `package` (and `package.<sub>` for each submodule) from `directory` only."""
    root = Path(directory).resolve()
    if not (root / package / "__init__.py").is_file():
        raise SubmissionError(f"no package '{package}' in {root} (expected {package}/__init__.py)")
    _drop(package)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        modules = {package: importlib.import_module(package)}
        for sub in submodules:
            modules[sub] = importlib.import_module(f"{package}.{sub}")
    except SyntaxError as exc:
        where = f"{Path(exc.filename).name}, line {exc.lineno}" if exc.filename else "unknown file"
        raise SubmissionError(f"{package} does not compile: {exc.msg} ({where})") from exc
    except Exception as exc:  # anything a broken submission raises while importing
        raise SubmissionError(f"importing {package} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.path.remove(str(root))
        _drop(package)
    origin = Path(modules[package].__file__ or "").resolve()
    if root not in origin.parents:
        raise SubmissionError(f"{package} was imported from {origin}, not from {root}")
    return modules


def present_packages(directory: str | Path) -> list[str]:
    root = Path(directory)
    return [p for p in NAMES if (root / p / "__init__.py").is_file()]
