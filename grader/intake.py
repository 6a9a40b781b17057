"""What a student hands in, made a directory the grader can read: zips unpacked safely.

A submission is a directory, a `.zip`, or a directory holding only zips (an upload): the
zips are unpacked into a temporary directory, each into a folder named after it. Unpacking
refuses what could harm the grader's machine: a member whose path leaves the archive (`..`,
an absolute path, a drive), a symbolic link, more than MAX_MEMBERS members, more than
MAX_BYTES unpacked (counted as written, not as the archive claims). The macOS debris
(`__MACOSX/`, `._*`) is left out.

An assignment's files handed in loose, without their folder (`engine.py` and `nn.py`
dropped into Gradescope's upload, or zipped on their own), are graded as that folder: where
the submission has no package of the assignment's name, the shallowest folder holding its
marker file (micrograd's `engine.py`, needle's `autograd.py`) becomes the package, in a
temporary directory beside the packages the submission does have.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
import zipfile
from contextlib import ExitStack
from pathlib import Path, PurePosixPath

from grader.assignments import NAMES, markers
from grader.case.loading import AmbiguousPackage, SubmissionError, locate_assignment, never_searched, walk

MAX_MEMBERS = 5000
MAX_BYTES = 256 << 20
CHUNK = 1 << 16
#: how far down loose files are looked for: an upload's top, a zip's folder, a zip's folder's folder
LOOSE_DEPTH = 2


class IntakeError(Exception):
    """The submission cannot be read as handed in: the reason, for the student."""


def prepare(submission: Path, stack: ExitStack) -> Path:
    """The directory to grade; a temporary one (removed with `stack`) when zips were unpacked
    or loose files gathered into their package."""
    if submission.is_file():
        if not zipfile.is_zipfile(submission):
            raise IntakeError(f"{submission} is neither a directory nor a .zip archive")
        dest = _temporary(stack, "grader-unzipped-")
        unpack(submission, dest)
        return gathered(dest, stack)
    if not submission.is_dir():
        return submission
    searched = search(submission)
    if searched[0]:
        return gathered(submission, stack, searched)
    archives = sorted(p for p in submission.glob("*.zip") if p.is_file() and not p.is_symlink())
    if not archives:
        return gathered(submission, stack, searched)
    dest = _temporary(stack, "grader-unzipped-")
    for archive in archives:
        unpack(archive, dest / archive.stem)
    return gathered(dest, stack)


def _temporary(stack: ExitStack, prefix: str) -> Path:
    return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))


def search(directory: Path) -> tuple[dict[str, Path], list[str]]:
    """The assignments' packages in `directory` (by name), and the assignments it has none
    of (two as shallow are neither: which to grade is the student's to settle, as the
    message says)."""
    found, lacking = {}, []
    for name in NAMES:
        try:
            found[name] = locate_assignment(directory, name).path
        except AmbiguousPackage:
            continue
        except SubmissionError:
            lacking.append(name)
    return found, lacking


def gathered(
    directory: Path, stack: ExitStack, searched: tuple[dict[str, Path], list[str]] | None = None
) -> Path:
    """`directory`, or a temporary directory in which an assignment handed in loose is its
    package: each assignment `directory` has no package of (`search`) but whose files lie
    loose (`loose_folder`) gets them (its Python files and Python folders) as
    `<assignment>/`; the packages found, and the modules at the top, come along as they are."""
    found, lacking = searched or search(directory)
    loose = {name: folder for name in lacking if (folder := loose_folder(directory, name)) is not None}
    if not loose:
        return directory
    dest = _temporary(stack, "grader-gathered-")
    for path in found.values():
        _copy(path, dest / path.relative_to(directory))
    for module in _python_files(directory):  # stand-ins a package imports from the top
        _copy(module, dest / module.name)
    for name, folder in loose.items():
        (dest / name).mkdir()
        for entry in [*_python_files(folder), *_python_folders(folder)]:
            _copy(entry, dest / name / entry.name)
    return dest


def loose_folder(directory: Path, name: str) -> Path | None:
    """The shallowest folder, at most LOOSE_DEPTH down, holding the assignment's marker file
    (micrograd's engine.py, needle's autograd.py), if only one is that shallow: the files of
    an upload, of a zip of them, or of a zip of their folder."""
    wanted = markers(name)
    found: list[Path] = []
    shallowest = LOOSE_DEPTH
    for depth, folder in walk(directory, LOOSE_DEPTH):
        if depth > shallowest:
            break
        if any((folder / m).is_file() and not (folder / m).is_symlink() for m in wanted):
            found.append(folder)
            shallowest = depth
    return found[0] if len(found) == 1 else None


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.is_file() and not p.is_symlink())


def _python_folders(folder: Path) -> list[Path]:
    """Subpackages (needle's ops/ as a folder): real folders with Python files at their top."""
    folders = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    return sorted(p for p in folders if not never_searched(p.name) and _python_files(p))


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, ignore=_never_searched)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


def _never_searched(folder: str, names: list[str]) -> set[str]:
    """What a copy leaves out: what `locate` never searches (.git/, __pycache__/, a venv)."""
    return {n for n in names if never_searched(n)}


def _member_parts(name: str) -> tuple[str, ...] | None:
    """The member's path parts, or None when it would leave the archive."""
    posix = name.replace("\\", "/")
    parts = PurePosixPath(posix).parts
    if posix.startswith("/") or ".." in parts or (parts and ":" in parts[0]):
        return None
    return tuple(p for p in parts if p not in ("", "."))


def _debris(parts: tuple[str, ...]) -> bool:
    return "__MACOSX" in parts or parts[-1].startswith("._") or parts[-1] == ".DS_Store"


def unpack(archive: Path, dest: Path) -> None:
    """Unpack `archive` into `dest`, or raise `IntakeError` (nothing is written outside
    `dest`; what was written stays there, for the caller's temporary directory to remove)."""
    name = archive.name
    try:
        with zipfile.ZipFile(archive) as z:
            members = z.infolist()
            if len(members) > MAX_MEMBERS:
                raise IntakeError(f"{name} holds more than {MAX_MEMBERS} files: not unpacked")
            written = 0
            dest.mkdir(parents=True, exist_ok=True)
            root = dest.resolve()
            for info in members:
                parts = _member_parts(info.filename)
                if parts is None:
                    raise IntakeError(f"{name}: {info.filename[:200]!r} leaves the archive: not unpacked")
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise IntakeError(f"{name}: {info.filename[:200]!r} is a symbolic link: not unpacked")
                if not parts or _debris(parts):
                    continue
                target = root.joinpath(*parts)
                if root not in target.parents:
                    raise IntakeError(f"{name}: {info.filename[:200]!r} leaves the archive: not unpacked")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as out:
                    while chunk := src.read(CHUNK):
                        written += len(chunk)
                        if written > MAX_BYTES:
                            raise IntakeError(f"{name} unpacks to more than {MAX_BYTES} bytes: not unpacked")
                        out.write(chunk)
    except (zipfile.BadZipFile, OSError, RuntimeError, ValueError, EOFError) as exc:
        raise IntakeError(f"{name} cannot be unpacked: {exc}") from exc
