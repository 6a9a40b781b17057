"""GitHub Classroom's grader output, rendered from a report for the student who pushed.

Classroom's reporter step (`classroom-resources/autograding-grading-reporter`) reads, for
each runner named in its `runners` input, the environment variable `<RUNNER>_RESULTS`
(upper-cased, hyphens kept): the base64 of a compact JSON document in the format its own
graders write (`autograding-command-grader`):

    {"version": 1, "status": "pass" | "fail" | "error", "max_score": N,
     "tests": [{"name", "status", "score", "message", "line_no", "test_code", "filename",
                "duration"}, ...]}

A test's `status` is pass, fail or error; `line_no` 0 means unknown; `duration` is in
milliseconds (the case's time on the submission). The reporter fails the check when a
runner's `status` is not "pass", and counts points twice, with two formulas:

- Classroom records the sum of every runner's `tests[].score`, out of the sum of `max_score`;
- its console prints, per runner, the tests passed / the tests × `max_score`, and their sum.

The two agree only when every test of a runner is worth the same. So the cases are split
into one runner per point value (`worth1`, `worth2`, ...: a case worth 2 points is in
`worth2`), and the points are whole numbers, as Classroom's own graders give them: when a
case is worth half a point, every point is doubled (`scale`), which leaves the grade's
fraction as it is.

Everything in the documents is shown to the student in the Actions log, so they render the
student's view (`model.view`): hidden cases as a number and their points, or, with
visibility "hidden", not at all (and then not in `max_score` either). Linux limits one
environment variable to 128 KiB, so `encode` shortens the messages until the base64 fits in
`MAX_ENCODED`.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
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


#: a runner's id: its tests' points, in what the reporter's input accepts (letters and
#: digits: an odd fraction's point is written "p")
RUNNER = "worth{points}"
#: the largest factor points are multiplied by to make them whole (halves: 2)
MAX_SCALE = 100

#: a test as the reporter reads it, with the points it is worth (before `scale`)
Entry = tuple[float, dict[str, Any]]


def _entry(result: CaseResult, name: str, message: str, where: tuple[str, int] | None, rerun: str) -> Entry:
    filename, line = where or ("", 0)
    test = {
        "name": name,
        "status": STATUS[result.status],
        "score": result.points,
        "message": message,
        "line_no": line,
        "test_code": rerun if not result.passed else "",
        "filename": filename,
        "duration": round(result.seconds * 1000),
    }
    return result.max_points, test


def scale(points: Iterable[float]) -> int:
    """The smallest factor that makes every one of `points` a whole number (1, or 2 for
    halves); 1 if none up to MAX_SCALE does (a scope's odd fraction: points stay as they are)."""
    factor = 1
    for p in points:
        factor = math.lcm(factor, Fraction(p).limit_denominator(MAX_SCALE).denominator)
    return factor if factor <= MAX_SCALE else 1


def _whole(x: float) -> float | int:
    return int(round(x)) if abs(x - round(x)) < 1e-9 else x


def runners(entries: list[Entry], status: str | None = None) -> dict[str, dict[str, Any]]:
    """Runner id -> grader-output document: one runner per point value, in increasing order,
    every test of a runner worth the same whole number of points. `status` overrides each
    runner's (an error when grading could not run)."""
    factor = scale(points for points, _ in entries)
    groups: dict[float | int, list[dict[str, Any]]] = {}
    for points, test in entries:
        worth = _whole(points * factor)
        groups.setdefault(worth, []).append({**test, "score": worth if test["status"] == "pass" else 0})
    documents = {}
    for worth in sorted(groups):
        tests = groups[worth]
        passed = all(t["status"] == "pass" for t in tests)
        documents[RUNNER.format(points=worth).replace(".", "p")] = {
            "version": FORMAT_VERSION,
            "status": status or ("pass" if passed else "fail"),
            "max_score": _whole(worth * len(tests)),
            "tests": tests,
        }
    return documents


def classroom(
    report: Report,
    where: Mapping[str, tuple[str, int]] | None = None,
    rerun: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """The runners' grader-output documents (`runners`). `where` gives a case's file and line
    by case id, `rerun` the command that runs it alone (shown with a failing test as its
    `test_code`)."""
    where, rerun = where or {}, rerun or {}
    seen = view(report, Audience.STUDENT)
    entries = []
    for r in seen.shown:
        message = r.message or ("" if r.passed else str(r.status))
        if r.output and not r.passed:
            message += "\n\nprinted by the submission:\n" + r.output
        name = f"{r.assignment} / {r.topic} / {r.name}"
        entries.append(_entry(r, name, message, where.get(r.id), rerun.get(r.id, "")))
    numbers: dict[str, int] = {}
    counted_hidden = [r for r in report.results if r.hidden and r.visibility != "hidden"]
    for r in counted_hidden:
        numbers[r.assignment] = numbers.get(r.assignment, 0) + 1
        name = f"{r.assignment} / hidden case {numbers[r.assignment]}"
        if r.visibility == "visible":
            name += f": {r.topic} / {r.name}"
        entries.append(_entry(r, name, f"hidden case: {r.status}", None, ""))
    if not entries:
        return failed_to_grade("; ".join(report.errors) or "no case was graded")
    return runners(entries)


def failed_to_grade(reason: str, names: list[tuple[str, float]] | None = None) -> dict[str, dict[str, Any]]:
    """The runners when grading itself could not run: every known case (name, points) as an
    error with the reason, or one test worth a point when none is known. `max_score` stays
    positive, so that Classroom records the zero instead of no grade at all."""
    test = {"status": "error", "score": 0, "message": reason, "line_no": 0, "test_code": ""}
    entries = [
        (points, {"name": name, **test, "filename": "", "duration": 0}) for name, points in names or []
    ]
    entries = [e for e in entries if e[0] > 0] or [
        (1, {"name": "grading", **test, "filename": "", "duration": 0})
    ]
    return runners(entries, status="error")


def totals(documents: Mapping[str, dict[str, Any]]) -> tuple[float, float]:
    """(points, out of): what Classroom records for these runners."""
    earned = sum(t["score"] for document in documents.values() for t in document["tests"])
    return earned, sum(document["max_score"] for document in documents.values())


def _b64(document: dict[str, Any]) -> str:
    compact = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(compact.encode()).decode("ascii")


def encode(document: dict[str, Any], limit: int = MAX_ENCODED) -> str:
    """Base64 of the compact JSON, within `limit` characters. First the rerun commands go
    (the file and the name say the same), then long messages are cut, in steps, the same for
    every test (the step's log keeps the full diagnostics); then the tests are summed up per
    topic, and at last into one. Every step keeps the grade and `max_score` (summed up, a
    runner's tests are no longer worth the same, and the reporter's console may print another
    total: only a document of thousands of cases comes to that)."""
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
