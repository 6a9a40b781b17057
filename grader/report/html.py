"""Feedback pages and the class dashboard: self-contained HTML rendered from the report model.

`student_page(report, visibility)` is what one student reads: the score, a row per topic,
each visible case that failed with its diagnostic, the expression around the wrong node
(drawn by Graphviz where its `dot` is installed, inline SVG) and what the code printed.
Hidden cases appear exactly as `model.view` lets a student see them, as in feedback.md.

`dashboard(reports)` is the instructor's: a histogram of scores, the pass rate of every
case and of every op the cases exercise, the rules the class's failures are laid at
(`CaseResult.blame`), the mistakes their messages name (`CaseResult.slip`), and the failing
and slowest submissions.

Every page is one file: inline CSS and SVG, no script, no font or image from the network,
and a Content-Security-Policy that forbids scripts, so a page opens anywhere, from a
learning management system's file area as well as a laptop. Every text that came from
grading (messages, printed output, names) goes through `html.escape`.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from collections.abc import Iterable
from html import escape
from pathlib import Path

from grader.report.draw import GraphvizNotFound, draw_graph
from grader.report.gradescope import write_text
from grader.report.model import (
    DEFAULT_HIDDEN_VISIBILITY,
    Audience,
    CaseResult,
    Report,
    Status,
    view,
    with_hidden_visibility,
)

MAX_PRINTED = 2000
#: rows in the dashboard's lists of lowest-scoring and slowest submissions
LIST_ROWS = 15
BINS = 10

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
       max-width: 64rem; margin: 2rem auto; padding: 0 1rem; background: #ffffff; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { font-size: 1.25rem; margin-top: 2rem; }
h3 { font-size: 1.05rem; margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .5rem 0; } th, td { padding: .25rem .7rem; text-align: left; }
th { border-bottom: 2px solid #ccc; } td { border-bottom: 1px solid #eee; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f6f6f6; padding: .6rem .8rem; overflow-x: auto; white-space: pre-wrap;
      border-left: 3px solid #d62728; }
pre.printed { border-left-color: #999; }
.score { font-size: 1.3rem; font-weight: 600; }
.bar { display: inline-block; height: .7rem; background: #e6e6e6; width: 8rem; vertical-align: middle; }
.bar > span { display: block; height: 100%; background: #2ca02c; }
.ok { color: #1a7f37; } .bad { color: #b42318; } .muted { color: #666; }
.case { border-top: 1px solid #ddd; padding-top: .3rem; }
.graph { overflow-x: auto; } .graph svg { height: auto; }
.note { background: #fff3c4; padding: .4rem .7rem; }
"""


# ---- pieces ----


def _page(title: str, body: list[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title>",
            f"<style>{CSS}</style>",
            "</head>",
            "<body>",
            *body,
            "</body>",
            "</html>",
            "",
        ]
    )


def _points(x: float) -> str:
    return f"{x:g}"


def _rate_bar(passed: int, total: int) -> str:
    share = passed / total if total else 0.0
    return (
        f'<span class="bar" title="{share:.0%}"><span style="width:{share * 100:.1f}%"></span></span> '
        f"{share:.0%}"
    )


def _status(status: Status) -> str:
    cls = "ok" if status is Status.PASSED else "bad"
    return f'<span class="{cls}">{escape(str(status))}</span>'


def _graph_svg(graph: dict) -> str:
    """The recorded expression as inline SVG, or a line saying why it is not drawn."""
    try:
        svg = draw_graph(graph).pipe("svg").decode("utf-8")
    except GraphvizNotFound:
        return '<p class="muted">(the expression graph is drawn where Graphviz is installed)</p>'
    start = svg.find("<svg")  # drop the XML declaration and doctype: this is inside HTML
    return f'<div class="graph">{svg[start:] if start >= 0 else ""}</div>'


def _failure(r: CaseResult) -> list[str]:
    lines = [
        '<section class="case">',
        f"<h3>{escape(f'{r.assignment} / {r.topic} / {r.name}')} ({_status(r.status)})</h3>",
    ]
    if r.description:
        lines.append(f"<p>{escape(r.description)}</p>")
    lines.append(f"<pre>{escape(r.message or str(r.status))}</pre>")
    if r.graph:
        lines += [
            "<p>The expression, with PyTorch's numbers and yours where they differ; "
            "the node in red is the one the message is about:</p>",
            _graph_svg(r.graph),
        ]
    if r.output:
        printed = r.output[:MAX_PRINTED] + (" ..." if len(r.output) > MAX_PRINTED else "")
        lines += ["<p>Printed by the code:</p>", f'<pre class="printed">{escape(printed)}</pre>']
    lines.append("</section>")
    return lines


# ---- the student's page ----


def student_page(report: Report, visibility: str = DEFAULT_HIDDEN_VISIBILITY, name: str | None = None) -> str:
    """One student's feedback, with hidden cases shown as `visibility` allows; titled with
    `name` (the student's id), else the submission directory's name."""
    seen = view(with_hidden_visibility(report, visibility), Audience.STUDENT)
    name = name or Path(report.submission).name or report.submission
    body = [
        f"<h1>Grading feedback: {escape(name)}</h1>",
        f'<p class="score" id="score">Score: {_points(seen.score)} / {_points(seen.max_score)}</p>',
    ]
    body += [f'<p class="note">{escape(error)}</p>' for error in report.errors]
    body += [
        "<table>",
        '<tr><th>assignment</th><th>topic</th><th class="num">passed</th><th class="num">points</th></tr>',
    ]
    for row in report.topics(seen.shown):
        cls = "ok" if row.passed == row.total else "bad"
        body.append(
            f'<tr class="{cls}"><td>{escape(row.assignment)}</td><td>{escape(row.topic)}</td>'
            f'<td class="num">{row.passed}/{row.total}</td>'
            f'<td class="num">{_points(row.points)}/{_points(row.max_points)}</td></tr>'
        )
    body.append("</table>")
    if seen.hidden_line:
        body.append(f"<p>{escape(seen.hidden_line)}</p>")
    if seen.named_hidden:
        body += ["<h2>Hidden cases</h2>", "<ul>"]
        body += [
            f"<li>{escape(f'{r.assignment} / {r.topic} / {r.name}')}: {_status(r.status)}</li>"
            for r in seen.named_hidden
        ]
        body.append("</ul>")
    failed = [r for r in seen.shown if not r.passed]
    if failed:
        body.append(f"<h2>Failed cases ({len(failed)} of {len(seen.shown)})</h2>")
        for r in failed:
            body += _failure(r)
    elif seen.shown:
        body.append(f'<p class="ok">All {len(seen.shown)} cases shown here passed.</p>')
    return _page(f"Grading feedback: {name}", body)


# ---- the class dashboard ----


def histogram_svg(percents: list[float], bins: int = BINS, width: int = 640, height: int = 240) -> str:
    """Scores (percent of the maximum) as a bar chart: bins of equal width, 100 in the last."""
    counts = [0] * bins
    for p in percents:
        counts[min(bins - 1, max(0, int(p * bins / 100)))] += 1
    top = max(counts, default=0) or 1
    left, bottom, pad = 40, 30, 24
    plot_w, plot_h = width - left - pad, height - bottom - pad
    bar_w = plot_w / bins
    parts = [
        f'<svg id="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="histogram of scores">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    step = max(1, math.ceil(top / 4))
    top = step * math.ceil(top / step)
    for value in range(0, top + 1, step):  # horizontal grid lines, at whole counts
        y = pad + plot_h - plot_h * value / top
        parts.append(f'<line x1="{left}" x2="{width - pad}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" '
            f'fill="#555">{value}</text>'
        )
    for k, count in enumerate(counts):
        h = plot_h * count / top
        x = left + k * bar_w
        low, high = 100 * k // bins, 100 * (k + 1) // bins
        label = f"{low}–{high}%: {count} submission{'s' if count != 1 else ''}"
        parts.append(
            f'<rect class="bin" x="{x + 2:.1f}" y="{pad + plot_h - h:.1f}" width="{bar_w - 4:.1f}" '
            f'height="{h:.1f}" fill="#1f77b4"><title>{escape(label)}</title></rect>'
        )
    for k in range(bins + 1):  # the bins' edges, in percent
        parts.append(
            f'<text x="{left + k * bar_w:.1f}" y="{height - bottom + 16}" font-size="11" '
            f'text-anchor="middle" fill="#555">{100 * k // bins}%</text>'
        )
    parts.append(
        f'<line x1="{left}" x2="{width - pad}" y1="{pad + plot_h}" y2="{pad + plot_h}" stroke="#333"/>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _percent(report: Report) -> float:
    return 100 * report.score / report.max_score if report.max_score else 0.0


def _case_rows(reports: Iterable[Report]) -> list[tuple[CaseResult, int, int]]:
    """(a result of the case, passed, graded) per case id, in the order cases came."""
    rows: dict[str, list] = {}
    for report in reports:
        for r in report.results:
            row = rows.setdefault(r.id, [r, 0, 0])
            row[1] += r.passed
            row[2] += 1
    return [tuple(row) for row in rows.values()]


def _op_rows(reports: dict[str, Report]) -> list[tuple[str, int, int, int]]:
    """(op or function, cases using it passed, graded, submissions whose failures blame it)."""
    used: dict[str, list[int]] = {}
    blamed: dict[str, set[str]] = {}
    for student, report in reports.items():
        for r in report.results:
            for op in r.ops:
                counts = used.setdefault(op, [0, 0])
                counts[0] += r.passed
                counts[1] += 1
            if r.blame and not r.passed:
                blamed.setdefault(r.blame, set()).add(student)
    names = set(used) | set(blamed)
    rows = [(n, *used.get(n, [0, 0]), len(blamed.get(n, ()))) for n in names]
    return sorted(rows, key=lambda row: (-row[3], row[1] / row[2] if row[2] else 1.0, row[0]))


def _slip_rows(reports: dict[str, Report]) -> list[tuple[str, str, int, str]]:
    """(slip, where it is laid, submissions whose failures name it, the line that names it
    in the first such message) for each catalogued slip the class's messages name: the
    mistakes themselves, beside the rules they are made in."""
    made: dict[tuple[str, str], set[str]] = {}
    said: dict[tuple[str, str], str] = {}
    for student, report in reports.items():
        for r in report.results:
            if r.slip and not r.passed:
                key = (r.slip, r.blame)
                made.setdefault(key, set()).add(student)
                lines = r.message.splitlines()
                said.setdefault(key, lines[1].strip() if len(lines) > 1 else "")
    rows = [(slip, blame, len(students), said[slip, blame]) for (slip, blame), students in made.items()]
    return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))


def page_name(student: str) -> str:
    """A file name for a student's page: readable, safe, and distinct for distinct ids."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"
    if safe != student:
        safe += "-" + hashlib.sha256(student.encode()).hexdigest()[:8]
    return f"{safe}.html"


def _student_link(student: str) -> str:
    return f'<a href="students/{escape(page_name(student))}">{escape(student)}</a>'


def dashboard(reports: dict[str, Report]) -> str:
    """The instructor's view of a class (student id -> report): everything, hidden cases too."""
    percents = [_percent(r) for r in reports.values()]
    body = ["<h1>Class dashboard</h1>"]
    if not reports:
        return _page("Class dashboard", [*body, "<p>No submissions graded.</p>"])
    perfect = sum(r.score == r.max_score for r in reports.values())
    body += [
        f"<p>{len(reports)} submissions; mean score {statistics.fmean(percents):.1f}%, median "
        f"{statistics.median(percents):.1f}%; {perfect} with every case passed; "
        f"{sum(bool(r.errors) for r in reports.values())} with errors.</p>",
        "<h2>Scores</h2>",
        histogram_svg(percents),
        '<p class="muted">Bars: submissions per tenth of the maximum score (the last includes 100%).</p>',
    ]

    body += [
        "<h2>Which rules the class gets wrong</h2>",
        "<p>Per op: the pass rate of the cases that use it, and how many submissions have a failure "
        "that the diagnostic lays at its rule (or at the function named).</p>",
        "<table>",
        '<tr><th>op or function</th><th>cases using it</th><th class="num">submissions blamed</th></tr>',
    ]
    for name, passed, total, blamed in _op_rows(reports):
        rate = _rate_bar(passed, total) + f' <span class="muted">({passed}/{total})</span>' if total else ""
        body.append(f'<tr><td>{escape(name)}</td><td>{rate}</td><td class="num">{blamed}</td></tr>')
    body.append("</table>")

    slips = _slip_rows(reports)
    if slips:
        body += [
            "<h2>The mistakes the class makes</h2>",
            "<p>Each mistake the diagnostic names (a slip of the catalogue), where it is laid, how "
            "many submissions make it, and how the first message that names it says it.</p>",
            "<table>",
            '<tr><th>mistake</th><th>laid at</th><th class="num">submissions</th><th>as said</th></tr>',
        ]
        for slip, blame, count, line in slips:
            body.append(
                f'<tr><td>{escape(slip)}</td><td>{escape(blame)}</td><td class="num">{count}</td>'
                f"<td>{escape(line)}</td></tr>"
            )
        body.append("</table>")

    body += [
        "<h2>Pass rate per case</h2>",
        "<table>",
        '<tr><th>case</th><th>suite</th><th class="num">points</th><th>passed</th></tr>',
    ]
    for r, passed, total in sorted(_case_rows(reports.values()), key=lambda row: row[1] / row[2]):
        body.append(
            f"<tr><td>{escape(r.id)}</td><td>{escape(r.suite)}</td>"
            f'<td class="num">{_points(r.max_points)}</td>'
            f'<td>{_rate_bar(passed, total)} <span class="muted">({passed}/{total})</span></td></tr>'
        )
    body.append("</table>")

    ranked = sorted(reports.items(), key=lambda item: (_percent(item[1]), item[0]))
    failing = [(s, r) for s, r in ranked if r.score < r.max_score or r.errors][:LIST_ROWS]
    body += [
        f"<h2>Failing submissions (lowest {len(failing)})</h2>",
        "<table>",
        '<tr><th>student</th><th class="num">score</th><th class="num">cases failed</th>'
        "<th>laid at</th><th>errors</th></tr>",
    ]
    for student, r in failing:
        failed = [c for c in r.results if not c.passed]
        blamed = sorted({c.blame for c in failed if c.blame})
        body.append(
            f"<tr><td>{_student_link(student)}</td>"
            f'<td class="num">{_points(r.score)}/{_points(r.max_score)}</td>'
            f'<td class="num">{len(failed)}</td><td>{escape(", ".join(blamed[:6]))}</td>'
            f"<td>{escape('; '.join(r.errors)[:300])}</td></tr>"
        )
    body.append("</table>")

    slowest = sorted(reports.items(), key=lambda item: -item[1].seconds)[:LIST_ROWS]
    body += [
        "<h2>Slowest submissions</h2>",
        "<table>",
        '<tr><th>student</th><th class="num">seconds</th><th class="num">cases timed out</th></tr>',
    ]
    for student, r in slowest:
        timed_out = sum(c.status is Status.TIMED_OUT for c in r.results)
        body.append(
            f'<tr><td>{_student_link(student)}</td><td class="num">{r.seconds:.1f}</td>'
            f'<td class="num">{timed_out}</td></tr>'
        )
    body.append("</table>")
    return _page("Class dashboard", body)


def write_pages(reports: dict[str, Report], out: Path, visibility: str = DEFAULT_HIDDEN_VISIBILITY) -> None:
    """`out/index.html`, the class dashboard (for the instructor), and one page per student
    under `out/students/` (named by `page_name`), each written atomically."""
    out = Path(out)
    for student, report in reports.items():
        write_text(student_page(report, visibility, student), out / "students" / page_name(student))
    write_text(dashboard(reports), out / "index.html")
