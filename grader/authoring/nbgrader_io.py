"""The nbgrader course's submissions, without running a kernel: the fast path's parts.

- `extract` turns a submitted notebook back into a submission directory with the package
  layout (`micrograd/engine.py`, ...): each code cell that came from a module (its
  `metadata.grader.module`, set by the generator) goes to that module, after the head
  (docstring, imports) and before the tail of reference/'s file. Locked cells take the source
  notebook's text when it is given, as `nbgrader autograde` restores them.
- `cell_scores` sums a report's case scores per test cell (one per topic).
- `write_grades` stores those scores in nbgrader's gradebook.db through nbgrader's own
  `Gradebook` (one Grade per grade cell, as `auto_score`) and makes
  `autograded/<student>/<assignment>/` with the submitted timestamp, so that `nbgrader
  export` and formgrader show the submission as autograded.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import nbformat

from grader.authoring.notebooks import _slug, package_files
from grader.notebook import LAYOUT
from grader.pipeline import REPO
from grader.report.model import CaseResult


def _cells_by_id(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    return {grade_id: c for grade_id, c in zip(ids, nb.cells, strict=True) if grade_id}


def extract(
    notebook: str | Path,
    directory: str | Path,
    assignment: str,
    source: str | Path | None = None,
    reference: Path = REPO / "reference",
) -> Path:
    """Write the notebook's code as `directory/<assignment>/...`; returns `directory`."""
    nb = nbformat.read(str(notebook), as_version=4)
    originals = _cells_by_id(nbformat.read(str(source), as_version=4)) if source else {}
    bodies: dict[str, list[str]] = {module: [] for module in LAYOUT[assignment]}
    for cell in nb.cells:
        module = cell.metadata.get("grader", {}).get("module")
        if cell.cell_type != "code" or module not in bodies:
            continue
        meta = cell.metadata.get("nbgrader", {})
        text = cell.source
        if meta.get("locked") and meta.get("grade_id") in originals:
            text = originals[meta["grade_id"]].source
        bodies[module].append(text.strip("\n"))
    package = Path(directory) / assignment
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    shutil.copy(reference / assignment / "__init__.py", package / "__init__.py")
    for module, split in package_files(reference, assignment).items():
        text = split.head + "\n\n\n".join(bodies[module]) + "\n"
        if split.tail:
            text += "\n\n" + split.tail
        (package / f"{module}.py").write_text(text)
    return Path(directory)


def cell_scores(results: Iterable[CaseResult], assignment: str) -> dict[str, float]:
    """Points per test cell (`test_<topic>`) of the assignment's notebook."""
    scores: dict[str, float] = {}
    for r in results:
        if r.assignment == assignment:
            key = f"test_{_slug(r.topic)}"
            scores[key] = scores.get(key, 0.0) + r.points
    return scores


def write_grades(course: str | Path, assignment: str, student: str, scores: dict[str, float]) -> None:
    """Store `scores` (grade cell id -> points) for the student's submission of the
    assignment, as `nbgrader autograde` would; the notebook is named after the assignment.
    A test cell the student deleted scores zero, as it does when autograding."""
    write_class_grades(course, assignment, {student: scores})


def write_class_grades(course: str | Path, assignment: str, scores: dict[str, dict[str, float]]) -> None:
    """`write_grades` for many students (student -> grade cell id -> points), in one
    gradebook session and one commit."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import parse_utc

    course = Path(course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, cells in scores.items():
            submitted = course / "submitted" / student / assignment
            stamp = submitted / "timestamp.txt"
            timestamp = parse_utc(stamp.read_text().strip()) if stamp.is_file() else None
            notebook = nbformat.read(str(submitted / f"{assignment}.ipynb"), as_version=4)
            present = set(_cells_by_id(notebook))
            gb.update_or_create_student(student)
            # nbgrader builds a new submission's notebooks and grades while its queries run;
            # with autoflush on, SQLAlchemy flushes the half-built objects and warns (SAWarning)
            with gb.db.no_autoflush:
                gb.update_or_create_submission(assignment, student, timestamp=timestamp)
            for grade_id, points in cells.items():
                grade = gb.find_grade(grade_id, assignment, assignment, student)
                grade.auto_score = points if grade_id in present else 0.0
                grade.needs_manual_grade = False
        gb.db.commit()
    for student in scores:
        submitted = course / "submitted" / student / assignment
        autograded = course / "autograded" / student / assignment
        autograded.mkdir(parents=True, exist_ok=True)
        for path in submitted.iterdir():
            if path.is_file():
                shutil.copy2(path, autograded / path.name)
