"""The terminal view of a grading report: a table per topic, failures, the score line."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from grader.pipeline import Report, by_topic

#: diagnostics that name one op or function: the most useful ones to show first
PINPOINTED = ("wrong gradient from", "wrong value from", "not implemented yet")


def print_report(report: Report, console: Console | None = None, failures: int = 3) -> None:
    console = console or Console()
    table = Table(title=f"{report.submission}", title_justify="left")
    for column in ("assignment", "topic", "passed", "points"):
        table.add_column(column, justify="right" if column in ("passed", "points") else "left")
    for (assignment, topic), results in by_topic(report.results).items():
        passed = sum(r.passed for r in results)
        score = sum(r.score for r in results)
        total = sum(r.case.points for r in results)
        style = "green" if passed == len(results) else "red"
        table.add_row(assignment, topic, f"{passed}/{len(results)}", f"{score:g}/{total:g}", style=style)
    console.print(table)
    for error in report.errors:
        console.print(f"[red]error:[/red] {error}")
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    failed = [r for r in report.results if not r.passed and r.case.suite == "public"]
    shown = sorted(failed, key=lambda r: not r.message.startswith(PINPOINTED))[:failures]
    for r in shown:
        console.print(f"[bold red]FAILED[/bold red] {r.case.id}", highlight=False)
        console.print(r.message, highlight=False, markup=False)
    console.print(f"[bold]Score: {report.score:g}/{report.max_score:g}[/bold] ({report.seconds:.1f} s)")
