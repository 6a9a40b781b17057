"""Which submissions a class root holds, one per student.

Accepted layouts (`discover`):
- one directory per student: `ROOT/<student>/micrograd/...` (the packages may sit a few
  levels down, e.g. `ROOT/<student>/hw1/micrograd/`);
- nbgrader's `ROOT/submitted/<student>/<assignment>/`, holding the package's files or the
  assignment's notebook (its code is extracted as the fast path does);
- a zip as a learning management system exports it: one folder or one zip per student.
  Zips are unpacked with no path escapes, no links, and limits on size and count.

A student's id is the folder's (or inner zip's) name. Something that is no submission at
all is still listed, so that it scores zero with a reason rather than vanishing.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from grader.assignments import NAMES

#: what one zip may unpack to, in all
MAX_BYTES = 256 << 20
MAX_FILES = 20_000
#: how deep below a student's folder the packages may sit
MAX_DEPTH = 3


class LayoutError(ValueError):
    """ROOT is not a class: the user's mistake, reported in one line."""


@dataclass(frozen=True)
class Submission:
    """One student's code: `path` is the directory graded (it holds `micrograd/`, `needle/`)."""

    student: str
    path: Path
    timestamp: str | None = None  # when it was handed in, if the layout says (nbgrader's timestamp.txt)


def safe_extract(archive: Path, dest: Path) -> None:
    """Unpack `archive` under `dest`: regular files and folders only, every path inside
    `dest`, at most MAX_FILES files and MAX_BYTES bytes (a zip bomb stops early)."""
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise LayoutError(f"{archive.name} is not a readable zip: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_FILES:
            raise LayoutError(f"{archive.name} holds {len(infos)} files (the limit is {MAX_FILES})")
        total = 0
        dest.mkdir(parents=True, exist_ok=True)
        for info in infos:
            name = PurePosixPath(info.filename.replace("\\", "/"))
            if name.is_absolute() or ".." in name.parts or not name.parts:
                raise LayoutError(f"{archive.name}: {info.filename!r} points outside the archive")
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                continue  # a link could point anywhere: never unpacked
            if any(part == "__MACOSX" for part in name.parts):
                continue
            target = dest.joinpath(*name.parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += info.file_size
            if total > MAX_BYTES:
                raise LayoutError(f"{archive.name} unpacks to more than {MAX_BYTES >> 20} MiB")
            target.parent.mkdir(parents=True, exist_ok=True)
            written = 0
            with zf.open(info) as src, target.open("wb") as out:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > info.file_size or total - info.file_size + written > MAX_BYTES:
                        raise LayoutError(f"{archive.name}: {info.filename!r} is larger than it says")
                    out.write(chunk)


def package_root(folder: Path, depth: int = MAX_DEPTH) -> Path:
    """The shallowest directory at or below `folder` holding an assignment's package;
    `folder` itself when there is none (it then scores zero, saying what is missing)."""
    level = [folder]
    for _ in range(depth + 1):
        for candidate in level:
            if any((candidate / name).is_dir() for name in NAMES):
                return candidate
        level = (
            sorted(d for parent in level for d in parent.iterdir() if d.is_dir() and not d.is_symlink())
            if level
            else []
        )
    return folder


def _stamp(folder: Path) -> str | None:
    path = folder / "timestamp.txt"
    return path.read_text().strip() if path.is_file() else None


def from_nbgrader(root: Path, work: Path, only: tuple[str, ...] | None = None) -> list[Submission]:
    """`root/submitted/<student>/<assignment>/`: each student's assignments staged together
    under `work/<student>/` (notebooks extracted into packages)."""
    from grader.authoring.nbgrader_io import extract

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
            if (folder / assignment).is_dir():
                shutil.copytree(folder / assignment, staged / assignment, symlinks=True)
            elif any(folder.glob("*.py")):
                shutil.copytree(folder, staged / assignment, symlinks=True)
            elif notebook.is_file():
                source = root / "source" / assignment / f"{assignment}.ipynb"
                extract(notebook, staged, assignment, source=source if source.is_file() else None)
        stamp = max((s for s in stamps if s), default=None)
        found.append(Submission(student_dir.name, staged, stamp))
    return found


def _unpack_students(archive: Path, work: Path) -> Path:
    """An LMS zip unpacked to `work/unpacked/`, each student's inner zip to a folder."""
    out = work / "unpacked"
    if out.exists():
        shutil.rmtree(out)
    safe_extract(archive, out)
    entries = [p for p in out.iterdir() if p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and not any((entries[0] / name).is_dir() for name in NAMES):
        out = entries[0]  # the zip wraps the class in one folder
    for inner in sorted(out.glob("*.zip")):
        safe_extract(inner, out / inner.stem)
        inner.unlink()
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        zips = list(folder.glob("*.zip"))
        root = package_root(folder)
        if len(zips) == 1 and not any((root / name).is_dir() for name in NAMES):
            safe_extract(zips[0], folder)
            zips[0].unlink()
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
    students = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    if not students:
        raise LayoutError(f"{root} holds no student folders (expected ROOT/<student>/micrograd/ ...)")
    return [Submission(p.name, package_root(p), _stamp(p)) for p in students]
