"""What the instructor watches: a progress bar with an ETA, then a summary table (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from grader.classgrade.engine import ClassRun
from grader.classgrade.gradebook import Gradebook
from grader.report.model import Report


class ClassProgress:
    """`on_start` / `on_done` callbacks for `grade_class` that drive a rich progress bar."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress = Progress(
            TextColumn("[bold]grading"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}", markup=False),  # a student's name, as it is
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.task = None

    def __enter__(self) -> ClassProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def on_start(self, todo: int, skipped: int) -> None:
        if skipped:
            self.console.print(f"{skipped} submission(s) unchanged since they were graded: skipped")
        self.task = self.progress.add_task("grading", total=todo, last="")

    def on_done(self, student: str, report: Report) -> None:
        if self.task is not None:
            self.progress.update(
                self.task, advance=1, last=f"{student} {report.score:g}/{report.max_score:g}"
            )


def summary(book: Gradebook, reports: dict[str, Report], run: ClassRun, seconds: float, jobs: int) -> Table:
    """One row per student in the gradebook (`reports`, read from it), then the run's totals
    in the caption."""
    table = Table(title="Class grades")
    for column in ("student", "score", "max", "%", "state", "graded now", "seconds", "errors"):
        table.add_column(column, justify="right" if column in ("score", "max", "%", "seconds") else "left")
    for student, report in reports.items():
        info = book.info(student)
        share = 100 * report.score / report.max_score if report.max_score else 0.0
        errors = "; ".join(report.errors)[:60]
        table.add_row(  # names and errors as they are, never read as rich's markup
            escape(student), f"{report.score:g}", f"{report.max_score:g}", f"{share:.0f}", str(info["state"]),
            "yes" if student in run.graded else "", f"{report.seconds:.1f}", escape(errors),
        )  # fmt: skip
    graded = len(run.graded)
    rate = graded / seconds if seconds > 0 else 0.0
    table.caption = (
        f"{graded} graded, {len(run.skipped)} unchanged, {len(run.failed)} worker failures; "
        f"{seconds:.1f} s on {jobs} worker(s): {rate:.2f} submissions/s"
    )
    return table
