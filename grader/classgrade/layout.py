"""Which submissions a class root holds, one per student.

Accepted layouts (`discover`):
- one directory or zip per student, `ROOT/<student>/` or `ROOT/<student>.zip`, graded as
  `grader grade` grades it (the packages found where they are, a student's zip unpacked:
  `grader.intake`);
- nbgrader's `ROOT/submitted/<student>/<assignment>/`, holding the package's files (found
  there by `grader.case.loading`, as `grader grade` finds them: the folder itself, or a
  package in it however deep, or in a zip there, unpacked by `grader.intake`) or the
  assignment's notebook (its code extracted, as the fast path does);
- a zip as a learning management system exports it: one folder or one zip per student,
  unpacked by `grader.intake` (no path escapes, no links, limits on size and count).

A student's id is the folder's (or inner zip's) name. Something that is no submission at
all is still listed, so that it scores zero with a reason rather than vanishing.
"""

from __future__ import annotations

import shutil
import zipfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from grader import intake
from grader.assignments import NAMES
from grader.assignments import markers as assignment_markers
from grader.case.loading import SubmissionError, is_package_dir, locate, present_packages


class LayoutError(ValueError):
    """ROOT is not a class: the user's mistake, reported in one line."""


@dataclass(frozen=True)
class Submission:
    """One student's code: `path` is the directory graded (it holds `micrograd/`, `needle/`)."""

    student: str
    path: Path
    timestamp: str | None = None  # when it was handed in, if the layout says (nbgrader's timestamp.txt)


def _stamp(folder: Path) -> str | None:
    path = folder / "timestamp.txt"
    return path.read_text().strip() if path.is_file() else None


def from_nbgrader(root: Path, work: Path, only: tuple[str, ...] | None = None) -> list[Submission]:
    """`root/submitted/<student>/<assignment>/`: each student's assignments staged together
    under `work/<student>/` (notebooks extracted into packages)."""
    from grader.authoring.nbgrader_io import NotebookError, extract

    found = []
    for student_dir in sorted(p for p in (root / "submitted").iterdir() if p.is_dir()):
        staged = work / student_dir.name
        if staged.exists():
            shutil.rmtree(staged)
        staged.mkdir(parents=True)
        stamps = []
        for assignment in NAMES:
            folder = student_dir / assignment
            if (only and assignment not in only) or not folder.is_dir():
                continue
            stamps.append(_stamp(folder))
            notebook = folder / f"{assignment}.ipynb"
            if _stage_package(folder, staged, assignment):
                continue
            if notebook.is_file():
                source = root / "source" / assignment / f"{assignment}.ipynb"
                try:
                    extract(notebook, staged, assignment, source=source if source.is_file() else None)
                except NotebookError as exc:
                    _unreadable(staged / assignment, str(exc))
            elif _stage_unpacked(folder, staged, assignment):
                continue
            elif any(folder.glob("*.py")):  # no package: graded as it is, so the error says what it holds
                shutil.copytree(folder, staged / assignment, symlinks=True)
        stamp = max((s for s in stamps if s), default=None)
        found.append(Submission(student_dir.name, staged, stamp))
    return found


def _unreadable(package: Path, reason: str) -> None:
    """Stage a package whose import fails with `reason`: the assignment's cases score zero
    saying why, and the student's other assignment is graded as usual."""
    from grader.notebook import LAYOUT

    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    for module in LAYOUT[package.name]:
        (package / f"{module}.py").write_text(f"raise ImportError({reason!r})\n")


def _stage_package(folder: Path, staged: Path, assignment: str) -> bool:
    """Copy the assignment's package from nbgrader's `folder` into `staged`: the folder
    itself when it is the package (its files at the top), else the package `locate` finds
    in it; False when there is none (a notebook, perhaps)."""
    markers = assignment_markers(assignment)
    if is_package_dir(folder, markers):
        shutil.copytree(folder, staged / assignment, symlinks=True)
        return True
    try:
        found = locate(folder, assignment, markers).path
    except SubmissionError:
        return False
    if found.is_dir():
        shutil.copytree(found, staged / found.name, symlinks=True)
    else:
        shutil.copy2(found, staged / found.name)
    return True


def _stage_unpacked(folder: Path, staged: Path, assignment: str) -> bool:
    """Stage the package in the zips `folder` holds (handed in instead of the notebook),
    unpacked by the intake of every front end; False when there is none. A zip the intake
    refuses stages a package whose import says why."""
    with ExitStack() as stack:
        try:
            unpacked = intake.prepare(folder, stack)
        except intake.IntakeError as exc:
            _unreadable(staged / assignment, str(exc))
            return True
        return unpacked != folder and _stage_package(unpacked, staged, assignment)


def _unpack_students(archive: Path, work: Path) -> Path:
    """An LMS zip unpacked to `work/unpacked/`: each student a folder (or a zip, unpacked
    when graded)."""
    out = work / "unpacked"
    if out.exists():
        shutil.rmtree(out)
    try:
        intake.unpack(archive, out)
    except intake.IntakeError as exc:
        raise LayoutError(str(exc)) from None
    entries = list(out.iterdir())  # macOS debris is not unpacked
    if len(entries) == 1 and entries[0].is_dir() and not present_packages(entries[0]):
        out = entries[0]  # the zip wraps the class in one folder
    for inner in sorted(out.glob("*.zip")):  # a student's zip: a folder of its own, named after it
        folder = out / inner.stem
        folder.mkdir(exist_ok=True)
        inner.rename(folder / inner.name)
    return out


def discover(root: str | Path, work: Path, only: tuple[str, ...] | None = None) -> list[Submission]:
    """Every student's submission under `root` (a directory or a zip); `work` is scratch
    space for what must be unpacked or extracted first."""
    root = Path(root)
    if not root.exists():
        raise LayoutError(f"{root} does not exist")
    if root.is_file():
        if not zipfile.is_zipfile(root):
            raise LayoutError(f"{root} is neither a directory nor a zip of submissions")
        root = _unpack_students(root, Path(work))
    if (root / "submitted").is_dir():
        return from_nbgrader(root, Path(work) / "staged", only)
    entries = [p for p in root.iterdir() if not p.name.startswith((".", "__"))]
    folders = {p.name: p for p in entries if p.is_dir()}
    zips = {p.stem: p for p in entries if p.suffix == ".zip" and p.is_file()}  # unpacked when graded
    both = sorted(folders.keys() & zips.keys())
    if both:
        raise LayoutError(f"{root} holds both {both[0]}/ and {both[0]}.zip: keep the one to grade")
    if not folders and not zips:
        raise LayoutError(f"{root} holds no student folders (expected ROOT/<student>/micrograd/ ...)")
    students = sorted({**folders, **zips}.items())
    return [Submission(name, p, _stamp(p) if p.is_dir() else None) for name, p in students]
