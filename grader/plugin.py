"""The pytest face of the grader: points, visibility, the submission to grade, the score.

Enable it with `pytest_plugins = ["grader.plugin"]` in a conftest.py. It adds

    --impl DIR        the submission the suites grade (default: the current directory
                      when it holds a submission, else the `grader_impl` ini value,
                      `reference/` next to the tests)
    --suite NAME      public (default), hidden or all
    --scope FILE      a scope file (`grader.scope`): out-of-scope cases are deselected

and the markers `points(n)`, `topic(name)`, `assignment(name)` and `hidden`. Every graded
case runs on the submission and on PyTorch; a failure shows the diagnostic, not a traceback,
and what the submission printed (always, with `-s`). The first line says what is graded; at
the end of the run comes a table per topic and the score line. A student's run (`--impl`, or
a submission in the current directory, and no test paths) runs the graded suites only, not
the grader's own tests. Under pytest-xdist (`-n 2`) each result travels to the controller
with its test's report, so the table is the same.
"""

from __future__ import annotations

import functools
import os
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from grader import intake
from grader.case.define import Case
from grader.case.inprocess import InProcessEngine, Submission
from grader.case.limits import SLOWER
from grader.case.loading import SubmissionError, locate_assignment, present_packages
from grader.case.run import Run
from grader.pipeline import SUITES_DIR, default_scopes, used_by, verdict
from grader.report.model import CaseResult, Report, Status
from grader.report.terminal import topic_lines
from grader.scope import Scope, ScopeError, load, select
from grader.verdict.compare import needs_tape
from grader.verdict.oracle import NeedsTorch, Oracle, default_cache_dir, oracle_from


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
    group.addoption(
        "--scope",
        metavar="FILE",
        action="append",
        help="a scope file (TOML): the ops and topics graded and their points (repeatable)",
    )
    parser.addini("grader_impl", "default submission directory, relative to the rootdir", default="reference")


#: a graded test's result, in its report's user_properties (how it reaches xdist's controller)
RESULT = "grader-result"
#: what loading the submission noted (a stand-in for an absent module), the same way
NOTES = "grader-notes"
#: the graded suites' folders under the tests directory; the rest is the grader's own tests
GRADED = ("public", "hidden")


def _student_run(config: pytest.Config) -> bool:
    """No test paths named, and a submission given (--impl) or found in the current directory."""
    named = config.args_source == pytest.Config.ArgsSource.ARGS
    return not named and (bool(config.getoption("--impl")) or _cwd_submission(config) is not None)


def _tests_dir(config: pytest.Config) -> Path:
    """The project's tests folder, which holds the graded suites' folders (GRADED)."""
    return Path(config.rootpath) / "tests"


def _cwd_submission(config: pytest.Config) -> Path | None:
    """The current directory, when it is not the project's root and holds a submission."""
    cwd = Path(config.invocation_params.dir).resolve()
    if cwd == Path(config.rootpath).resolve():
        return None
    return cwd if present_packages(cwd) else None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> None:
    """`--impl DIR` with a space. Before it knew `--impl` (the plugin is installed as an
    entry point, so it does before the options are read), pytest took DIR for a test path
    and looked for the project's root and configuration from there: outside the project it
    found none. Look again without DIR, as `--impl=DIR` would have. Only plugins loaded this
    early get this hook (a conftest.py's do not)."""
    ns = early_config.known_args_namespace
    impl = getattr(ns, "impl", None)
    if not impl or early_config.inipath is not None or "--impl" not in args:
        return
    try:
        from _pytest.config.findpaths import determine_setup

        rootpath, inipath, inicfg, _ = determine_setup(
            inifile=None,
            override_ini=ns.override_ini,
            args=[str(a) for a in ns.file_or_dir],
            rootdir_cmd_arg=ns.rootdir or None,
            invocation_dir=early_config.invocation_params.dir,
        )
        if inipath is None:
            return
        early_config._rootpath, early_config._inipath, early_config._inicfg = rootpath, inipath, inicfg
        early_config._inicache.clear()
        parser.extra_info.update(rootdir=str(rootpath), inifile=str(inipath))
        args[:] = early_config.getini("addopts") + args
        ns.confcutdir = str(inipath.parent)
    except (ImportError, AttributeError, TypeError, ValueError) as exc:  # another pytest's internals
        raise pytest.UsageError(
            f"write --impl={impl} (with '='): this pytest cannot be helped ({exc})"
        ) from exc


def _inside_a_package(config: pytest.Config) -> str | None:
    """Why a bare `pytest` run from inside a submission's package (`micrograd/`) cannot grade:
    the suites and the package are beside that folder, not in it."""
    if config.args_source != pytest.Config.ArgsSource.INVOCATION_DIR:
        return None
    root, cwd = Path(config.rootpath).resolve(), Path(config.invocation_params.dir).resolve()
    if cwd == root or not cwd.is_relative_to(root):
        return None
    top = cwd.relative_to(root).parts[0]
    if top not in present_packages(root) or locate_assignment(root, top).path != root / top:
        return None
    up = os.path.relpath(root, cwd)
    return (
        f"run pytest in {root}, the folder that holds {top}/, not inside {top}/: cd {up} && python -m pytest"
    )


def pytest_configure(config: pytest.Config) -> None:
    inside = _inside_a_package(config)
    if inside:
        raise pytest.UsageError(inside)
    given = config.getoption("--impl")
    if given and not Path(given).exists():
        raise pytest.UsageError(f"--impl {given}: no such file or directory")
    if _student_run(config):
        tests = _tests_dir(config)
        suites = [tests / name for name in GRADED if (tests / name).is_dir()]
        if suites and config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR:
            config.args = [str(s) for s in suites]  # run from a submission's folder: the suites
    config.addinivalue_line("markers", "points(n): what the test is worth")
    config.addinivalue_line("markers", "topic(name): the row of the score table")
    config.addinivalue_line("markers", "assignment(name): micrograd or needle")
    config.addinivalue_line("markers", "hidden: part of the hidden suite (runs with --suite hidden/all)")
    try:
        scopes = [scope for path in config.getoption("--scope") or [] for scope in load(path, SUITES_DIR)]
    except ScopeError as exc:
        pytest.exit(f"grader: error: {exc}", returncode=2)
    _keep_hypothesis_out_of_the_submission()
    config.stash[_STATE] = _State(config, scopes)
    config.pluginmanager.register(config.stash[_STATE], "grader-state")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A student's run collects the graded suites only, not the grader's own tests."""
    if (
        collection_path.parent == _tests_dir(config)
        and collection_path.name not in GRADED
        and _student_run(config)
    ):
        return True
    return None


def _keep_hypothesis_out_of_the_submission() -> None:
    """The random-program searches keep no example database, but hypothesis would still
    write a `.hypothesis/` folder into the current directory (the student's): its files go
    beside the oracle cache instead, unless HYPOTHESIS_STORAGE_DIRECTORY says where. Said
    through that variable, which hypothesis reads when it first writes: hypothesis itself is
    imported only when a search runs."""
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(default_cache_dir().parent / "hypothesis"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A graded case skipped (not graded, or its answer needs torch) is reported at its own
    line, not at the plugin's where the skip was raised. A search that passed but could not
    check some of its programs (beyond those the release shipped, without torch) is skipped,
    saying so: never failed, never taken for a pass."""
    report = yield
    if call.when != "call":
        return report
    _, line, _ = item.location
    if report.skipped and isinstance(item, CaseItem) and isinstance(report.longrepr, tuple):
        report.longrepr = (str(item.path), (line or 0) + 1, report.longrepr[2])
    unchecked = item.stash.get(_UNCHECKED, 0)
    if report.passed and unchecked:
        report.outcome = "skipped"
        report.longrepr = (
            str(item.path),
            (line or 0) + 1,
            f"Skipped: {unchecked} of its programs were not checked: beyond those shipped, "
            "they need PyTorch (pip install torch)",
        )
    return report


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
        search = getattr(getattr(item, "function", None), "__grader_search__", False)
        if (isinstance(item, CaseItem) or search) and item.get_closest_marker("timeout") is None:
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

    def __init__(self, config: pytest.Config, scopes: list[Scope] | None = None) -> None:
        self.config = config
        #: the scopes given with --scope, which apply to every suite; each assignment they do
        #: not cover keeps its default scope, which applies to the shipped suites
        self.scopes = {scope.assignment: scope for scope in scopes or []}
        self.defaults = {**default_scopes(SUITES_DIR), **self.scopes}
        #: each graded case in scope, with its points as the scope says
        self.scoped: dict[str, Case] = {}
        #: the submission's in-process engines, loaded when its first case runs
        self.submission: Submission | None = None
        self.report = Report(str(self.impl))
        #: a zipped submission's unpacked copy, removed when the run ends
        self.unpacked = ExitStack()
        self._directory: Path | None = None
        #: why the submission cannot be read at all (a hostile zip), if it cannot
        self.refused: str | None = None
        #: whether the run stopped before its last test (see `pytest_sessionfinish`)
        self.stopped = False

    @functools.cached_property
    def oracle(self) -> Oracle:
        """PyTorch's answers, from the cache folder as it is when collection asks first (a
        conftest may choose it: the kit's own tests keep theirs out of the user's cache)."""
        return oracle_from(no_cache=self.config.getoption("--no-oracle-cache"))

    @property
    def impl(self) -> Path:
        """The submission as given: --impl, else the current directory when it holds one,
        else the `grader_impl` ini value."""
        given = self.config.getoption("--impl")
        if given:
            return Path(given).resolve()
        return (
            _cwd_submission(self.config)
            or (Path(self.config.rootpath) / self.config.getini("grader_impl")).resolve()
        )

    @property
    def directory(self) -> Path:
        """The directory graded: `impl`, or a zip's unpacked copy."""
        if self._directory is None:
            try:
                self._directory = intake.prepare(self.impl, self.unpacked)
            except intake.IntakeError as exc:  # every case says why
                self._directory, self.refused = self.impl, str(exc)
        return self._directory

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Whether the run stopped before its last test (-x, --maxfail, Ctrl-C): its score
        then counts only the tests that ran, and says so."""
        self.stopped = (
            bool(session.shouldstop or session.shouldfail) or exitstatus == pytest.ExitCode.INTERRUPTED
        )

    @pytest.hookimpl
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.unpacked.close()
        self.write_score()

    def graded(self) -> str:
        """`/path/sub (micrograd: hw/micrograd/, needle: python/needle/)`: what is graded."""
        found = []
        for name in present_packages(self.directory):
            found.append(f"{name}: {locate_assignment(self.directory, name).describe()}")
        return f"{self.impl} ({', '.join(found) or 'no package found'})"

    def engine(self, assignment: str) -> InProcessEngine | SubmissionError:
        if self.submission is None:
            directory = self.directory
            # pytest ends after its run: the heap is frozen before the first case, and a deep
            # case's graph is left in memory, not collected (`grader.case.limits`)
            self.submission = Submission(directory, self.refused, ends_after_run=True)
        return self.submission.engine(assignment)

    def expected(self, case: Case) -> Run:
        """The oracle's run. The graded cases' runs were made ready at collection, each suite's
        disk cache read at once; a search's programs are the same on every run (derandomized),
        so their runs are cached too, one file per assignment: a warm run needs no PyTorch."""
        self.oracle.prepare([case], SUITES_DIR if case.suite == "search" else None)
        return self.oracle.expected(case)

    def check(
        self, case: Case, graded: bool = True, properties: list | None = None, item: pytest.Item | None = None
    ) -> None:
        """Run `case`, fail the test with the diagnostic; a graded test's result goes with
        its test report (an ungraded search calls this for many cases, none of them scored).
        What the submission printed goes to stdout: pytest shows it on failure, `-s` always.
        Without torch, a case whose expected run is not shipped is skipped, saying why; a
        search's program is passed over, and the search is skipped if nothing failed."""
        case = self.scoped.get(case.id, case)
        engine = self.engine(case.assignment)
        expected: Run | None = None
        try:
            if isinstance(engine, SubmissionError):
                actual = Run(fault=str(engine))
            else:  # PyTorch's time sizes the case's time limit, as in the sandbox
                expected = self.expected(case)
                yardstick = SLOWER * self.oracle.seconds.get(case.id, 0.0)
                needs = used_by(self.oracle)(case)
                actual = engine.run(
                    case,
                    yardstick,
                    needs=needs,
                    tape=lambda run: needs_tape(expected.results, run),
                )
            if properties is not None and not isinstance(engine, SubmissionError) and engine.notes:
                properties.append((NOTES, engine.notes))
            if actual.output:
                sys.stdout.write(actual.output if actual.output.endswith("\n") else actual.output + "\n")
            # A submission stopped, or lacking an op, needs no oracle for its message (nor one
            # that raised, unless its tape was read: a value gone wrong before it): skip PyTorch.
            needed = actual.fault is None and not actual.missing and (actual.failure is None or actual.tape)
            result = verdict(case, expected if needed and expected is not None else Run(), actual)
        except NeedsTorch as exc:
            if graded:  # not the submission's fault: not scored, and said once in the score section
                if properties is not None:
                    properties.append((NOTES, [NEEDS_TORCH]))
                pytest.skip(str(exc))
            if item is not None:  # a search's program beyond the shipped ones: not checked
                item.stash[_UNCHECKED] = item.stash.get(_UNCHECKED, 0) + 1
            return
        if graded and properties is not None:
            # its fields as they are (asdict would copy each list and dict deep, per case)
            properties.append((RESULT, {**vars(result), "status": result.status.value}))
        if result.status is Status.NOT_GRADED:
            pytest.skip(result.message)  # not a failure of what the case tests: its own status
        if not result.passed:
            pytest.fail(result.message, pytrace=False)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The results, from this process's tests or from xdist's workers alike."""
        if report.when != "call" or hasattr(self.config, "workerinput"):
            return
        for key, value in report.user_properties:
            if key == RESULT:
                self.report.results.append(CaseResult(**{**value, "status": Status(value["status"])}))
            elif key == NOTES:
                self.report.notes += [note for note in value if note not in self.report.notes]

    @pytest.hookimpl
    def pytest_report_header(self, config: pytest.Config) -> str | None:
        return f"grader: grading {self.graded()}"

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.deselect_out_of_scope(items)

    def deselect_out_of_scope(self, items: list[pytest.Item]) -> None:
        """Out-of-scope cases are not run and not counted: deselected, as `--suite` does."""
        chosen: dict[str, pytest.Item] = {}
        by_scopes: dict[bool, list[Case]] = {True: [], False: []}
        for item in items:
            case = _case_of(item)
            if case is not None:
                chosen[case.id] = item
                by_scopes[case.suites_dir == SUITES_DIR.resolve()].append(case)

        def needs(cases: list[Case]) -> dict[str, set[str]]:
            self.oracle.prepare(cases)  # each suite's oracle file read at once
            found = {}
            for case in cases:
                try:
                    found[case.id] = self.oracle.needs(case)
                except NeedsTorch:  # skipped when it runs, saying why
                    found[case.id] = set(case.needs)
            return found

        kept = select(by_scopes[True], self.defaults, needs) + select(by_scopes[False], self.scopes, needs)
        self.scoped = {case.id: case for case in kept}
        drop = [item for case_id, item in chosen.items() if case_id not in self.scoped]
        if drop:
            self.config.hook.pytest_deselected(items=drop)
            gone = set(map(id, drop))
            items[:] = [item for item in items if id(item) not in gone]

    def write_score(self) -> None:
        """The score section: last of all, after pytest's short test summary and its counts
        (so from `pytest_unconfigure`: pytest writes those after every terminal-summary hook)."""
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if not self.report.results or tr is None:
            return
        tr.section("score")
        tr.write_line(f"submission: {self.graded()}")
        for note in self.report.notes:
            tr.write_line(f"note: {note}", yellow=True)
        for line, ok in topic_lines(self.report, self.report.results):
            tr.write_line(line, green=ok, red=not ok)
        if self.stopped:
            ran, chosen = len(self.report.results), len(self.scoped)
            tr.write_line(
                f"the run stopped early (-x, --maxfail or Ctrl-C): {ran} of the {chosen} graded tests "
                "ran, and this score counts those alone",
                yellow=True,
            )
        tr.write_line(
            f"Score: {self.report.score:g}/{self.report.max_score:g} points for {self.impl}", bold=True
        )


def _case_of(item: pytest.Item) -> Case | None:
    """The graded case a collected test runs (None for a test that is not one)."""
    return item.case if isinstance(item, CaseItem) else None


_STATE = pytest.StashKey[_State]()
#: how many of a search's programs could not be checked (no shipped run, no torch)
_UNCHECKED = pytest.StashKey[int]()
#: the score section's note when a graded case was skipped for want of torch
NEEDS_TORCH = (
    "some tests changed since the release: their cases need PyTorch to be checked and were "
    "skipped (pip install torch)"
)


class CaseItem(pytest.Item):
    """One graded case as a test: run on the submission, compared with PyTorch's run, failed
    with the diagnostic. Its markers (`points`, `topic`, `assignment`, `hidden`) select it
    with `-m`, and its node id is its function's, with the case's parameter in brackets."""

    def __init__(self, *, case: Case, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.case = case
        self.add_marker(pytest.mark.points(case.points))
        self.add_marker(pytest.mark.topic(case.topic))
        self.add_marker(pytest.mark.assignment(case.assignment))
        if case.suite == "hidden":
            self.add_marker(pytest.mark.hidden)

    def runtest(self) -> None:
        self.config.stash[_STATE].check(self.case, True, self.user_properties, self)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.fn.__code__.co_firstlineno - 1, self.name


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> list[CaseItem] | None:
    """A suite's graded function is one `CaseItem` per case: a plain test with nothing to set
    up (a fixture and a parametrization per test cost a student's run a tenth of its time)."""
    cases = getattr(obj, "__grader_cases__", None)
    if not cases or not collector.funcnamefilter(name):
        return None
    return [CaseItem.from_parent(collector, name=case.test_name, case=case) for case in cases]


@pytest.fixture
def graded_case(request: pytest.FixtureRequest):
    """For a random-program search: check one program's case on the submission and on
    PyTorch, failing with the diagnostic (not scored: a search is no graded test)."""
    state = request.config.stash[_STATE]

    def run(case: Case) -> None:
        state.check(case, False, request.node.user_properties, request.node)

    # a search shrinks a failing program only where the programs it tries can be checked
    run.checks_new_programs = state.oracle.runs_torch  # type: ignore[attr-defined]
    return run
