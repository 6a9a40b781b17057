"""Gradescope's results.json, built from a grading report.

Format: https://gradescope-autograders.readthedocs.io/en/latest/specs/ — top-level score,
max_score, execution_time, output and tests[]; each test has name, score, max_score, status,
output, tags and visibility. Hidden cases are `after_published` unless configured otherwise,
and their output never carries diagnostics or anything the submission printed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from grader.pipeline import CaseResult, Report

HIDDEN_OUTPUT = "hidden test: {status}"


def test_entry(result: CaseResult, hidden_visibility: str = "after_published") -> dict[str, Any]:
    case = result.case
    status = "passed" if result.passed else "failed"
    hidden = case.suite == "hidden"
    if hidden:
        output = HIDDEN_OUTPUT.format(status=status)
    else:
        output = result.message
        if result.output and not result.passed:
            output += "\n\nprinted by the submission:\n" + result.output
    return {
        "name": f"{case.assignment} / {case.topic} / {case.title}",
        "number": case.id,
        "score": result.score,
        "max_score": case.points,
        "status": status,
        "output": output,
        "tags": [case.assignment, case.topic, case.suite],
        "visibility": hidden_visibility if hidden else "visible",
    }


def gradescope(report: Report, hidden_visibility: str = "after_published") -> dict[str, Any]:
    lines = [f"Score: {report.score:g}/{report.max_score:g}"]
    lines += report.errors
    return {
        "score": report.score,
        "max_score": report.max_score,
        "execution_time": round(report.seconds, 3),
        "output": "\n".join(lines),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [test_entry(r, hidden_visibility) for r in report.results],
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
