"""Feedback pages and the class dashboard (`grader.report.html`): what a student's page
shows of hidden cases, escaping of what a submission printed or raised, the dashboard's
numbers and the rules it blames, and both pages in headless Chromium (no console errors,
the chart and the graph on screen)."""

from __future__ import annotations

import io
import re
import shutil
from html import unescape as html_unescape
from pathlib import Path

import pytest

from grader.authoring.leaks import secrets
from grader.cli import main
from grader.pipeline import Request, grade_submission
from grader.report import draw, html
from grader.report.model import VISIBILITIES, Report, Status
from grader.verdict.oracle import Oracle
from tests.harness.bugs import materialize
from tests.harness.bugs.micrograd import BUGS
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
TANH_RULE = "self.grad += (1.0 - out.data**2) * out.grad"
PRINTED = '</pre><script>alert("printed")</script>'
RAISED = "<img src=x onerror=alert(1)>"
#: rule bugs, and the op whose rule each breaks
RULE_BUGS = {
    "exp-without-out-grad": "exp",
    "tanh-no-square": "tanh",
    "sigmoid-uses-input": "sigmoid",
    "log-divides-by-output": "log",
    "rsub-reversed": "Value.__rsub__",  # a composite: the function the student wrote
}


def edited(root: Path, new: str) -> Path:
    shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
    engine = root / "micrograd" / "engine.py"
    engine.write_text(engine.read_text().replace(TANH_RULE, new))
    return root


def small(submission: Path, visibility: str = "after_published") -> Report:
    request = Request("all", ("micrograd",), SMALL, sandbox=False, visibility=visibility)
    return grade_submission(submission, request, Oracle())


@pytest.fixture(scope="module")
def buggy(tmp_path_factory) -> Report:
    """tanh's rule is wrong: two public cases and a hidden one fail, with graphs."""
    return small(edited(tmp_path_factory.mktemp("buggy"), "self.grad += (1.0 - out.data) * out.grad"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Report:
    """tanh's rule prints markup and raises with markup in its message."""
    new = f"print({PRINTED!r}); raise ValueError({RAISED!r})"
    return small(edited(tmp_path_factory.mktemp("hostile"), new))


@pytest.fixture(scope="module")
def klass(tmp_path_factory, oracle) -> dict[str, Report]:
    """A small class on micrograd's public op cases: the reference and five rule bugs."""
    keep = lambda case: case.topic == "ops"  # noqa: E731
    reports = {
        "reference": grade(
            REPO / "reference", "public", ["micrograd"], oracle=oracle, sandbox=False, keep=keep
        )
    }
    for bug in BUGS:
        if bug.name in RULE_BUGS:
            directory = materialize(bug, tmp_path_factory.mktemp(bug.name))
            reports[bug.name] = grade(
                directory, "public", ["micrograd"], oracle=oracle, sandbox=False, keep=keep
            )
    return reports


def test_failed_public_cases_carry_a_graph_with_the_wrong_node(buggy):
    failed = [r for r in buggy.results if r.status is Status.FAILED]
    assert {r.hidden for r in failed} == {False, True}
    for r in failed:
        assert r.blame == "tanh", r.id
        nodes = {n["id"]: n for n in r.graph["nodes"]}
        assert "got_grad" in nodes[r.graph["wrong"]]
    page = html.student_page(buggy)
    shown = [r for r in failed if not r.hidden]
    assert page.count('<div class="graph">') == len(shown)
    assert page.count(draw.HIGHLIGHT_COLOR) >= len(shown)  # the wrong node drawn in red


@pytest.mark.parametrize("visibility", VISIBILITIES)
def test_a_students_page_never_shows_hidden_names_sources_or_messages(buggy, visibility):
    page = html.student_page(buggy, visibility)
    known = secrets(REPO / "reference", SMALL)
    hidden = [r for r in buggy.results if r.hidden]
    assert known.hidden_names and known.hidden_source and any(r.message for r in hidden)
    for line in known.hidden_source:
        assert line not in page, line
    for r in hidden:
        assert not r.message or r.message not in page
        for node in (r.graph or {}).get("nodes", []):
            assert f"got {node.get('got_grad', '@')})" not in page
    names_shown = [name for name in known.hidden_names if name in page]
    assert bool(names_shown) == (visibility == "visible"), names_shown
    hidden_points = "Hidden cases: " in page
    assert hidden_points == (visibility in ("after_published", "after_due_date"))


def test_what_a_submission_prints_or_raises_is_escaped(hostile):
    errors = [r for r in hostile.results if r.status is Status.ERROR and not r.hidden]
    assert errors and all(RAISED in r.message and PRINTED in r.output for r in errors)
    page = html.student_page(hostile, name='<script>alert("id")</script>')
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert html.escape(RAISED) in page and html.escape(PRINTED) in page
    board = html.dashboard({'<script>alert("id")</script>': hostile, "x/../../etc": hostile})
    assert "<script" not in board.lower() and "<img" not in board.lower()
    links = re.findall(r'href="([^"]*)"', board)
    assert links and all(re.fullmatch(r"students/[A-Za-z0-9._-]+\.html", link) for link in links), links
    assert "Content-Security-Policy" in page and "script-src" not in html.CSP  # default-src 'none'


def test_the_dashboard_counts_the_class_and_blames_the_broken_rules(klass):
    board = html.dashboard(klass)
    bins = [int(n) for n in re.findall(r"<title>\d+–\d+%: (\d+) submissions?</title>", board)]
    assert len(bins) == html.BINS and sum(bins) == len(klass)
    for report in klass.values():
        percent = 100 * report.score / report.max_score
        k = min(html.BINS - 1, int(percent * html.BINS / 100))
        assert bins[k] >= 1
    rows = dict(re.findall(r"<tr><td>([^<]+)</td><td>.*?</td><td class=\"num\">(\d+)</td></tr>", board))
    for bug, op in RULE_BUGS.items():
        assert int(rows[op]) >= 1, (bug, op)
        failing = [r for r in klass[bug].results if not r.passed]
        assert failing and {r.blame for r in failing} == {op}, bug
    assert klass["reference"].score == klass["reference"].max_score
    assert int(rows["add"]) == 0  # no bug touches add's rule
    for student in klass:
        if klass[student].score < klass[student].max_score:
            assert f"students/{html.page_name(student)}" in board


def test_the_dashboard_lists_the_mistakes_the_class_makes(klass):
    """Each slip the class's messages name is a row: where it is laid, how many submissions
    make it, and the line that names it."""
    made: dict[str, set[str]] = {}
    for student, report in klass.items():
        for r in report.results:
            if r.slip and not r.passed:
                made.setdefault(r.slip, set()).add(student)
    assert made, "the class's rule bugs make no catalogued slip"
    board = html.dashboard(klass)
    table = board.split("<h2>The mistakes the class makes</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(
        r'<tr><td>([^<]+)</td><td>([^<]*)</td><td class="num">(\d+)</td><td>([^<]*)</td></tr>', table
    )
    assert {slip: int(count) for slip, _, count, _ in rows} == {slip: len(s) for slip, s in made.items()}
    for slip, blame, _, line in rows:
        named = [r for report in klass.values() for r in report.results if r.slip == slip and not r.passed]
        assert blame == named[0].blame and line and html_unescape(line) in named[0].message


def test_write_pages_and_grade_pages(klass, buggy, tmp_path):
    html.write_pages(klass, tmp_path / "class", "hidden")
    assert (tmp_path / "class" / "index.html").is_file()
    assert sorted(p.name for p in (tmp_path / "class" / "students").iterdir()) == sorted(
        html.page_name(s) for s in klass
    )
    submission = Path(buggy.submission)
    out = tmp_path / "one"
    argv = ["grade", str(submission), "--in-process", "--suites", str(SMALL), "--pages", str(out)]
    assert main([*argv, "--assignment", "micrograd"]) == 0
    page = (out / "students" / html.page_name(submission.name)).read_text()
    assert "Hidden cases: " in page and '<div class="graph">' in page
    assert f"<title>Grading feedback: {submission.name}</title>" in page
    assert (out / "index.html").is_file()


def test_a_visibility_that_does_not_exist_is_refused(buggy):
    with pytest.raises(ValueError, match="visibility must be one of"):
        html.student_page(buggy, "sometimes")


# ---- in a browser ----

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (pip install selenium)"
    )
    pytest.importorskip("PIL", reason="pillow is not installed (pip install pillow)")
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        pytest.skip(
            "Chromium is not installed: scripts/setup.sh installs chromium and chromium-driver (as root)"
        )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1100,1400",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def load(driver, path: Path) -> list[dict]:
    """Open a page; the console's errors while it loaded."""
    driver.get(path.as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def pixels(driver, element_id: str | None = None, css: str | None = None):
    from PIL import Image
    from selenium.webdriver.common.by import By

    element = (
        driver.find_element(By.ID, element_id) if element_id else driver.find_element(By.CSS_SELECTOR, css)
    )
    assert element.size["width"] > 100 and element.size["height"] > 30, element.size
    return Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB")


def share(image, color: tuple[int, int, int], tolerance: int = 24) -> float:
    """The share of pixels within `tolerance` of `color`, channel by channel."""
    raw = image.tobytes()  # RGB, three bytes a pixel
    pixels = zip(raw[0::3], raw[1::3], raw[2::3], strict=True)
    near = sum(all(abs(a - b) <= tolerance for a, b in zip(p, color, strict=True)) for p in pixels)
    return near / (len(raw) // 3)


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[k : k + 2], 16) for k in (1, 3, 5))


def test_the_console_check_sees_errors(browser, tmp_path):
    """The check below is only worth something if an error on a page would be caught."""
    probe = tmp_path / "probe.html"
    probe.write_text("<!DOCTYPE html><title>probe</title><script>console.error('probe error')</script>")
    assert any("probe error" in e["message"] for e in load(browser, probe))


def test_the_pages_load_cleanly_and_show_the_chart_and_the_graph(browser, klass, buggy, tmp_path):
    reports = {**klass, "buggy": buggy}
    html.write_pages(reports, tmp_path, "after_published")
    assert load(browser, tmp_path / "index.html") == []
    chart = pixels(browser, "histogram")
    bar = share(chart, rgb("#1f77b4"))
    background = share(chart, (255, 255, 255))
    print(f"histogram: {bar:.1%} bar colour, {background:.1%} background")
    assert bar > 0.01 and background < 0.99, (bar, background)  # bars on screen, not a blank box

    assert load(browser, tmp_path / "students" / html.page_name("buggy")) == []
    graph = pixels(browser, css=".graph svg")
    red = share(graph, rgb(draw.HIGHLIGHT_FILL), 8)
    print(f"graph: {red:.1%} highlight fill")
    assert red > 0.005  # the wrong node, filled in red
    for student in klass:
        assert load(browser, tmp_path / "students" / html.page_name(student)) == []


def test_the_dashboard_blames_what_the_report_carries_never_its_words(klass):
    """The blamed rule comes with the diagnosis as data: a message that reads like another
    rule's does not move the blame, and a store that kept no blame shows none."""
    from dataclasses import replace

    def rows(reports) -> dict[str, int]:
        board = html.dashboard(reports)
        found = re.findall(r"<tr><td>([^<]+)</td><td>.*?</td><td class=\"num\">(\d+)</td></tr>", board)
        return {op: int(n) for op, n in found}

    def reworded(c):
        return replace(c, message="wrong gradient from add: " + c.message)

    misleading = {s: replace(r, results=[reworded(c) for c in r.results]) for s, r in klass.items()}
    assert {op: rows(misleading)[op] for op in RULE_BUGS.values()} == {op: 1 for op in RULE_BUGS.values()}
    assert rows(misleading)["add"] == 0
    stored = {s: replace(r, results=[replace(c, blame="") for c in r.results]) for s, r in klass.items()}
    assert set(rows(stored).values()) == {0}
