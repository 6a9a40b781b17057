"""Markdown feedback for the student: what passed, and for visible cases, why not.

Visible (public) cases get the full diagnostic and what the submission printed. Hidden
cases get their name and passed/failed only: never their source, their expected values,
their diagnostic or anything the submission printed while they ran.
"""

from __future__ import annotations

from grader.pipeline import CaseResult, Report, by_topic

MAX_PRINTED = 2000


def _fence(text: str) -> str:
    """A code block that the text cannot close early."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text}\n{ticks}"


def _visible_failure(r: CaseResult) -> list[str]:
    lines = [f"### {r.case.assignment} / {r.case.topic} / {r.case.title}", ""]
    if r.case.description:
        lines += [r.case.description, ""]
    lines += [_fence(r.message or "failed"), ""]
    if r.output:
        lines += ["Printed by your code:", "", _fence(r.output[:MAX_PRINTED]), ""]
    return lines


def markdown(report: Report) -> str:
    lines = [
        f"# Grading feedback: {report.submission}",
        "",
        f"**Score: {report.score:g} / {report.max_score:g}**",
        "",
    ]
    for error in report.errors:
        lines.append(f"> **Note:** {error}")
    if report.errors:
        lines.append("")
    lines += ["| assignment | topic | passed | points |", "| --- | --- | ---: | ---: |"]
    for (assignment, topic), results in by_topic(report.results).items():
        passed = sum(r.passed for r in results)
        score, total = sum(r.score for r in results), sum(r.case.points for r in results)
        lines.append(f"| {assignment} | {topic} | {passed}/{len(results)} | {score:g}/{total:g} |")
    lines.append("")
    visible = [r for r in report.results if r.case.suite != "hidden"]
    failed = [r for r in visible if not r.passed]
    if failed:
        lines += [f"## Failed cases ({len(failed)} of {len(visible)})", ""]
        for r in failed:
            lines += _visible_failure(r)
    elif visible:
        lines += [f"All {len(visible)} visible cases passed.", ""]
    hidden = [r for r in report.results if r.case.suite == "hidden"]
    if hidden:
        lines += [f"## Hidden cases: {sum(r.passed for r in hidden)} of {len(hidden)} passed", ""]
        lines += [
            f"- {r.case.assignment} / {r.case.topic} / {r.case.title}: {'passed' if r.passed else 'failed'}"
            for r in hidden
        ]
        lines.append("")
    return "\n".join(lines)
