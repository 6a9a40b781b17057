"""Content hashes: what decides whether a submission must be graded again.

A submission is regraded when its files change (`files_hash`) or when what it is graded on
changes (`cases_key`: the cases, their points and the suites' versions). Bytecode caches
and editor litter do not count: they change without the student changing anything.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from grader.case.define import Case
from grader.verdict.oracle import suite_key

IGNORED_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints"}
IGNORED_SUFFIXES = (".pyc", ".pyo")


def submission_files(root: Path) -> list[Path]:
    """Every regular file of the submission (no symlinks), sorted by relative path."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in IGNORED_DIRS and not os.path.islink(os.path.join(folder, d))
        )
        for name in sorted(files):
            path = Path(folder, name)
            if not name.endswith(IGNORED_SUFFIXES) and path.is_file() and not path.is_symlink():
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def files_hash(root: str | Path) -> str:
    """sha256 over each file's relative path and bytes (a zip handed in: over its bytes)."""
    root = Path(root)
    digest = hashlib.sha256()
    if root.is_dir():
        for path in submission_files(root):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(_file_digest(path))
    elif root.is_file():
        digest.update(_file_digest(root))
    return digest.hexdigest()


def _file_digest(path: Path) -> bytes:
    """sha256 of a file's bytes, read in chunks: a data file a student left beside the code
    may be larger than the grader wants to hold in memory at once."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").digest()


def cases_key(cases: Iterable[Case], visibility: str) -> str:
    """What the class is graded on: case ids, points, suite versions, hidden visibility."""
    cases = list(cases)
    digest = hashlib.sha256(visibility.encode())
    for suites_dir, assignment, suite in sorted({(str(c.suites_dir), c.assignment, c.suite) for c in cases}):
        digest.update(suite_key(Path(suites_dir), assignment, suite).encode())
    for case in cases:
        digest.update(f"\0{case.id}\0{case.points}".encode())
    return digest.hexdigest()[:16]
