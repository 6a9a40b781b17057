"""The pytest face of the grader: points, visibility, the submission to grade, the score.

Enable it with `pytest_plugins = ["grader.plugin"]` in a conftest.py. It adds

    --impl DIR        the submission the suites grade (default: the `grader_impl` ini
                      value, else `reference/` next to the tests)
    --suite NAME      public (default), hidden or all

and the markers `points(n)`, `topic(name)`, `assignment(name)` and `hidden`. Every graded
case runs on the submission and on PyTorch; a failure shows the diagnostic, not a traceback.
At the end of the run it prints a table per topic and the score line.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.case.define import Case
from grader.case.loading import SubmissionError
from grader.case.run import Run
from grader.pipeline import SUITES_DIR, InProcessEngine, verdict
from grader.report.model import Report
from grader.report.terminal import topic_lines
from grader.verdict.oracle import Oracle, default_cache_dir


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader")
    group.addoption("--impl", metavar="DIR", help="submission directory to grade (default: reference/)")
    group.addoption(
        "--suite", choices=("public", "hidden", "all"), default="public", help="which graded suites run"
    )
    group.addoption(
        "--no-oracle-cache",
        action="store_true",
        help="run PyTorch for every case instead of reading its results from the disk cache",
    )
    parser.addini("grader_impl", "default submission directory, relative to the rootdir", default="reference")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "points(n): what the test is worth")
    config.addinivalue_line("markers", "topic(name): the row of the score table")
    config.addinivalue_line("markers", "assignment(name): micrograd or needle")
    config.addinivalue_line("markers", "hidden: part of the hidden suite (runs with --suite hidden/all)")
    _keep_hypothesis_out_of_the_submission()
    config.stash[_STATE] = _State(config)
    config.pluginmanager.register(config.stash[_STATE], "grader-state")


def _keep_hypothesis_out_of_the_submission() -> None:
    """The random-program searches keep no example database, but hypothesis would still
    write a `.hypothesis/` folder into the current directory (the student's): its files go
    beside the oracle cache instead, unless HYPOTHESIS_STORAGE_DIRECTORY says where."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    set_hypothesis_home_dir(default_cache_dir().parent / "hypothesis")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> None:
    """A failing random-program search shows the shrunk program; hypothesis's offer of a
    patch that pins a `random.Random` as an explicit example would only confuse."""
    if call.when == "teardown" and getattr(getattr(item, "function", None), "__grader_search__", False):
        item.__dict__.pop("_hypothesis_failing_examples", None)


#: seconds a graded test may run locally (pytest-timeout) unless --timeout, the `timeout` ini
#: value or PYTEST_TIMEOUT says otherwise: a backward() that never returns fails its tests
#: instead of hanging the run. Generous: the first test of a cold run also runs PyTorch on
#: the whole suite.
LOCAL_TIMEOUT = 60.0


def _user_set_timeout(config: pytest.Config) -> bool | None:
    """Whether the user chose a pytest-timeout timeout; None without pytest-timeout."""
    try:
        given = config.getoption("timeout")
    except ValueError:
        return None
    return given is not None or bool(config.getini("timeout")) or bool(os.environ.get("PYTEST_TIMEOUT"))


def _limit_time(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every graded test and every search LOCAL_TIMEOUT, unless the user chose."""
    if _user_set_timeout(config) is not False:
        return
    for item in items:
        function = getattr(item, "function", None)
        graded = hasattr(function, "__grader_cases__") or getattr(function, "__grader_search__", False)
        if graded and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LOCAL_TIMEOUT))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _limit_time(config, items)
    suite = config.getoption("--suite")
    keep, drop = [], []
    for item in items:
        hidden = item.get_closest_marker("hidden") is not None
        wanted = suite == "all" or (suite == "hidden") == hidden
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _State:
    """What a run needs once: the submission's engines, the oracle, the report."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        cache = None if config.getoption("--no-oracle-cache") else default_cache_dir()
        self.oracle = Oracle(cache)
        #: every collected case, by (assignment, suite, suites directory): one oracle file each
        self.groups: dict[tuple[str, str, Path], dict[str, Case]] = {}
        self.group_of: dict[str, tuple[str, str, Path]] = {}
        self.prepared: set[tuple[str, str, Path]] = set()
        self.engines: dict[str, InProcessEngine | SubmissionError] = {}
        self.report = Report(str(self.impl))

    @property
    def impl(self) -> Path:
        given = self.config.getoption("--impl")
        if given:
            return Path(given).resolve()
        return (Path(self.config.rootpath) / self.config.getini("grader_impl")).resolve()

    def engine(self, assignment: str) -> InProcessEngine | SubmissionError:
        if assignment not in self.engines:
            try:
                self.engines[assignment] = InProcessEngine(self.impl, assignment)
            except SubmissionError as exc:
                self.engines[assignment] = exc
        return self.engines[assignment]

    def expected(self, case: Case) -> Run:
        """The oracle's run, reading (or writing) the whole suite's disk cache at once. A
        search's programs are the same on every run (derandomized), so their runs are cached
        too, one file per assignment: a warm run needs no PyTorch."""
        key = self.group_of.get(case.id)
        if key is not None and key not in self.prepared:
            self.prepared.add(key)
            self.oracle.prepare(self.groups[key].values(), key[2])
        elif key is None and case.suite == "search":
            self.oracle.prepare([case], SUITES_DIR)
        return self.oracle.expected(case)

    def check(self, case: Case, graded: bool = True) -> None:
        """Run `case`, fail the test with the diagnostic; a graded test's result goes into
        the report (an ungraded search calls this for many cases, none of them scored)."""
        engine = self.engine(case.assignment)
        actual = Run(fault=str(engine)) if isinstance(engine, SubmissionError) else engine.run(case)
        # A submission that raised needs no oracle for its diagnostic: skip PyTorch.
        failed = actual.failure is not None or actual.fault is not None
        result = verdict(case, Run() if failed else self.expected(case), actual)
        if graded:
            self.report.results.append(result)
        if not result.passed:
            pytest.fail(result.message, pytrace=False)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            cases = getattr(getattr(item, "function", None), "__grader_cases__", None)
            if not cases:
                continue
            suites_dir = Path(str(item.path)).resolve().parents[2]
            key = (cases[0].assignment, cases[0].suite, suites_dir)
            self.groups.setdefault(key, {}).update((c.id, c) for c in cases)
            self.group_of.update((c.id, key) for c in cases)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.report.results:
            return
        tr = terminalreporter
        tr.section("score")
        tr.write_line(f"submission: {self.impl}")
        for line, ok in topic_lines(self.report, self.report.results):
            tr.write_line(line, green=ok, red=not ok)
        tr.write_line(f"Score: {self.report.score:g}/{self.report.max_score:g} points", bold=True)


_STATE = pytest.StashKey[_State]()


@pytest.fixture
def graded_case(request: pytest.FixtureRequest):
    """Run a case on the submission and on PyTorch; fail with the diagnostic."""
    graded = hasattr(request.function, "__grader_cases__")
    check = request.config.stash[_STATE].check
    return lambda case: check(case, graded)
