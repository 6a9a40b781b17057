"""Gradescope's results.json, rendered from a report for the student who uploaded.

Format (Gradescope's autograder specification): top-level `score`, `execution_time`,
`output` and `tests[]`; each test has `name`, `score`, `max_score`, `status`, `output`,
`tags` and `visibility`. Gradescope itself withholds a test until its visibility allows;
even then a hidden case is named only by a number and its points, never by its name,
message or what the submission printed, and the top-level `output` gives hidden points only
as its visibility allows (see `model.view`). The score is every case's: Gradescope shows it
as its own visibility settings say.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from grader.report.model import Audience, CaseResult, Report, Status, view


def test_entry(result: CaseResult, number: int) -> dict[str, Any]:
    status = "passed" if result.passed else "failed"
    if result.hidden:
        return {
            "name": f"{result.assignment} / hidden case {number}",
            "score": result.points,
            "max_score": result.max_points,
            "status": status,
            "output": f"hidden case: {result.status}",
            "tags": [result.assignment, "hidden"],
            "visibility": result.visibility,
        }
    output = result.message
    tags = [result.assignment, result.topic, "public"]
    if result.status is Status.NOT_GRADED:
        tags.append("not graded")  # Gradescope's status is passed or failed: the tag says which
    if result.output and not result.passed:
        output += "\n\nprinted by the submission:\n" + result.output
    return {
        "name": f"{result.assignment} / {result.topic} / {result.name}",
        "number": result.id,
        "score": result.points,
        "max_score": result.max_points,
        "status": status,
        "output": output,
        "tags": tags,
        "visibility": "visible",
    }


def gradescope(report: Report) -> dict[str, Any]:
    seen = view(report, Audience.STUDENT)
    lines = [f"Score: {seen.score:g}/{seen.max_score:g}"]
    if seen.hidden_line:
        lines.append(seen.hidden_line)
    lines += report.errors
    lines += [
        f"Not graded: {len(group)} case(s) need {needs}, which the submission does not have"
        for needs, group in report.not_graded(seen.shown).items()
    ]
    numbers: dict[str, int] = {}
    tests = []
    for r in report.results:
        if r.hidden:
            numbers[r.assignment] = numbers.get(r.assignment, 0) + 1
        tests.append(test_entry(r, numbers.get(r.assignment, 0)))
    return {
        "score": report.score,
        "execution_time": round(report.seconds, 3),
        "output": "\n".join(lines),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"max_score": report.max_score},  # the spec has no top-level max_score
    }


def write_text(text: str, path: str | Path) -> None:
    """Write atomically: a reader never sees half a file, and a crash leaves the old one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def write_json(data: dict[str, Any], path: str | Path) -> None:
    write_text(json.dumps(data, indent=2) + "\n", path)
