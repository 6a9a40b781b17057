"""What a student hands in, made a directory the grader can read: zips unpacked safely.

A submission is a directory, a `.zip`, or a directory holding only zips (an upload): the
zips are unpacked into a temporary directory, each into a folder named after it. Unpacking
refuses what could harm the grader's machine: a member whose path leaves the archive (`..`,
an absolute path, a drive), a symbolic link, more than MAX_MEMBERS members, more than
MAX_BYTES unpacked (counted as written, not as the archive claims). The macOS debris
(`__MACOSX/`, `._*`) is left out.
"""

from __future__ import annotations

import stat
import tempfile
import zipfile
from contextlib import ExitStack
from pathlib import Path, PurePosixPath

from grader.case.loading import present_packages

MAX_MEMBERS = 5000
MAX_BYTES = 256 << 20
CHUNK = 1 << 16


class IntakeError(Exception):
    """The submission cannot be read as handed in: the reason, for the student."""


def prepare(submission: Path, stack: ExitStack) -> Path:
    """The directory to grade; a temporary one (removed with `stack`) when zips were unpacked."""
    if submission.is_file():
        if not zipfile.is_zipfile(submission):
            raise IntakeError(f"{submission} is neither a directory nor a .zip archive")
        dest = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grader-unzipped-")))
        unpack(submission, dest)
        return dest
    if not submission.is_dir() or present_packages(submission):
        return submission
    archives = sorted(p for p in submission.glob("*.zip") if p.is_file() and not p.is_symlink())
    if not archives:
        return submission
    dest = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grader-unzipped-")))
    for archive in archives:
        unpack(archive, dest / archive.stem)
    return dest


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
