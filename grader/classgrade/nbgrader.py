"""The fast path into an nbgrader course: class grades as `nbgrader autograde` would store them.

The class engine has graded the code extracted from each `submitted/<student>/<assignment>/`
notebook (`layout.from_nbgrader`); here each report's points go per test cell
into the course's `gradebook.db` through nbgrader's own `Gradebook`, one Grade per grade
cell, and `autograded/<student>/<assignment>/` is made with the submitted timestamp and each
test cell's output (`nbgrader_io.write_class_grades`), so `nbgrader export`,
`generate_feedback` and formgrader see them as autograded.
"""

from __future__ import annotations

from pathlib import Path

from grader.options import UserError
from grader.report.model import Report


def write_course_grades(course: Path, assignment: str, reports: dict[str, Report]) -> tuple[int, list[str]]:
    """Every student of the class gradebook (`reports`, read from it) who submitted
    `assignment`; returns how many, and what was wrong on the way (one line each: a
    timestamp that is not a date). A course whose gradebook does not know the assignment's
    grade cells (nbgrader's `MissingEntry`, or no gradebook tables at all) is the user's
    mistake, said in one line."""
    from grader.authoring.jupyter import import_nbgrader
    from grader.authoring.nbgrader_io import write_class_grades

    import_nbgrader()  # quickly, as `write_class_grades` does; then its exceptions are at hand
    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import OperationalError

    results = {
        student: report.results
        for student, report in reports.items()
        if (course / "submitted" / student / assignment / f"{assignment}.ipynb").is_file()
    }
    try:
        problems = write_class_grades(course, assignment, results)
    except (MissingEntry, OperationalError) as exc:
        reason = " ".join(str(exc).split())[:300]  # SQLAlchemy's message spans lines
        raise UserError(
            f"{course / 'gradebook.db'} does not know {assignment}'s grade cells: run "
            f"`nbgrader generate_assignment {assignment}` in {course} first ({reason})"
        ) from None
    return len(results), problems
