"""The class gradebook: SQLite, one row per student and one per student and case.

Each submission is written in ONE transaction (its old rows replaced), so a grader killed at
any moment (kill -9 included) leaves every submission either wholly graded or not at all: a
rerun grades exactly those that are missing or changed. Reports come back out as the report
model (`report`), which every export renders. Shard gradebooks merge into one (`merge`): a
student graded in two shards keeps the later grading.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grader.report.model import CaseResult, Report, Status

SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions (
    student     TEXT PRIMARY KEY,
    hash        TEXT NOT NULL,   -- sha256 of the submission's files
    cases_key   TEXT NOT NULL,   -- what it was graded on (cases, points, suite versions)
    state       TEXT NOT NULL,   -- 'graded', or 'error' when the grader's worker failed on it
    path        TEXT NOT NULL,
    timestamp   TEXT,            -- when it was handed in, if the layout says
    graded_at   TEXT NOT NULL,
    score       REAL NOT NULL,
    max_score   REAL NOT NULL,
    seconds     REAL NOT NULL,
    errors      TEXT NOT NULL,   -- JSON list
    notes       TEXT NOT NULL    -- JSON list
);
CREATE TABLE IF NOT EXISTS results (
    student     TEXT NOT NULL REFERENCES submissions(student) ON DELETE CASCADE,
    position    INTEGER NOT NULL,
    case_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    assignment  TEXT NOT NULL,
    topic       TEXT NOT NULL,
    max_points  REAL NOT NULL,
    points      REAL NOT NULL,
    status      TEXT NOT NULL,
    message     TEXT NOT NULL,
    output      TEXT NOT NULL,
    hidden      INTEGER NOT NULL,
    visibility  TEXT NOT NULL,
    description TEXT NOT NULL,
    seconds     REAL NOT NULL,
    details     TEXT NOT NULL DEFAULT '{}',  -- JSON: the case's ops, the blamed rule, the slip, the graph
    PRIMARY KEY (student, case_id)
);
"""
SUBMISSION_COLUMNS = (
    "student, hash, cases_key, state, path, timestamp, graded_at, score, max_score, seconds, errors, notes"
)
RESULT_COLUMNS = (
    "student, position, case_id, name, assignment, topic, max_points, points, status, message, output, "
    "hidden, visibility, description, seconds, details"
)
#: what `details` holds: what the pages need to draw the wrong node and rate each op
DETAILS = ("ops", "blame", "slip", "graph")


@dataclass(frozen=True)
class Stored:
    """What the gradebook knows of a student's last grading."""

    hash: str
    cases_key: str
    state: str


class GradebookError(Exception):
    """A file that cannot be a class gradebook, named in one line: not a database, one that
    cannot be opened, or another program's database (which is never written into)."""


class Gradebook:
    """One SQLite file; written by one process (the class run's), read by anyone."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise GradebookError(f"gradebook {self.path}: is a directory")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise GradebookError(f"gradebook {self.path}: cannot open it ({exc})") from None
        try:
            foreign = _foreign_tables(self.db)
            if foreign:
                raise GradebookError(
                    f"gradebook {self.path}: another program's database (its tables: "
                    f"{', '.join(foreign)}), not a class gradebook"
                )
            self.db.execute("PRAGMA foreign_keys = ON")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = FULL")
            self.db.executescript(SCHEMA)
            upgrade(self.db)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise GradebookError(f"gradebook {self.path}: cannot use it ({exc})") from None
        except GradebookError:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def stored(self) -> dict[str, Stored]:
        rows = self.db.execute("SELECT student, hash, cases_key, state FROM submissions")
        return {student: Stored(h, key, state) for student, h, key, state in rows}

    def record(
        self,
        student: str,
        report: Report,
        files_hash: str,
        cases_key: str,
        state: str = "graded",
        timestamp: str | None = None,
    ) -> None:
        """Replace the student's grading with this report, all in one transaction."""
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        with self.transaction() as db:
            db.execute("DELETE FROM results WHERE student = ?", (student,))
            db.execute(
                f"INSERT OR REPLACE INTO submissions ({SUBMISSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    student, files_hash, cases_key, state, report.submission, timestamp, now,
                    report.score, report.max_score, report.seconds,
                    json.dumps(report.errors), json.dumps(report.notes),
                ),
            )  # fmt: skip
            db.executemany(
                f"INSERT INTO results ({RESULT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    (
                        student, i, r.id, r.name, r.assignment, r.topic, r.max_points, r.points,
                        str(r.status), r.message, r.output, int(r.hidden), r.visibility,
                        r.description, r.seconds, json.dumps({k: getattr(r, k) for k in DETAILS}),
                    )
                    for i, r in enumerate(report.results)
                ],
            )  # fmt: skip

    def students(self) -> list[str]:
        return [s for (s,) in self.db.execute("SELECT student FROM submissions ORDER BY student")]

    def info(self, student: str) -> dict[str, object]:
        cursor = self.db.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE student = ?", (student,)
        )
        row = cursor.fetchone()
        if row is None:
            raise KeyError(student)
        return dict(zip(SUBMISSION_COLUMNS.split(", "), row, strict=True))

    def stamps(self) -> dict[str, tuple[str | None, str]]:
        """Student -> (when it was handed in, if known; when it was graded)."""
        rows = self.db.execute("SELECT student, timestamp, graded_at FROM submissions")
        return {student: (timestamp, graded_at) for student, timestamp, graded_at in rows}

    def report(self, student: str) -> Report:
        """The student's report, as the report model (every export renders this)."""
        info = self.info(student)
        rows = self.db.execute(
            "SELECT case_id, name, assignment, topic, max_points, status, message, output, hidden, "
            "visibility, description, seconds, details FROM results WHERE student = ? ORDER BY position",
            (student,),
        )
        results = [
            CaseResult(
                id=case_id, name=name, assignment=assignment, topic=topic, max_points=max_points,
                status=Status(status), message=message, output=output, hidden=bool(hidden),
                visibility=visibility, description=description, seconds=seconds, **json.loads(details),
            )
            for case_id, name, assignment, topic, max_points, status, message, output, hidden, visibility,
            description, seconds, details in rows
        ]  # fmt: skip
        return Report(
            str(info["path"]), results, json.loads(str(info["errors"])), json.loads(str(info["notes"])),
            float(info["seconds"]),  # type: ignore[arg-type]
        )  # fmt: skip

    def reports(self) -> Iterator[tuple[str, Report]]:
        for student in self.students():
            yield student, self.report(student)

    def counts(self) -> tuple[int, int]:
        """(submissions, result rows): what a test compares across kills and merges."""
        (subs,) = self.db.execute("SELECT COUNT(*) FROM submissions").fetchone()
        (rows,) = self.db.execute("SELECT COUNT(*) FROM results").fetchone()
        return subs, rows


def _foreign_tables(db: sqlite3.Connection) -> list[str]:
    """The tables of a database that is not a class gradebook (none for an empty one or a
    gradebook): a gradebook's `submissions` has the column `cases_key`."""
    tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    if not tables:
        return []
    columns = {row[1] for row in db.execute("PRAGMA table_info(submissions)")}
    return [] if "cases_key" in columns else sorted(tables)


def upgrade(db: sqlite3.Connection) -> None:
    """Bring a gradebook written by an older version up to this schema, in place: a column
    added since is added with its default, so old grades stay and still read."""
    have = {row[1] for row in db.execute("PRAGMA table_info(results)")}
    if "details" not in have:
        db.execute("ALTER TABLE results ADD COLUMN details TEXT NOT NULL DEFAULT '{}'")


def merge(out: str | Path, shards: Iterable[str | Path]) -> tuple[int, int]:
    """Combine shard gradebooks into `out` (which may hold grades already). A student in
    several takes the latest grading; every student's rows move in one transaction.
    Returns (students, result rows) in `out`."""
    paths = [Path(shard) for shard in shards]
    for path in paths:  # every shard is checked before anything is written
        if not path.is_file():
            raise GradebookError(f"{path}: no such gradebook")
        Gradebook(path).close()  # a shard written by an older version gains the new columns
    with Gradebook(out) as book:
        for path in paths:
            book.db.execute("ATTACH DATABASE ? AS shard", (str(path),))
            try:
                with book.transaction() as db:
                    newer = (
                        "SELECT s.student FROM shard.submissions s LEFT JOIN main.submissions m "
                        "ON m.student = s.student WHERE m.student IS NULL OR s.graded_at > m.graded_at"
                    )
                    db.execute(f"CREATE TEMP TABLE incoming AS {newer}")
                    db.execute("DELETE FROM main.results WHERE student IN (SELECT student FROM incoming)")
                    db.execute(
                        f"INSERT OR REPLACE INTO main.submissions ({SUBMISSION_COLUMNS}) "
                        f"SELECT {SUBMISSION_COLUMNS} FROM shard.submissions "
                        "WHERE student IN (SELECT student FROM incoming)"
                    )
                    db.execute(
                        f"INSERT INTO main.results ({RESULT_COLUMNS}) SELECT {RESULT_COLUMNS} "
                        "FROM shard.results WHERE student IN (SELECT student FROM incoming)"
                    )
                    db.execute("DROP TABLE temp.incoming")
            except sqlite3.DatabaseError as exc:  # its rows stay out: the transaction is undone
                raise GradebookError(f"{path}: cannot merge it ({exc})") from None
            finally:
                book.db.execute("DETACH DATABASE shard")
        return book.counts()
