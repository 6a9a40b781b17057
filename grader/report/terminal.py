"""The terminal view of a report: a table per topic, failures, the score line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.report.model import Audience, CaseResult, Report, Status, view

#: diagnostics that name one op or function: the most useful ones to show first
PINPOINTED = ("wrong gradient from", "wrong value from", "not implemented yet")

if TYPE_CHECKING:
    from rich.console import Console


def topic_lines(report: Report, results: list[CaseResult]) -> list[tuple[str, bool]]:
    """The score table as plain lines (label, all passed?): the pytest summary prints these."""
    rows = report.topics(results)
    width = max((len(f"{r.assignment} / {r.topic}") for r in rows), default=0)
    return [
        (
            f"  {f'{r.assignment} / {r.topic}'.ljust(width)}  {r.passed:>3}/{r.total:<3} tests  "
            f"{r.points:g}/{r.max_points:g} points" + (f"  ({r.not_graded} not graded)" * bool(r.not_graded)),
            r.passed == r.total,
        )
        for r in rows
    ]


def not_graded_lines(report: Report, results: list[CaseResult], names: int = 3) -> list[str]:
    """One line per op (or set of ops) the submission lacks: how many cases need it."""
    lines = []
    for needs, group in report.not_graded(results).items():
        shown = ", ".join(r.id for r in group[:names]) + (", ..." if len(group) > names else "")
        lines.append(
            f"not graded: {len(group)} case(s) need {needs}, which the submission does not have ({shown})"
        )
    return lines


def print_report(
    report: Report,
    console: Console | None = None,
    failures: int = 3,
    audience: Audience = Audience.INSTRUCTOR,
    more: str = "",
) -> None:
    """The score table, notes, the first `failures` failed cases with their messages, how
    many more failed (and `more`: where the rest are to be read), then the score line."""
    # rich is imported here, not above: a student's pytest prints `topic_lines` alone, and
    # would pay some 12 ms for rich's import
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # what a submission or its path says is printed as it is, never read as rich's markup:
    # "[prepend]" in a case's id would vanish, and "[/red]" in an exception's message that a
    # note or an error quotes would stop the report with a MarkupError
    console = console or Console()
    seen = view(report, audience)
    table = Table(title=escape(f"{report.submission}"), title_justify="left")
    rows = report.topics(seen.shown)
    ungraded = any(row.not_graded for row in rows)
    columns = ("assignment", "topic", "passed", *(("not graded",) if ungraded else ()), "points")
    for column in columns:
        table.add_column(column, justify="left" if column in ("assignment", "topic") else "right")
    for row in rows:
        style = "green" if row.passed == row.total else "red"
        cells = [row.assignment, row.topic, f"{row.passed}/{row.total}"]
        cells += [str(row.not_graded)] if ungraded else []
        table.add_row(*cells, f"{row.points:g}/{row.max_points:g}", style=style)
    console.print(table)
    for r in seen.named_hidden:
        line = f"hidden: {r.assignment} / {r.topic} / {r.name}: {r.status}"
        console.print(line, highlight=False, markup=False)
    if seen.hidden_line:
        console.print(seen.hidden_line, highlight=False, markup=False)
    for error in report.errors:
        console.print(f"[red]error:[/red] {escape(error)}", highlight=False)
    if audience is Audience.INSTRUCTOR:
        for note in report.notes:
            console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    for line in not_graded_lines(report, seen.shown):
        console.print(line, style="yellow", highlight=False, markup=False)
    failed = [r for r in seen.shown if not r.passed and r.status is not Status.NOT_GRADED]
    shown = sorted(failed, key=lambda r: not r.message.startswith(PINPOINTED))[:failures]
    for r in shown:
        console.print(f"[bold red]{str(r.status).upper()}[/bold red] {escape(r.id)}", highlight=False)
        console.print(r.message, highlight=False, markup=False)
    if len(failed) > len(shown):
        rest = f"{len(failed) - len(shown)} more failed case(s) not shown" + (f": {more}" if more else "")
        console.print(rest, highlight=False, markup=False)
    console.print(f"[bold]Score: {seen.score:g}/{seen.max_score:g}[/bold] ({report.seconds:.1f} s)")
