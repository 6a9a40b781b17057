"""Exports, each rendered from the report model as the gradebooks give it back.

The exports cover every assignment graded into the same output folder, whichever run graded
it: a class graded for one assignment and then for another (`--assignment`, or nbgrader's
fast path run once per assignment) has one gradebook per run, and each student's grading of
each assignment is exported from the gradebook that graded it last (`latest`).

- `grades.csv`: nbgrader's export columns, one row per student and assignment;
- `cases.csv`: one row per student and case (the instructor's view: messages included, and
  the part each failure is laid at and the slip it names);
- `results/<student>/results.json`: Gradescope's format, the student's view
  (`grader.report.gradescope`);
- `pages/index.html` (the class dashboard) and `pages/students/*.html` (`grader.report.html`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from grader.classgrade.gradebook import Gradebook
from grader.report.gradescope import gradescope, write_json, write_text
from grader.report.html import write_pages
from grader.report.model import DEFAULT_HIDDEN_VISIBILITY, Report

NBGRADER_COLUMNS = (
    "assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
    "raw_score", "late_submission_penalty", "score", "max_score",
)  # fmt: skip
CASE_COLUMNS = (
    "student_id", "assignment", "case_id", "name", "topic", "suite", "status", "points", "max_points",
    "seconds", "message", "laid_at", "slip",
)  # fmt: skip


def by_assignment(report: Report) -> dict[str, Report]:
    """The report split per assignment (each part sums itself through the model); a report
    with no case at all (nothing could be graded) is one part, under no assignment."""
    parts: dict[str, Report] = {}
    for r in report.results:
        parts.setdefault(r.assignment, replace(report, results=[])).results.append(r)
    return parts or {"": report}


@dataclass(frozen=True)
class Graded:
    """One student's grading of one assignment, as a gradebook holds it."""

    report: Report  # that assignment's part of the student's report
    timestamp: str  # when it was handed in ("" when the layout does not say)
    graded_at: str


def latest(
    books: Sequence[Gradebook], reports: dict[str, Report] | None = None
) -> dict[str, dict[str, Graded]]:
    """Student -> assignment -> its latest grading in any of `books`. `reports` are the
    first book's, when the caller has read them already (a class's take a while to decode)."""
    found: dict[str, dict[str, Graded]] = {}
    for i, book in enumerate(books):
        stamps = book.stamps()
        mine = reports if i == 0 and reports is not None else dict(book.reports())
        for student, report in mine.items():
            timestamp, graded_at = stamps[student]
            for assignment, part in by_assignment(report).items():
                old = found.setdefault(student, {}).get(assignment)
                if old is None or graded_at > old.graded_at:
                    found[student][assignment] = Graded(part, timestamp or "", graded_at)
    return dict(sorted(found.items()))


def joined(parts: dict[str, Graded]) -> Report:
    """A student's report over every assignment graded (one page, one results.json)."""
    ordered = [parts[a].report for a in sorted(parts)]
    return replace(
        ordered[0],
        results=[r for part in ordered for r in part.results],
        errors=list(dict.fromkeys(e for part in ordered for e in part.errors)),
        notes=list(dict.fromkeys(n for part in ordered for n in part.notes)),
        seconds=sum(part.seconds for part in ordered),
    )


def grades_rows(graded: dict[str, dict[str, Graded]]) -> list[dict[str, object]]:
    rows = []
    for student, parts in graded.items():
        for assignment, one in sorted(parts.items()):
            if not assignment:
                continue  # nothing was graded: no assignment to give a row
            rows.append(
                {
                    "assignment": assignment, "duedate": "", "timestamp": one.timestamp,
                    "student_id": student, "last_name": "", "first_name": "", "email": "",
                    "raw_score": one.report.score, "late_submission_penalty": 0.0,
                    "score": one.report.score, "max_score": one.report.max_score,
                }
            )  # fmt: skip
    return rows


def _csv(columns: tuple[str, ...], rows: list[dict[str, object]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def case_rows(reports: dict[str, Report]) -> list[dict[str, object]]:
    return [
        {
            "student_id": student, "assignment": r.assignment, "case_id": r.id, "name": r.name,
            "topic": r.topic, "suite": r.suite, "status": str(r.status), "points": r.points,
            "max_points": r.max_points, "seconds": round(r.seconds, 4), "message": r.message,
            "laid_at": r.blame, "slip": r.slip,
        }
        for student, report in reports.items()
        for r in report.results
    ]  # fmt: skip


def export_all(
    books: Gradebook | Sequence[Gradebook],
    out: str | Path,
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
    reports: dict[str, Report] | None = None,
) -> list[Path]:
    """Write every export under `out` from the latest grading of each student's each
    assignment in `books`; returns the paths written. `reports` are the first book's, when
    the caller has read them already."""
    out = Path(out)
    graded = latest([books] if isinstance(books, Gradebook) else books, reports)
    reports = {student: joined(parts) for student, parts in graded.items()}
    written = [out / "grades.csv", out / "cases.csv"]
    write_text(_csv(NBGRADER_COLUMNS, grades_rows(graded)), written[0])
    write_text(_csv(CASE_COLUMNS, case_rows(reports)), written[1])
    for student, report in reports.items():
        path = out / "results" / student / "results.json"
        write_json(gradescope(report), path)
        written.append(path)
    write_pages(reports, out / "pages", visibility)
    written.append(out / "pages" / "index.html")
    return written
