"""The fast path into an nbgrader course: class grades as `nbgrader autograde` would store them.

The class engine has graded the code extracted from each `submitted/<student>/<assignment>/`
notebook (`layout.from_nbgrader`); here each report's points go per test cell
(`nbgrader_io.cell_scores`) into the course's `gradebook.db` through nbgrader's own
`Gradebook`, one Grade per grade cell, and `autograded/<student>/<assignment>/` is made
with the submitted timestamp, so `nbgrader export` and formgrader see them as autograded.
"""

from __future__ import annotations

from pathlib import Path

from grader.report.model import Report


def write_course_grades(course: Path, assignment: str, reports: dict[str, Report]) -> int:
    """Every student of the class gradebook (`reports`, read from it) who submitted
    `assignment`; returns how many."""
    from grader.authoring.nbgrader_io import cell_scores, write_class_grades
    from grader.classgrade.cli import UsageError

    scores = {
        student: cell_scores(report.results, assignment)
        for student, report in reports.items()
        if (course / "submitted" / student / assignment / f"{assignment}.ipynb").is_file()
    }
    try:
        write_class_grades(course, assignment, scores)
    except Exception as exc:  # nbgrader's MissingEntry and friends: the course is not set up
        if type(exc).__name__ in ("MissingEntry", "OperationalError"):
            raise UsageError(
                f"{course / 'gradebook.db'} does not know {assignment}'s grade cells: run "
                f"`nbgrader generate_assignment {assignment}` in {course} first ({exc})"
            ) from None
        raise
    return len(scores)
