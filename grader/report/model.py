"""The report model: what grading found, as plain data, rendered by every front end.

The pipeline builds one `Report` per submission; the terminal, `feedback.md`,
`results.json`, the pytest score table (and the gradebook, pages and notebooks) render it.
No renderer adds points up itself: `Report.score`, `Report.max_score` and `Report.topics`
do, for everyone.

Every rendering takes its reader. An instructor sees everything. A student sees public
cases in full, and hidden cases only as their visibility allows (Gradescope's words):

    visible           each hidden case's name and status (never its message or output)
    after_published   one line: the hidden cases' points        (the default)
    after_due_date    the same line
    hidden            nothing about hidden cases, and totals over the visible ones only
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # the submission's numbers are wrong
    ERROR = "error"  # it raised, crashed, could not be imported, or was flagged
    TIMED_OUT = "timed out"
    NOT_GRADED = "not graded"  # the case needs an op the submission does not have


class Audience(StrEnum):
    STUDENT = "student"
    INSTRUCTOR = "instructor"


VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
DEFAULT_HIDDEN_VISIBILITY = "after_published"


@dataclass
class CaseResult:
    id: str
    name: str
    assignment: str
    topic: str
    max_points: float
    status: Status
    message: str = ""
    output: str = ""  # what the submission printed while the case ran
    hidden: bool = False
    visibility: str = "visible"
    description: str = ""
    #: what a not-graded case needs that the submission does not have
    missing: list[str] = field(default_factory=list)
    seconds: float = 0.0  # how long the case ran on the submission
    #: the ops the case exercises (the oracle's tape: the same for every submission)
    ops: list[str] = field(default_factory=list)
    #: the op rule (or "backward", or the function that raised) a failure is laid at, ""
    #: when not one op: from the diagnosis, as data
    blame: str = ""
    #: the catalogued slip the message names (`grader/assignments/<name>/slips.py`), if any
    slip: str = ""
    #: the expression around the wrong node, as plain data (`draw.draw_graph` draws it)
    graph: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    @property
    def points(self) -> float:
        return self.max_points if self.passed else 0.0

    @property
    def suite(self) -> str:
        return "hidden" if self.hidden else "public"

    def to_plain(self) -> dict[str, Any]:
        return {**asdict(self), "status": str(self.status), "points": self.points}

    @classmethod
    def from_plain(cls, obj: dict[str, Any]) -> CaseResult:
        fields = {k: v for k, v in obj.items() if k != "points"}
        return cls(**{**fields, "status": Status(obj["status"])})


@dataclass
class TopicRow:
    assignment: str
    topic: str
    passed: int
    total: int
    points: float
    max_points: float
    #: cases that need an op the submission does not have (counted in `total`, 0 points)
    not_graded: int = 0


@dataclass
class Report:
    submission: str
    results: list[CaseResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # problems that are not one case's
    notes: list[str] = field(default_factory=list)  # for whoever runs the grader, not the student
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(r.points for r in self.results)

    @property
    def max_score(self) -> float:
        return sum(r.max_points for r in self.results)

    def not_graded(self, results: list[CaseResult] | None = None) -> dict[str, list[CaseResult]]:
        """The cases not graded, by what they need ("tanh", "Tanh, EWisePow"), in the order
        they came: one line per group in every rendering."""
        groups: dict[str, list[CaseResult]] = {}
        for r in self.results if results is None else results:
            if r.status is Status.NOT_GRADED:
                # a result read back from a store that keeps only the message still groups
                needs = ", ".join(r.missing) or r.message.removeprefix("not graded: needs ").split(" (")[0]
                groups.setdefault(needs, []).append(r)
        return groups

    def topics(self, results: list[CaseResult] | None = None) -> list[TopicRow]:
        """One row per (assignment, topic), in the order the cases came."""
        rows: dict[tuple[str, str], TopicRow] = {}
        for r in self.results if results is None else results:
            row = rows.setdefault((r.assignment, r.topic), TopicRow(r.assignment, r.topic, 0, 0, 0.0, 0.0))
            row.total += 1
            row.passed += r.passed
            row.not_graded += r.status is Status.NOT_GRADED
            row.points += r.points
            row.max_points += r.max_points
        return list(rows.values())

    def to_plain(self) -> dict[str, Any]:
        return {
            "submission": self.submission,
            "results": [r.to_plain() for r in self.results],
            "errors": list(self.errors),
            "notes": list(self.notes),
            "seconds": self.seconds,
        }

    @classmethod
    def from_plain(cls, obj: dict[str, Any]) -> Report:
        return cls(
            obj["submission"],
            [CaseResult.from_plain(r) for r in obj["results"]],
            list(obj["errors"]),
            list(obj["notes"]),
            float(obj["seconds"]),
        )


@dataclass
class View:
    """What one reader may see of a report: the cases to show in full, the hidden cases
    to name without detail, and the hidden points to give as one line (or None)."""

    shown: list[CaseResult]
    named_hidden: list[CaseResult]
    hidden_line: str | None
    score: float
    max_score: float


def view(report: Report, audience: Audience) -> View:
    if audience is Audience.INSTRUCTOR:
        return View(list(report.results), [], None, report.score, report.max_score)
    public = [r for r in report.results if not r.hidden]
    hidden = [r for r in report.results if r.hidden]
    named = [r for r in hidden if r.visibility == "visible"]
    summed = [r for r in hidden if r.visibility in ("after_published", "after_due_date")]
    line = None
    if summed:
        line = (
            f"Hidden cases: {sum(r.points for r in summed):g} of {sum(r.max_points for r in summed):g} points"
        )
    counted = public + named + summed
    return View(
        public,
        named,
        line,
        sum(r.points for r in counted),
        sum(r.max_points for r in counted),
    )


def with_hidden_visibility(report: Report, visibility: str) -> Report:
    """The same report with every hidden case at `visibility` (how the course publishes
    them now), for renderings asked for a visibility other than the one graded with."""
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    results = [replace(r, visibility=visibility) if r.hidden else r for r in report.results]
    return replace(report, results=results)
