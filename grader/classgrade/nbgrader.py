"""The fast path into an nbgrader course: class grades as `nbgrader autograde` would store them.

The class engine has graded the code extracted from each `submitted/<student>/<assignment>/`
notebook (`layout.from_nbgrader`); here each report's points go per test cell
into the course's `gradebook.db` through nbgrader's own `Gradebook`, one Grade per grade
cell, and `autograded/<student>/<assignment>/` is made with the submitted timestamp and each
test cell's output (`nbgrader_io.GradeWriter`), so `nbgrader export`, `generate_feedback`
and formgrader see them as autograded. A class run writes each student as their report
comes (`CourseGrades.add`), while the others are graded, then those it did not grade now
(`finish`: unchanged since they were graded).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from grader.options import UserError
from grader.report.model import Report

if TYPE_CHECKING:
    from grader.authoring.nbgrader_io import GradeWriter


@contextlib.contextmanager
def _the_users_mistake(course: Path, assignment: str) -> Iterator[None]:
    """A course whose gradebook does not know the assignment's grade cells (nbgrader's
    `MissingEntry`, or no gradebook tables at all) is the user's mistake, said in one line."""
    from grader.authoring.jupyter import import_nbgrader

    import_nbgrader()  # quickly, as `GradeWriter` does; then its exceptions are at hand
    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import OperationalError

    try:
        yield
    except (MissingEntry, OperationalError) as exc:
        reason = " ".join(str(exc).split())[:300]  # SQLAlchemy's message spans lines
        raise UserError(
            f"{course / 'gradebook.db'} does not know {assignment}'s grade cells: run "
            f"`nbgrader generate_assignment {assignment}` in {course} first ({reason})"
        ) from None


class CourseGrades:
    """The class run's grades written into the course: `add` each report as it comes
    (committed at once), `finish` with every report of the class gradebook."""

    def __init__(self, course: Path, assignment: str) -> None:
        self.course, self.assignment = course, assignment
        self.writer: GradeWriter | None = None
        #: the students written so far
        self.written: set[str] = set()

    def __enter__(self) -> CourseGrades:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.writer is not None:
            self.writer.close()

    def add(self, student: str, report: Report, commit: bool = True) -> None:
        """The student's grades, if they submitted the assignment's notebook. The writer is
        made with the first: nbgrader is imported by then (`import_nbgrader_meanwhile`)."""
        if not (self.course / "submitted" / student / self.assignment / f"{self.assignment}.ipynb").is_file():
            return
        with _the_users_mistake(self.course, self.assignment):
            if self.writer is None:
                from grader.authoring.nbgrader_io import GradeWriter

                self.writer = GradeWriter(self.course, self.assignment)
            self.writer.add(student, report.results)
            if commit:
                self.writer.commit()
        self.written.add(student)

    def finish(self, reports: dict[str, Report]) -> tuple[int, list[str]]:
        """Every student of the class gradebook (`reports`, read from it) not written yet, in
        one commit; returns how many were written in all, and what was wrong on the way (one
        line each: a timestamp that is not a date)."""
        for student, report in reports.items():
            if student not in self.written:
                self.add(student, report, commit=False)
        if self.writer is not None:
            with _the_users_mistake(self.course, self.assignment):
                self.writer.commit()
        return len(self.written), list(self.writer.problems.values()) if self.writer else []
