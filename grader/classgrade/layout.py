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
  unpacked by `grader.intake` (no path escapes, no links, limits on size and count);
- a flat export, no folders and every file named for its student: Canvas's ("Download
  Submissions": `doejane_12345_678901_engine.py`, `_late_` after the name when late) or
  Moodle's without its folders option (`Jane Doe_1234_assignsubmission_file_engine.py`).
  Each student's files are staged in a folder of their own under their own names: a zip
  among them is unpacked when graded, loose files are gathered into their package
  (`grader.intake`). Moodle's folders (`Jane Doe_1234_assignsubmission_file_/`) are its
  students, named without the suffix.

A student's id is the folder's (or inner zip's) name. Something that is no submission at
all is still listed, so that it scores zero with a reason rather than vanishing.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from collections import Counter
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


#: a file of a learning management system's flat export, named for its student: Moodle's
#: `<full name>_<participant id>_assignsubmission_file_<file>`, Canvas's
#: `<name>_[late_]<user id>_<file id>_<file>` (the file id orders two files of one name)
FLAT_EXPORTS = (
    re.compile(r"(?P<name>.+?)_(?P<user>\d+)_assignsubmission_file_(?P<file>.+)"),
    re.compile(r"(?P<name>[^_]+)_(?:late_|LATE_)?(?P<user>\d+)_(?P<id>\d+)_(?P<file>.+)"),
)
#: Moodle's folder of a student's files: `<full name>_<participant id>_assignsubmission_file_`
MOODLE_FOLDER = re.compile(r"(?P<name>.+?)_(?P<user>\d+)_assignsubmission_(?:file|onlinetext)_")
#: what a student's code comes as: at a class's root, outside any student's folder, an error
CODE_SUFFIXES = (".py", ".ipynb")


def _flat_file(name: str) -> re.Match[str] | None:
    return next((m for pattern in FLAT_EXPORTS if (m := pattern.fullmatch(name))), None)


def _flat_export(entries: list[Path]) -> bool:
    """Files only, each named as a flat export names them."""
    shown = [p for p in entries if not p.name.startswith((".", "__"))]
    return bool(shown) and all(p.is_file() and _flat_file(p.name) for p in shown)


def _unique(keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(name, user id) -> the student's id: the name, or with the user id where two share it."""
    named = Counter(name for name, _ in keys)
    return {(name, user): name if named[name] == 1 else f"{name}_{user}" for name, user in keys}


def from_flat_export(files: list[Path], staged: Path) -> list[Submission]:
    """Each student's files, by the name and user id in their names, copied into
    `staged/<student>/` under the names they were handed in as (of two files of one name,
    the later by Canvas's file id)."""
    groups: dict[tuple[str, str], list[tuple[int, Path, str]]] = {}
    for path in files:
        match = _flat_file(path.name)
        assert match is not None
        order = int(match.groupdict().get("id") or 0)
        groups.setdefault((match["name"], match["user"]), []).append((order, path, match["file"]))
    if staged.exists():
        shutil.rmtree(staged)
    found = []
    for key, student in sorted(_unique(list(groups)).items()):
        folder = staged / student
        folder.mkdir(parents=True)
        for _, path, handed_in in sorted(groups[key]):
            shutil.copy2(path, folder / handed_in)
        found.append(Submission(student, folder))
    return found


def _student_ids(names: list[str]) -> dict[str, str]:
    """Each student folder's id: its name, Moodle's folders' without their suffix."""
    moodle = {n: m for n in names if (m := MOODLE_FOLDER.fullmatch(n))}
    ids = _unique([(m["name"], m["user"]) for m in moodle.values()])
    return {n: ids[m["name"], m["user"]] if (m := moodle.get(n)) else n for n in names}


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
    if _flat_export(list(out.iterdir())):
        return out  # its students are found by their files' names
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
    if _flat_export(entries):
        return from_flat_export(entries, Path(work) / "flat")
    loose = sorted(p.name for p in entries if p.is_file() and p.suffix in CODE_SUFFIXES)
    if loose:
        listed = ", ".join(loose[:3]) + (" ..." if len(loose) > 3 else "")
        raise LayoutError(
            f"{root} holds code outside any student's folder ({listed}): "
            "a student's files belong in ROOT/<student>/ or ROOT/<student>.zip"
        )
    folders = {p.name: p for p in entries if p.is_dir()}
    zips = {p.stem: p for p in entries if p.suffix == ".zip" and p.is_file()}  # unpacked when graded
    both = sorted(folders.keys() & zips.keys())
    if both:
        raise LayoutError(f"{root} holds both {both[0]}/ and {both[0]}.zip: keep the one to grade")
    if not folders and not zips:
        raise LayoutError(f"{root} holds no student folders (expected ROOT/<student>/micrograd/ ...)")
    ids = _student_ids(sorted(folders))
    if len(set(ids.values()) | zips.keys()) < len(folders) + len(zips):
        ids = {n: n for n in folders}  # a shortened id would take another's: the names as they are
    students = sorted({**{ids[n]: p for n, p in folders.items()}, **zips}.items())
    return [Submission(name, p, _stamp(p) if p.is_dir() else None) for name, p in students]
