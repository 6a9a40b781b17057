"""The worker's whole world: a private directory with `lib/` and `work/`.

`lib/` holds what runs beside student code and nothing else: the `grader.case` package and
the assignments' folders, each without its `oracle.py` (copied whole, by role, so what a
worker can reach is read off the tree), the suite files of the suites run so far (the hidden
suite only once the public cases are over), a link to numpy, and `pyseccomp` (one
pure-Python module over the system's libseccomp, for the worker's filter). `work/` holds a
copy of the submission's package under grading and is the worker's cwd. No path in either
leads to `reference/`, to the oracle or its cache.

Every Python file of `lib/` comes with its bytecode, compiled once per grading process
(`trusted_file`): a worker cannot write bytecode into its read-only `lib/`, so without it
each worker would compile the grader's modules and the suite anew (a fifth of a cold
worker's time where the installation holds no bytecode, or `PYTHONDONTWRITEBYTECODE` is
set). The class run compiles them in its fork server, before any submission's process is
forked (`precompile`).
"""

from __future__ import annotations

import functools
import importlib.util
import marshal
import os
import shutil
from pathlib import Path

from grader.case.loading import SubmissionError, locate_assignment, walk
from grader.sandbox.bwrap import numpy_dirs

GRADER = Path(__file__).resolve().parent.parent
#: the packages that run beside student code, relative to the grader package
SHIPPED = ("case", "assignments")
#: files in them that are trusted: they compute expected values (and import torch)
TRUSTED_NAMES = ("oracle.py",)
#: third-party modules the worker imports beside numpy: single pure-Python files, copied
SHIPPED_MODULES = ("pyseccomp",)


#: the Python files besides the package copied into the worker's work/, at most
MAX_EXTRA_FILES = 500
MAX_EXTRA_BYTES = 16 << 20


class SandboxError(RuntimeError):
    """The sandbox cannot be built or started: a problem of the grader, not of the submission."""


def worker_modules() -> list[Path]:
    """The grader source files a worker gets: `grader/__init__.py`, `case/` and
    `assignments/` whole, but for the assignments' oracles."""
    found = [GRADER / "__init__.py"]
    for package in SHIPPED:
        found += [
            p
            for p in (GRADER / package).rglob("*")
            if p.is_file() and p.name not in TRUSTED_NAMES and "__pycache__" not in p.parts
        ]
    return sorted(found)


def shipped_modules() -> list[Path]:
    """The source files of `SHIPPED_MODULES` that are installed here (each is copied into a
    worker's `lib/` under its own name)."""
    found = []
    for name in SHIPPED_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            found.append(Path(spec.origin))
    return found


def trusted_file(src: Path) -> tuple[bytes, bytes | None]:
    """A grader or suite file's bytes and, for Python source, its bytecode as an
    unchecked hash-based .pyc (PEP 552: the worker loads it without comparing it with the
    source, which nobody can change in a read-only `lib/`). Read and compiled once per
    process and version of the file."""
    info = src.stat()
    return _compiled(src, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=4096)
def _compiled(src: Path, mtime_ns: int, size: int) -> tuple[bytes, bytes | None]:
    data = src.read_bytes()
    if src.suffix != ".py":
        return data, None
    try:
        code = compile(data, str(src), "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        return data, None  # the worker reports it when it imports the file
    header = importlib.util.MAGIC_NUMBER + (0b01).to_bytes(4, "little") + importlib.util.source_hash(data)
    return data, header + marshal.dumps(code)


def precompile(suites_dir: Path | None = None) -> None:
    """Compile now, in this process, every file a worker's `lib/` may hold: the grader's
    modules, `pyseccomp` and, with `suites_dir`, its public and hidden suites. The class run
    does it in its fork server, so that each submission's process inherits the bytecode
    (without `pyseccomp` here, each compiled it again: 10 ms a submission)."""
    files = [*worker_modules(), *shipped_modules()]
    for suite in ("public", "hidden"):
        if suites_dir is not None and (suites_dir / suite).is_dir():
            files += sorted(p for p in (suites_dir / suite).rglob("*.py") if "__pycache__" not in p.parts)
    for path in files:
        try:
            trusted_file(path)
        except OSError:
            pass  # `build` raises it, where it is needed


def _copy_trusted(src: Path, dest: Path) -> None:
    """A grader or suite file, with its bytecode (see `trusted_file`), so that workers do not
    compile everything anew."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    data, bytecode = trusted_file(src)
    dest.write_bytes(data)
    if bytecode is not None:
        cached = Path(importlib.util.cache_from_source(str(dest), optimization=""))
        cached.parent.mkdir(exist_ok=True)
        cached.write_bytes(bytecode)


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


def copy_grader(dest: Path) -> None:
    """The grader's modules a worker gets (`worker_modules`), with their bytecode, as the
    package directory `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in worker_modules():
        _copy_trusted(path, dest / path.relative_to(GRADER))


def build(root: Path, submission: Path, assignment: str, grader: bool = True) -> tuple[Path, Path]:
    """Create `root/lib` and `root/work` for running one assignment's cases, its suites not
    yet in `lib/` (see `add_suite`). Without `grader`, `lib/grader` is left empty: a copy
    shared by the run's workers is bound there read-only (bubblewrap: see
    `grader.sandbox.bwrap.argv`)."""
    lib, work = root / "lib", root / "work"
    (lib / "suites").mkdir(parents=True)
    if grader:
        copy_grader(lib / "grader")
    else:
        (lib / "grader").mkdir()
    for path in shipped_modules():
        _copy_trusted(path, lib / path.name)
    for folder in numpy_dirs():
        (lib / folder.name).symlink_to(folder)
    work.mkdir()
    copy_submission(submission, work, assignment)
    return lib, work


def add_suite(lib: Path, suites_dir: Path, suite: str, assignment: str) -> Path:
    """Copy one suite of `assignment` into `lib/suites/`, where the worker collects it. The
    grader adds the hidden suite only once no process that ran public cases is left: until
    then the worker's `lib/` holds no hidden file."""
    src, dest = suites_dir / suite / assignment, lib / "suites" / suite / assignment
    dest.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        _copy_tree(src, dest, _copy_trusted)
    return dest


def copy_submission(submission: Path, work: Path, assignment: str) -> None:
    """The package under grading where the student put it (`python/needle/`, `micrograd.py`),
    and the Python files around it (a stand-in module at the submission's root is imported
    too), each in its place. Nothing when there is no package: the grader reports that."""
    try:
        found = locate_assignment(submission, assignment)
    except SubmissionError:
        return
    place = work / found.path.relative_to(found.submission)
    if found.single_module:
        place.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found.path, place)
    else:
        _copy_tree(found.path, place)
    copied, size = 0, 0
    for _, folder in walk(found.submission):
        if folder == found.path or found.path in folder.parents:
            continue
        for path in sorted(folder.glob("*.py")):
            if not path.is_file() or path.is_symlink():
                continue
            size += path.stat().st_size
            copied += 1
            if copied > MAX_EXTRA_FILES or size > MAX_EXTRA_BYTES:
                return  # a submission's own code is far less: the rest is not its engine
            target = work / path.relative_to(found.submission)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
