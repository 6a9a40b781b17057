"""A notebook cell's rendering of one topic's results: the score line, then each failure.

A test cell prints it; the hidden suite's text is framed by HIDDEN_BEGIN and HIDDEN_END
lines, so that the feedback a student receives (`nbgrader_feedback`) can cut the hidden
cases out and keep only their points.
"""

from __future__ import annotations

from grader.report.model import CaseResult

HIDDEN_BEGIN = "--- hidden cases ---"
HIDDEN_END = "--- end of hidden cases:"


def cell_text(results: list[CaseResult], title: str) -> str:
    """The cell's output: a score line, then each failed case and its diagnostic."""
    earned = sum(r.points for r in results)
    total = sum(r.max_points for r in results)
    lines = [f"{title}: {earned:g}/{total:g} points, {sum(r.passed for r in results)}/{len(results)} cases"]
    for r in results:
        if not r.passed:
            lines.append(f"{str(r.status).upper()} {r.id} ({r.max_points:g} points)")
            lines.extend("    " + line for line in r.message.splitlines())
    return "\n".join(lines)


def hidden_text(results: list[CaseResult], title: str) -> str:
    """The hidden suite's cell output, between the markers; the end line holds the points."""
    earned = sum(r.points for r in results)
    total = sum(r.max_points for r in results)
    return f"{HIDDEN_BEGIN}\n{cell_text(results, title)}\n{HIDDEN_END} {earned:g}/{total:g} points"


def printed(results: list[CaseResult], topic: str, suite: str) -> str:
    """What a test cell prints for the results of one suite of `topic`: in the notebook's
    kernel, and in the autograded notebook the fast path into a course writes."""
    title = f"{topic} ({suite})"
    return hidden_text(results, title) if suite == "hidden" else cell_text(results, title)
