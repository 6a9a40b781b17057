"""The class gradebook keeps everything the report model carries, and reads older gradebooks."""

from __future__ import annotations

import sqlite3

from grader.classgrade.gradebook import SCHEMA, Gradebook
from grader.report.model import CaseResult, Report, Status


def a_report() -> Report:
    failed = CaseResult(
        id="micrograd/test_ops.py::mul", name="mul", assignment="micrograd", topic="ops",
        max_points=1.0, status=Status.FAILED, message="wrong gradient from Value.__mul__",
        ops=["mul", "add"], blame="Value.__mul__",
        graph={"nodes": [{"id": 1, "label": "mul", "wrong": True}], "edges": []},
    )  # fmt: skip
    passed = CaseResult(
        id="micrograd/test_ops.py::add", name="add", assignment="micrograd", topic="ops",
        max_points=1.0, status=Status.PASSED, ops=["add"],
    )  # fmt: skip
    return Report("alice", [failed, passed], [], [], 1.5)


def test_a_report_comes_back_as_it_was_recorded(tmp_path):
    report = a_report()
    with Gradebook(tmp_path / "gradebook.db") as book:
        book.record("alice", report, "hash", "key")
        back = book.report("alice")
    assert back.results == report.results
    assert (back.score, back.max_score) == (report.score, report.max_score)


def test_a_gradebook_from_before_the_details_column_still_reads(tmp_path):
    path = tmp_path / "old.db"
    old_schema = "".join(line for line in SCHEMA.splitlines(True) if not line.lstrip().startswith("details "))
    assert "details" not in old_schema
    with sqlite3.connect(path) as db:
        db.executescript(old_schema)
        db.execute(
            "INSERT INTO submissions VALUES "
            "('bob', 'h', 'k', 'graded', 'bob', NULL, '2026-01-01', 1, 1, 0.5, '[]', '[]')"
        )
        db.execute(
            "INSERT INTO results VALUES ('bob', 0, 'micrograd/x::y', 'y', 'micrograd', 'ops', 1, 1, "
            "'passed', '', '', 0, 'visible', '', 0.1)"
        )
    with Gradebook(path) as book:
        (result,) = book.report("bob").results
    assert result.status is Status.PASSED and result.ops == [] and result.graph is None
