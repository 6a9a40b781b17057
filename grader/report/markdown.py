"""Markdown feedback: what passed, and for visible cases, why not.

For a student, visible (public) cases get the full diagnostic and what the submission
printed; hidden cases appear only as their visibility allows (see `model.view`): never
their messages, inputs, expected values or anything printed while they ran. An
instructor's copy shows everything.
"""

from __future__ import annotations

from grader.report.model import Audience, CaseResult, Report, Status, view

MAX_PRINTED = 2000


def _fence(text: str) -> str:
    """A code block that the text cannot close early."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}text\n{text}\n{ticks}"


def _failure(r: CaseResult) -> list[str]:
    lines = [f"### {r.assignment} / {r.topic} / {r.name} ({r.status})", ""]
    if r.description:
        lines += [r.description, ""]
    lines += [_fence(r.message or str(r.status)), ""]
    if r.output:
        lines += ["Printed by the code:", "", _fence(r.output[:MAX_PRINTED]), ""]
    return lines


def markdown(report: Report, audience: Audience = Audience.STUDENT) -> str:
    seen = view(report, audience)
    lines = [
        f"# Grading feedback: {report.submission}",
        "",
        f"**Score: {seen.score:g} / {seen.max_score:g}**",
        "",
    ]
    lines += [f"> **Note:** {error}" for error in report.errors]
    if report.errors:
        lines.append("")
    rows = report.topics(seen.shown)
    ungraded = any(row.not_graded for row in rows)
    extra = (" not graded |", " ---: |") if ungraded else ("", "")
    lines += [f"| assignment | topic | passed |{extra[0]} points |", f"| --- | --- | ---: |{extra[1]} ---: |"]
    for row in rows:
        points = f"{row.points:g}/{row.max_points:g}"
        count = f" {row.not_graded} |" if ungraded else ""
        lines.append(f"| {row.assignment} | {row.topic} | {row.passed}/{row.total} |{count} {points} |")
    lines.append("")
    if seen.hidden_line:
        lines += [seen.hidden_line, ""]
    if seen.named_hidden:
        lines += ["## Hidden cases", ""]
        lines += [f"- {r.assignment} / {r.topic} / {r.name}: {r.status}" for r in seen.named_hidden]
        lines.append("")
    groups = report.not_graded(seen.shown)
    if groups:
        lines += ["## Not graded", ""]
        lines += [
            "These cases need an op the submission does not have (missing, or its forward raises "
            "NotImplementedError). They score 0 and nothing else is blamed for them.",
            "",
        ]
        for needs, group in groups.items():
            lines.append(f"- needs {needs}: " + ", ".join(f"{r.topic} / {r.name}" for r in group))
        lines.append("")
    failed = [r for r in seen.shown if not r.passed and r.status is not Status.NOT_GRADED]
    if failed:
        lines += [f"## Failed cases ({len(failed)} of {len(seen.shown)})", ""]
        for r in failed:
            lines += _failure(r)
    elif seen.shown:
        lines += [f"All {len(seen.shown)} cases shown here passed.", ""]
    return "\n".join(lines)
