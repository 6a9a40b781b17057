"""Exports, each rendered from the report model as the gradebook gives it back.

- `grades.csv`: nbgrader's export columns, one row per student and assignment;
- `cases.csv`: one row per student and case (the instructor's view: messages included);
- `results/<student>/results.json`: Gradescope's format, the student's view
  (`grader.report.gradescope`);
- `pages/index.html` (the class dashboard) and `pages/students/*.html` (`grader.report.html`).
"""

from __future__ import annotations

import csv
import io
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
    "seconds", "message",
)  # fmt: skip


def by_assignment(report: Report) -> dict[str, Report]:
    """The report split per assignment (each part sums itself through the model)."""
    parts: dict[str, Report] = {}
    for r in report.results:
        parts.setdefault(r.assignment, Report(report.submission, errors=report.errors)).results.append(r)
    return parts


def grades_rows(book: Gradebook, reports: dict[str, Report]) -> list[dict[str, object]]:
    rows = []
    for student, report in reports.items():
        timestamp = book.info(student)["timestamp"] or ""
        for assignment, part in sorted(by_assignment(report).items()):
            rows.append(
                {
                    "assignment": assignment, "duedate": "", "timestamp": timestamp, "student_id": student,
                    "last_name": "", "first_name": "", "email": "", "raw_score": part.score,
                    "late_submission_penalty": 0.0, "score": part.score, "max_score": part.max_score,
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
        }
        for student, report in reports.items()
        for r in report.results
    ]  # fmt: skip


def export_all(
    book: Gradebook,
    out: str | Path,
    visibility: str = DEFAULT_HIDDEN_VISIBILITY,
    reports: dict[str, Report] | None = None,
) -> list[Path]:
    """Write every export under `out`; returns the paths written. `reports` are the book's,
    when the caller has read them already (a class's take a while to decode)."""
    out = Path(out)
    reports = dict(book.reports()) if reports is None else reports
    written = [out / "grades.csv", out / "cases.csv"]
    write_text(_csv(NBGRADER_COLUMNS, grades_rows(book, reports)), written[0])
    write_text(_csv(CASE_COLUMNS, case_rows(reports)), written[1])
    for student, report in reports.items():
        path = out / "results" / student / "results.json"
        write_json(gradescope(report), path)
        written.append(path)
    write_pages(reports, out / "pages", visibility)
    written.append(out / "pages" / "index.html")
    return written
