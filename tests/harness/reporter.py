"""GitHub Classroom's reporter, its arithmetic ported: what it prints and what it records.

A port of `classroom-resources/autograding-grading-reporter` (commit 43c2d9f), so a test
can compute both of its totals from the environment a grading step leaves:

- `results_of` is `src/main.js`: each runner's results from `<RUNNER.trim().toUpperCase()>_RESULTS`,
  the base64 of a JSON document;
- `console_total` is `src/helpers/test-helpers.js`'s `getTestScore` (tests passed / tests ×
  `max_score`, per runner) summed as `src/aggregate-results.js` does for its "Total:" row;
- `recorded_total` is `src/notify-classroom.js`: the sum of every test's `score` and of
  `max_score`, over the runners whose `max_score` is not 0 (the "Points X/Y" Classroom keeps).
"""

from __future__ import annotations

import base64
import json
from typing import Any


def results_of(runners: str, env: dict[str, str]) -> list[tuple[str, dict[str, Any]]]:
    """main.js: `core.getInput("runners").split(",")`, each runner's variable decoded."""
    found = []
    for runner in runners.split(","):
        encoded = env[f"{runner.strip().upper()}_RESULTS"]
        found.append((runner, json.loads(base64.b64decode(encoded).decode("utf-8"))))
    return found


def _max_score(results: dict[str, Any]) -> float:
    return results.get("max_score") or 0  # getMaxScoreForTest


def _test_score(results: dict[str, Any]) -> float:
    """getTestScore: (passed / tests.length) * max_score (NaN, in JavaScript, for no tests)."""
    tests = results["tests"]
    passed = sum(1 for t in tests if t["status"] == "pass")
    return passed / len(tests) * _max_score(results)


def console_total(runner_results: list[tuple[str, dict[str, Any]]]) -> tuple[float, float]:
    """aggregate-results.js: the table's "Total:" row (score, max score)."""
    return (
        sum(_test_score(results) for _, results in runner_results),
        sum(_max_score(results) for _, results in runner_results),
    )


def recorded_total(runner_results: list[tuple[str, dict[str, Any]]]) -> tuple[float, float]:
    """notify-classroom.js: totalPoints and maxPoints, as Classroom records them."""
    total = maximum = 0.0
    for _, results in runner_results:
        if not results.get("max_score"):
            continue
        maximum += results["max_score"]
        total += sum(t["score"] for t in results["tests"])
    return total, maximum
