"""Find a submission's package wherever the student put it, and import only what cases need.

Finding (`locate`): the package may sit at the submission's top (`micrograd/`), one or more
folders down (`python/needle/`, `hw1/micrograd/`), without `__init__.py` (a namespace
package) or as a single module (`micrograd.py`). Where there is none, the error says what
the submission holds and where.

Importing (`Package`): the folder that holds the package comes first on `sys.path`, then
the submission's root (so a stand-in module placed there is found). Only the modules a
case needs are imported, each when first asked for (`Package.module`): a missing or broken
`nn.py` costs the MLP cases and says so, the rest are graded. When `__init__.py` itself
fails (it imports a module that is missing or broken), the package is imported without it.
A third-party module that is not installed and without which the package would not import
at all gets a stand-in (see `guard`), named in one note.

A module of the package imported by its bare name from a sibling (`from engine import
Value` in `nn.py`, which works when the student runs it from inside the folder) is the
package's own module under a second name (`Siblings`): one module, never two copies with
two `Value` classes.

Two submissions graded in one process must not see each other's code, and the
submission's code must see its own modules while it runs (an `import micrograd` or a
`from .autograd import Tensor` inside a function): `Package.active()` puts the
submission's modules into `sys.modules` for the time its code runs, and takes them out again.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.assignments import NAMES, markers
from grader.case.guard import AUTODIFF_LIBRARIES, ImportGuard, is_autodiff, placeholder
from grader.case.run import said

#: how many folders down a package is looked for
MAX_DEPTH = 4
#: how many of the places found are named when there are too many (the message stays one line)
SHOWN = 5
#: folders never searched: tools' and operating systems' debris, environments, copies
#: and `grader`: a student's repository made by `grader release` holds the grader's own package,
#: whose assignments/ folders are named like the packages a student writes
SKIPPED = {"__pycache__", "__MACOSX", "node_modules", "site-packages", "venv", "env", "build", "dist"}
SKIPPED.add("grader")
#: how many absent third-party modules get a stand-in before the import is given up
MAX_ABSENT = 8


#: what compiling or parsing a submission's text may raise: its syntax error, a NUL byte in
#: it (ValueError), or code nested deeper than the parser's stack (`-` repeated 100000 times
#: before a number: MemoryError; a sum of 200000 terms: RecursionError). Trusted code that
#: reads a submission's text catches these: the submission's own import then fails with them.
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


class SubmissionError(Exception):
    """The submission cannot be loaded: a missing package, a syntax error, a failing import."""


class AmbiguousPackage(SubmissionError):
    """More than one folder of the package's name, as shallow: which to grade is not guessed."""


class MissingModule(SubmissionError):
    """A module some cases need is missing or cannot be imported; those cases score zero."""


@dataclass(frozen=True)
class Found:
    """Where a package was found in a submission."""

    submission: Path  # the submission's root
    path: Path  # the package's folder, or its single module file

    @property
    def home(self) -> Path:
        """The folder holding the package: first on `sys.path`."""
        return self.path.parent

    @property
    def name(self) -> str:
        return self.path.stem if self.path.suffix == ".py" else self.path.name

    @property
    def single_module(self) -> bool:
        return self.path.suffix == ".py"

    def describe(self) -> str:
        """`python/needle/` (no __init__.py), `micrograd.py`: the layout, as a note says it."""
        relative = self.path.relative_to(self.submission).as_posix()
        if self.single_module:
            return f"{relative} (one module)"
        init = "" if (self.path / "__init__.py").is_file() else " (no __init__.py)"
        return f"{relative}/{init}"


def never_searched(name: str) -> bool:
    """A folder no package is looked for in (`SKIPPED`, hidden ones, build debris)."""
    return name.startswith(".") or name in SKIPPED or name.endswith(".egg-info")


def is_package_dir(path: Path, markers: tuple[str, ...]) -> bool:
    """A real folder (no link) holding `__init__.py` or one of the package's marker files."""
    return (
        path.is_dir()
        and not path.is_symlink()
        and any((path / m).is_file() for m in ("__init__.py", *markers))
    )


def walk(root: Path, depth: int = MAX_DEPTH) -> Iterator[tuple[int, Path]]:
    """(depth, folder) for every searched folder, shallowest first, in name order."""
    level = [root]
    for d in range(depth + 1):
        following = []
        for folder in level:
            yield d, folder
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            following += [
                Path(e.path)
                for e in entries
                if e.is_dir(follow_symlinks=False) and not never_searched(e.name)
            ]
        level = following


def locate(directory: str | Path, package: str, markers: tuple[str, ...] = ()) -> Found:
    """The shallowest `package/` (holding `__init__.py` or one of `markers`) or `package.py`
    under `directory`; `SubmissionError` when there is none, or more than one as shallow."""
    root = Path(directory).resolve()
    if not root.is_dir():
        raise SubmissionError(f"{root} is not a directory")
    for _depth, folders in _by_depth(root):
        hits = []
        for folder in folders:
            if is_package_dir(folder / package, markers):
                hits.append(folder / package)
            elif (folder / f"{package}.py").is_file() and not (folder / f"{package}.py").is_symlink():
                hits.append(folder / f"{package}.py")
        if len(hits) == 1:
            return Found(root, hits[0])
        if hits:
            names = [h.relative_to(root).as_posix() for h in hits]
            listed = ", ".join(names[:SHOWN])
            if len(names) > SHOWN:
                listed += f" and {len(names) - SHOWN} more"
            raise AmbiguousPackage(f"more than one {package} in {root}: {listed}; hand in one")
    raise SubmissionError(not_found(root, package, markers))


def _by_depth(root: Path) -> Iterator[tuple[int, list[Path]]]:
    current, folders = 0, []
    for depth, folder in walk(root):
        if depth != current:
            yield current, folders
            current, folders = depth, []
        folders.append(folder)
    yield current, folders


def not_found(root: Path, package: str, markers: tuple[str, ...]) -> str:
    """What a submission without the package holds, and a hint where its files belong."""
    looked = f"{package}/ or {package}.py, up to {MAX_DEPTH} folders down"
    try:
        top = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        top = []
    shown = [e.name + ("/" if e.is_dir() else "") for e in top if not e.name.startswith(".")]
    python = [
        (folder / name).relative_to(root).as_posix()
        for _, folder in walk(root)
        for name in sorted(os.listdir(folder))
        if name.endswith(".py") and (folder / name).is_file()
    ]
    found = ", ".join(shown[:10]) + (f" and {len(shown) - 10} more" if len(shown) > 10 else "")
    text = f"no package '{package}' in {root} (looked for {looked}); it holds: {found or 'nothing'}"
    if python:
        text += f"; Python files: {', '.join(python[:8])}" + (" ..." if len(python) > 8 else "")
    loose = [p for p in python if Path(p).name in markers]
    if loose:
        text += f" ({loose[0]} belongs in a folder named {package}/)"
    elif any(name.endswith(".ipynb") for name in shown):
        text += f" (a notebook is not read here: hand in the {package}/ folder its code belongs in)"
    return text


def locate_assignment(directory: str | Path, name: str) -> Found:
    """`locate` with the assignment's own markers."""
    return locate(directory, name, markers(name))


def present_packages(directory: str | Path) -> list[str]:
    """The assignments whose package `locate` finds in `directory`."""
    found = []
    for name in NAMES:
        try:
            locate_assignment(directory, name)
        except SubmissionError:
            continue
        found.append(name)
    return found


def _drop(package: str) -> None:
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[name]


def _compile_error(package: str, exc: SyntaxError) -> str:
    where = f"{Path(exc.filename).name}, line {exc.lineno}" if exc.filename else "unknown file"
    return f"{package} does not compile: {exc.msg} ({where})"


_NAMED: dict[str, tuple[int, list[str]]] = {}


def _named(package: str) -> list[str]:
    """The loaded modules named like `package` or an autodiff library (or beginning so). The
    scan is kept while `sys.modules` keeps its size: thousands of names, every case."""
    size = len(sys.modules)
    cached = _NAMED.get(package)
    if cached is None or cached[0] != size:
        prefixes = (package, *AUTODIFF_LIBRARIES)
        cached = _NAMED[package] = (size, [n for n in sys.modules if n.startswith(prefixes)])
    return cached[1]


class _Same:  # a loader's protocol, as guard's `_Loader`
    """Loads a bare name as the package's module of that name: the same module object."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed under its package name


class Siblings:  # a finder on sys.meta_path, as guard's `ImportGuard`
    """`import engine` inside the package `micrograd` is `micrograd.engine`: a bare name
    that is a module of the package's folder (and not a module installed or of the
    standard library under that name) resolves to the package's module."""

    def __init__(self, package: str, folder: Path) -> None:
        self.package, self.folder = package, folder

    def find_spec(
        self, name: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if "." in name or name == self.package or name in sys.stdlib_module_names:
            return None
        if not (self.folder / f"{name}.py").is_file():
            return None
        return importlib.machinery.ModuleSpec(name, _Same(f"{self.package}.{name}"))


class Package:
    """One assignment's package of one submission, imported module by module on demand.

    `module(sub)` is `package.sub` (or, for a single-module submission or a package that
    defines everything in `__init__.py`, the package itself when it has `provides[sub]`).
    """

    def __init__(
        self,
        directory: str | Path,
        package: str,
        markers: tuple[str, ...] = (),
        provides: dict[str, str] | None = None,
    ) -> None:
        self.found = locate(directory, package, markers)
        self.package = package
        self.provides = provides or {}
        #: the submission's modules while its code does not run
        self.stash: dict[str, ModuleType] = {}
        self.guard = ImportGuard([self.found.submission])
        self.siblings = Siblings(package, self.found.path)
        self.notes: list[str] = []
        self.failures: dict[str, SubmissionError] = {}
        self.modules: dict[str, ModuleType] = {}
        self._active = 0
        importlib.invalidate_caches()  # files written just now (a copy, an unpacked zip) are seen
        self._top()

    @property
    def roots(self) -> list[Path]:
        return [self.found.submission]

    def _ours(self, name: str, module: object) -> bool:
        if name == self.package or name.startswith(self.package + ".") or placeholder(module):
            return True
        file = getattr(module, "__file__", None)
        return bool(file) and self.found.submission in Path(file).resolve().parents

    @contextmanager
    def active(self) -> Iterator[None]:
        """The submission's modules in `sys.modules`, its folders first on `sys.path`, the
        import guard first on `sys.meta_path`; all as they were afterwards (re-entrant)."""
        if self._active:
            self._active += 1
            try:
                yield
            finally:
                self._active -= 1
            return
        saved_path = list(sys.path)
        before = set(sys.modules)
        # an autodiff library the grader itself loaded is out of reach while student code runs,
        # and so is any other module of the package's name (one prefix test per module: cheap)
        displaced = {n: sys.modules.pop(n) for n in _named(self.package) if n in sys.modules}
        displaced.update((n, sys.modules.pop(n)) for n in self.stash if n in sys.modules)
        sys.modules.update(self.stash)
        sys.path[:0] = [str(self.found.home), str(self.found.submission)]
        sys.meta_path.insert(0, self.guard)
        if not self.found.single_module:
            sys.meta_path.insert(0, self.siblings)
        self._active = 1
        try:
            yield
        finally:
            self._active = 0
            for finder in (self.guard, self.siblings):
                if finder in sys.meta_path:
                    sys.meta_path.remove(finder)
            mine = [n for n in displaced if n == self.package or n.startswith(self.package + ".")]
            for name in (sys.modules.keys() - before).union(self.stash, mine):
                module = sys.modules.get(name)
                if module is not None and self._ours(name, module):
                    self.stash[name] = sys.modules.pop(name)
                elif module is not None and is_autodiff(name):
                    del sys.modules[name]  # a placeholder's submodule
            sys.modules.update(displaced)
            sys.path[:] = saved_path

    def _import(self, name: str) -> ModuleType:
        with self.active():
            return importlib.import_module(name)

    def _tolerant(self, name: str) -> ModuleType:
        """Import `name`; a third-party module it needs that is not installed gets a stand-in
        (and a note), and the import is tried again from the start."""
        kept = set(self.stash)
        for _ in range(MAX_ABSENT):
            try:
                return self._import(name)
            except ModuleNotFoundError as exc:
                missing = self._standable(exc)
                if missing is None:
                    raise
                self.guard.absent.add(missing)
                self.notes.append(self._absent_note(missing))
                # what this attempt imported goes: the next one starts afresh
                self.stash = {n: m for n, m in self.stash.items() if n in kept}
        return self._import(name)

    def _top(self) -> None:
        """Import the package itself; when its `__init__.py` fails, go on without it. A
        folder without `__init__.py` is a namespace package of that folder alone (an
        installed package of the same name must not take its place)."""
        name = self.package
        if not self.found.single_module and not (self.found.path / "__init__.py").is_file():
            self.modules[name] = self.stash[name] = self._namespace()
            return
        try:
            self.modules[name] = self._tolerant(name)
        except Exception as exc:  # anything a broken submission raises while importing
            self._bare(exc)
        origin = Path(getattr(self.modules[name], "__file__", None) or self.found.path)
        if self.found.submission not in origin.resolve().parents:
            raise SubmissionError(f"{name} was imported from {origin}, not from {self.found.submission}")

    def _namespace(self) -> ModuleType:
        spec = importlib.machinery.ModuleSpec(self.package, None, is_package=True)
        spec.submodule_search_locations = [str(self.found.path)]
        module = importlib.util.module_from_spec(spec)
        module.__file__ = str(self.found.path / "__init__.py")
        return module

    def _absent_note(self, missing: str) -> str:
        return (
            f"{self.package} imports {missing}, which is not installed where grading runs: graded with a "
            f"stand-in (a decorator from it is left out; a case that calls it fails)"
        )

    def _standable(self, exc: ModuleNotFoundError) -> str | None:
        """The missing module's top-level name when a stand-in may take its place: a
        third-party module, not the standard library's, not the submission's own."""
        missing = (exc.name or "").partition(".")[0]
        if not missing or missing in sys.stdlib_module_names or missing == self.package:
            return None
        if missing in self.guard.absent or is_autodiff(missing):
            return None
        home, root = self.found.home, self.found.submission
        if any((d / missing).exists() or (d / f"{missing}.py").exists() for d in (home, root)):
            return None  # the submission's own module, present but broken: its own error
        return missing

    def _bare(self, exc: BaseException) -> None:
        """`__init__.py` failed: import the package's folder without running it, and note why.
        A single module has nothing else to fall back on."""
        reason = (
            _compile_error(self.package, exc)
            if isinstance(exc, SyntaxError)
            else (f"{type(exc).__name__}: {said(exc)}")
        )
        if self.found.single_module or not (self.found.path / "__init__.py").is_file():
            raise SubmissionError(
                reason if isinstance(exc, SyntaxError) else f"importing {self.package} failed: {reason}"
            ) from exc
        self.stash.clear()
        module = self._namespace()
        self.stash[self.package] = module
        self.modules[self.package] = module
        self.notes.append(
            f"{self.package}/__init__.py failed ({reason}): its modules were imported without it"[:600]
        )

    def __getitem__(self, sub: str) -> ModuleType:
        """`modules["engine"]`, as a backend reads its modules (a notebook gives a dict)."""
        return self.modules[self.package] if sub == self.package else self.module(sub)

    def get(self, sub: str, default: ModuleType | None = None) -> ModuleType | None:
        try:
            return self[sub]
        except MissingModule:
            return default

    def module(self, sub: str) -> ModuleType:
        """`package.sub`, imported on first use; `MissingModule` (kept) when it cannot be."""
        if sub in self.modules:
            return self.modules[sub]
        if sub in self.failures:
            raise self.failures[sub]
        top = self.modules[self.package]
        wanted = self.provides.get(sub)
        try:
            if self.found.single_module:
                raise ModuleNotFoundError(name=f"{self.package}.{sub}")
            self.modules[sub] = self._tolerant(f"{self.package}.{sub}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{self.package}.{sub}":
                self.failures[sub] = self._broken(sub, exc)
                raise self.failures[sub] from exc
            if wanted and getattr(top, wanted, None) is not None:
                self.modules[sub] = top  # everything in one module, or re-exported at the top
                return top
            where = self.found.describe()
            self.failures[sub] = MissingModule(
                f"{self.package} has no module {sub} ({self._file(sub)}; the package found is {where})"
                + (f" and it defines no {wanted}" if wanted else "")
            )
            raise self.failures[sub] from exc
        except Exception as exc:  # the module exists and fails
            self.failures[sub] = self._broken(sub, exc)
            raise self.failures[sub] from exc
        return self.modules[sub]

    def require(self, sub: str, name: str) -> None:
        """`package.sub` must define `name`, which every case uses (micrograd's `Value`):
        else `SubmissionError`, naming the classes it does define (one renamed, say). Without
        it every case would stop on it in its own way, each one costing the sandbox a worker."""
        module = self.module(sub)
        try:
            if getattr(module, name, None) is not None:
                return
            own = module.__name__
            mine = [n for n, v in vars(module).items() if isinstance(v, type) and v.__module__ == own]
        except Exception:  # a module that raises on being read defines nothing usable
            mine = []
        where = self.found.describe() if module is self.modules.get(self.package) else self._file(sub)
        defined = f" (the classes it defines: {', '.join(mine[:8])})" if mine else ""
        raise SubmissionError(f"{where} defines no {name}, which every case uses{defined}"[:2000])

    def _file(self, sub: str) -> str:
        return (self.found.path / f"{sub}.py").relative_to(self.found.submission).as_posix()

    def _broken(self, sub: str, exc: BaseException) -> MissingModule:
        if isinstance(exc, SyntaxError):
            return MissingModule(_compile_error(f"{self.package}.{sub}", exc))
        return MissingModule(f"importing {self._file(sub)} failed: {type(exc).__name__}: {said(exc)}"[:2000])


def running(modules: object) -> contextlib.AbstractContextManager[None]:
    """While a submission's code runs: its package active (a notebook's dict needs nothing)."""
    return modules.active() if isinstance(modules, Package) else contextlib.nullcontext()


def load_package(
    directory: str | Path, package: str, submodules: tuple[str, ...] = ()
) -> dict[str, ModuleType]:
    """Import `package` (and `package.<sub>` for each submodule) from `directory` only: the
    modules by short name (and by `package`), taken out of `sys.modules` again."""
    loaded = Package(directory, package)
    modules = {package: loaded.modules[package]}
    try:
        for sub in submodules:
            modules[sub] = loaded.module(sub)
    except MissingModule as exc:
        raise SubmissionError(str(exc)) from exc
    return modules
