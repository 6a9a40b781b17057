"""GitHub Classroom's grader output, rendered from a report for the student who pushed.

Classroom's reporter step (`classroom-resources/autograding-grading-reporter`) reads each
grading step's output `result`: the base64 of a JSON document in the format its own graders
write (`autograding-command-grader`):

    {"version": 1, "status": "pass" | "fail" | "error", "max_score": N,
     "tests": [{"name", "status", "score", "message", "line_no", "test_code", "filename",
                "duration"}, ...]}

It records the sum of `tests[].score` out of `max_score` as the grade, and fails the check
when `status` is not "pass". A test's `status` is pass, fail or error; `line_no` 0 means
unknown; `duration` is in milliseconds (the case's time on the submission).

Everything in the document is shown to the student in the Actions log, so it renders the
student's view (`model.view`): hidden cases as a number and their points, or, with
visibility "hidden", not at all (and then not in `max_score` either). The reporter receives
the result through an environment variable, and Linux limits one variable to 128 KiB, so
`encode` shortens the messages until the base64 fits in `MAX_ENCODED`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any

from grader.report.model import Audience, CaseResult, Report, Status, view

FORMAT_VERSION = 1
#: bytes of base64: under Linux's limit on one environment string (MAX_ARG_STRLEN, 128 KiB),
#: with room for the variable's name
MAX_ENCODED = 120_000
#: message lengths tried in turn until the result fits
MESSAGE_LIMITS = (1200, 400, 160, 60)
STATUS = {
    Status.PASSED: "pass",
    Status.FAILED: "fail",
    Status.NOT_GRADED: "fail",
    Status.ERROR: "error",
    Status.TIMED_OUT: "error",
}


def _entry(
    result: CaseResult, name: str, message: str, where: tuple[str, int] | None, rerun: str
) -> dict[str, Any]:
    filename, line = where or ("", 0)
    return {
        "name": name,
        "status": STATUS[result.status],
        "score": result.points,
        "message": message,
        "line_no": line,
        "test_code": rerun if not result.passed else "",
        "filename": filename,
        "duration": round(result.seconds * 1000),
    }


def classroom(
    report: Report,
    where: Mapping[str, tuple[str, int]] | None = None,
    rerun: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The grader-output document. `where` gives a case's file and line by case id, `rerun`
    the command that runs it alone (shown with a failing test as its `test_code`)."""
    where, rerun = where or {}, rerun or {}
    seen = view(report, Audience.STUDENT)
    tests = []
    for r in seen.shown:
        message = r.message or ("" if r.passed else str(r.status))
        if r.output and not r.passed:
            message += "\n\nprinted by the submission:\n" + r.output
        name = f"{r.assignment} / {r.topic} / {r.name}"
        tests.append(_entry(r, name, message, where.get(r.id), rerun.get(r.id, "")))
    numbers: dict[str, int] = {}
    counted_hidden = [r for r in report.results if r.hidden and r.visibility != "hidden"]
    for r in counted_hidden:
        numbers[r.assignment] = numbers.get(r.assignment, 0) + 1
        name = f"{r.assignment} / hidden case {numbers[r.assignment]}"
        if r.visibility == "visible":
            name += f": {r.topic} / {r.name}"
        tests.append(_entry(r, name, f"hidden case: {r.status}", None, ""))
    if not tests:
        return failed_to_grade("; ".join(report.errors) or "no case was graded")
    status = "pass" if all(t["status"] == "pass" for t in tests) else "fail"
    return {"version": FORMAT_VERSION, "status": status, "max_score": seen.max_score, "tests": tests}


def failed_to_grade(reason: str, names: list[tuple[str, float]] | None = None) -> dict[str, Any]:
    """The document when grading itself could not run: every known case (name, points) as an
    error with the reason, or one test when none is known. `max_score` stays positive, so
    that Classroom records the zero instead of no grade at all."""
    entries = names or [("grading", 1.0)]
    tests = [
        {
            "name": name,
            "status": "error",
            "score": 0,
            "message": reason,
            "line_no": 0,
            "test_code": "",
            "filename": "",
            "duration": 0,
        }
        for name, _ in entries
    ]
    return {
        "version": FORMAT_VERSION,
        "status": "error",
        "max_score": sum(points for _, points in entries) or 1.0,
        "tests": tests,
    }


def _b64(document: dict[str, Any]) -> str:
    compact = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(compact.encode()).decode("ascii")


def encode(document: dict[str, Any], limit: int = MAX_ENCODED) -> str:
    """Base64 of the compact JSON, within `limit` characters. First the rerun commands go
    (the file and the name say the same), then long messages are cut, in steps, the same for
    every test (the step's log keeps the full diagnostics); then the tests are summed up per
    topic, and at last into one. Every step keeps the grade and `max_score`."""
    tests = document["tests"]
    attempts = [tests, [{**t, "test_code": ""} for t in tests]]
    attempts += [
        [{**t, "test_code": "", "message": _cut(t["message"], n)} for t in tests] for n in MESSAGE_LIMITS
    ]
    attempts += [
        _grouped(tests, lambda name: name.rsplit(" / ", 1)[0]),
        _grouped(tests, lambda name: "all cases"),
    ]
    for attempt in attempts:
        encoded = _b64({**document, "tests": attempt})
        if len(encoded) <= limit:
            return encoded
    raise ValueError(f"a grader-output document does not fit in {limit} characters")


def _grouped(tests: list[dict[str, Any]], key: Callable[[str], str]) -> list[dict[str, Any]]:
    """One test per group of names: the group's summed score, and how many of its cases passed."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for test in tests:
        groups.setdefault(key(test["name"]), []).append(test)
    merged = []
    for name, group in groups.items():
        statuses = {t["status"] for t in group}
        passed = sum(t["status"] == "pass" for t in group)
        merged.append(
            {
                "name": name,
                "status": "error" if "error" in statuses else "fail" if "fail" in statuses else "pass",
                "score": sum(t["score"] for t in group),
                "message": f"{passed} of {len(group)} cases passed",
                "line_no": 0,
                "test_code": "",
                "filename": "",
                "duration": sum(t["duration"] for t in group),
            }
        )
    return merged


def _cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[: size - 4] + " ..."
