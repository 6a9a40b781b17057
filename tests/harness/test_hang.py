"""A backward() that never returns grades in about the time of a correct one, and fairly.

Before its first case each assignment's worker runs backward() on a tiny graph (the probe).
A correct engine, however slow, returns at once and is graded as usual; one that does not
gets a short CPU budget per case, enforced inside the worker (no restart per case). The
tests here check the outcome, never a duration: every case that calls the hanging
backward() times out with a message saying where; the others keep their verdicts; a slow
but correct engine keeps full marks; a backward() that hangs only on some graphs gets the
verdicts it gets without the probe. A student's own pytest run probes the same way, and
pytest-timeout ends a test that hangs on its own graph. The budget and the in-process
limits behave: CPU, not waiting, spends a budget; an alarm set outside one rings again
after it; a limit whose exception is lost rings again until the code stops.
"""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.assignments.micrograd import backend as micrograd_backend
from grader.case import hang
from grader.case import limits as time_limits
from grader.case.define import collect
from grader.case.inprocess import InProcessEngine
from grader.case.run import Run
from grader.classgrade.engine import GRACE, LocalBackend, grade_class
from grader.classgrade.gradebook import Gradebook
from grader.classgrade.layout import discover
from grader.pipeline import REPO, SUITES_DIR, verdict
from grader.report.model import Report
from grader.sandbox import Limits
from grader.verdict.oracle import CACHE_ENV, Oracle
from tests.harness.grading import grade

SORT = "        topo, visited = [], set()\n"


def edited_engine(tmp: Path, old: str, new: str) -> Path:
    """The reference's micrograd in `tmp`, with engine.py's one line `old` replaced by `new`."""
    shutil.copytree(REPO / "reference" / "micrograd", tmp / "micrograd")
    path = tmp / "micrograd" / "engine.py"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return tmp


def engine_with(tmp: Path, before_sort: str) -> Path:
    """The reference with `before_sort` (indented code) run first thing in backward()."""
    return edited_engine(tmp, SORT, before_sort + SORT)


def passed(report) -> set[str]:
    return {r.id for r in report.results if r.passed}


def test_a_backward_that_never_returns_times_out_case_by_case(tmp_path, oracle):
    submission = engine_with(tmp_path, "        while True:\n            pass\n")
    report = grade(submission, "public", ["micrograd"], oracle=oracle)
    reference = grade(REPO / "reference", "public", ["micrograd"], oracle=oracle)
    forward = {r.id for r in reference.results if r.topic == "forward"}
    assert forward and forward <= passed(report)  # what never calls backward() still passes
    failed = [r for r in report.results if not r.passed]
    assert failed and all(r.id not in forward for r in failed)
    for r in failed:
        assert r.status == "timed out", (r.id, r.message)
        assert "in Value.backward (engine.py, line" in r.message, r.message
        assert r.blame == "backward", (r.id, r.blame)  # counted where it was stuck
    # the short CPU budget ended most of them (a deep chain's budget is PyTorch's time,
    # and on a busy machine the wall-clock deadline may come first)
    short = [r for r in failed if "of CPU" in r.message and "probe" in r.message]
    assert len(short) >= len(failed) - 3, [r.message for r in failed]


#: tanh's rule in micrograd's reference, and one that loops making Values for ever: the time
#: runs out, as often as not, inside Value's constructor (code the template gives)
MICROGRAD_TANH = "            self.grad += (1.0 - out.data**2) * out.grad\n"
MAKES_VALUES = "            t = out\n            while True:\n                t = Value(t.data)\n"


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "in-process"])
def test_a_rule_stuck_calling_given_code_is_laid_at_the_rule(tmp_path, oracle, sandbox):
    """Where the time ran out inside a function the template gives whole (Value.__init__),
    the message names the student's code that called it, and the failure is laid there:
    from every front end alike."""
    submission = edited_engine(tmp_path, MICROGRAD_TANH, MAKES_VALUES + MICROGRAD_TANH)
    tanh = lambda case: case.id.startswith("micrograd/test_ops::") and "tanh" in case.id  # noqa: E731
    report = grade(submission, "public", ["micrograd"], oracle=oracle, sandbox=sandbox, keep=tanh)
    failed = [r for r in report.results if not r.passed]
    assert failed and all(r.status == "timed out" for r in failed), [r.message for r in failed]
    for r in failed:
        assert "in Value.tanh._backward (engine.py, line" in r.message, r.message
        assert "Value.__init__" not in r.message and r.blame == "tanh", (r.message, r.blame)


def test_a_slow_but_correct_backward_keeps_full_marks(tmp_path, oracle):
    """Each backward() call burns 50 ms of CPU first, on the probe too (which allows 0.5 s):
    slow, not hanging, so it is graded as usual."""
    busy = "        import time\n        _end = time.process_time() + 0.05\n"
    busy += "        while time.process_time() < _end:\n            pass\n"
    report = grade(engine_with(tmp_path, busy), "public", ["micrograd"], oracle=oracle)
    assert [(r.id, r.message) for r in report.results if not r.passed] == []


def test_a_backward_that_hangs_on_some_graphs_keeps_the_verdicts_of_the_others(tmp_path, oracle, monkeypatch):
    """It hangs exactly on graphs of four nodes, the probe's among them. The cases' verdicts
    are those it gets when the probe is off and every hang costs the full timeout (but for
    the deep cases, whose budget is capped)."""
    hangs = "        if len(_reach(self)) == 4:\n            while True:\n                pass\n"
    submission = engine_with(tmp_path, hangs)
    path = submission / "micrograd" / "engine.py"
    path.write_text(
        path.read_text() + "\n\ndef _reach(v):\n    seen, stack = {id(v)}, [v]\n    while stack:\n"
        "        for c in stack.pop()._prev:\n            if id(c) not in seen:\n"
        "                seen.add(id(c))\n                stack.append(c)\n    return seen\n"
    )
    limits = Limits(timeout=1.0)
    probed = grade(submission, "public", ["micrograd"], oracle=oracle, limits=limits)
    assert any("probe" in r.message for r in probed.results), "the probe should have hung"
    monkeypatch.setattr(time_limits, "PROBE_CPU", 0)  # no probe: the plain timeouts
    plain = grade(submission, "public", ["micrograd"], oracle=oracle, limits=limits)
    assert not any("probe" in r.message for r in plain.results)
    # deep cases (10**4 ops and more) get at most SUSPECT_MAX of CPU after a hung probe,
    # which may not be enough for this engine's slow backward(): the documented price
    deep = {r.id for r in plain.results if r.topic == "deep"}
    assert passed(probed) - deep == passed(plain) - deep
    assert len(passed(probed)) < len(probed.results)  # some cases did hang
    assert {r.topic for r in probed.results if r.passed} >= {"forward", "ops", "random"}


def test_a_cpu_budget_counts_cpu_time_not_waiting():
    """The budget's alarm rings by the clock, but only CPU time spends it: a case that waits
    (as on a machine busy with other work) goes on past its budget in wall time, and a case
    that computes is ended, inside the code that runs, once its CPU is spent. In process,
    where no grader stands outside, a wall-clock deadline also ends one that waits. An
    alarm set outside the budget (pytest-timeout's) still rings when it is due."""
    with hang.cpu_budget(0.01):
        time.sleep(0.05)  # rings after 0.01 s, finds almost no CPU spent, waits on
    started = time.process_time()
    with pytest.raises(hang.CaseTimedOut), hang.cpu_budget(0.01):
        while time.process_time() - started < 5:
            pass
    with pytest.raises(hang.WallTimeout), hang.cpu_budget(0.01, wall=0.05):  # in process: a deadline too
        time.sleep(5)
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL  # all as before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with pytest.raises(hang.WallTimeout), hang.wall_limit(0.3):  # an outer alarm rings after the budget
        with hang.cpu_budget(0.01):
            time.sleep(0.1)
        time.sleep(5)


def test_the_yardstick_of_the_limits_is_pytorchs_cpu_time_not_its_waiting():
    """The yardstick of a case's limits is PyTorch's time for it, kept in the cache and shipped
    with a release: its CPU time, so that answers made while the machine was busy (waiting for
    a core) do not give a looping rule's cases budgets that long ever after."""
    from grader.case.define import Case

    def waits(lib):
        a = lib.value(2.0, "a")
        time.sleep(0.3)  # as a case does while other work has the cores
        return {"b": a * a}

    case = Case("micrograd", "ops", "waits", waits, "test_waiting", trace=False)
    oracle = Oracle(None)
    oracle.expected(case)
    assert 0 < oracle.seconds[case.id] < 0.1, oracle.seconds


class Finalized:
    """Sleeps in `__del__`: an alarm that rings then raises where Python only prints it."""

    def __del__(self) -> None:
        time.sleep(0.2)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the lost one, printed
def test_a_limit_whose_exception_is_lost_stops_the_code_all_the_same():
    """A limit's exception raised inside a `__del__` is lost (Python prints it and goes on);
    the alarm rings again until the code is stopped, instead of leaving it to run for ever."""
    end = time.monotonic() + 3
    with pytest.raises(hang.WallTimeout), hang.wall_limit(0.05):
        Finalized()  # freed at once: the limit rings during its __del__
        while time.monotonic() < end:
            pass
    assert time.monotonic() < end
    started = time.process_time()
    with pytest.raises(hang.CaseTimedOut), hang.cpu_budget(0.01):
        while time.process_time() - started < 0.01:
            pass
        Finalized()  # the budget is spent as this runs
        while time.monotonic() < end:
            pass
    assert time.monotonic() < end


LOCAL = """
from grader.case import case


@case("micrograd", topic="ops", points=1)
def test_hangs(lib):
    a = lib.value(1.0, "a")
    lib.backward(a * 2.0)
    return {"a": a}
"""


#: pytest in a fresh interpreter, with the plugin's default timeout shortened to 3 s
PYTEST_WITH_SHORT_DEFAULT = """
import sys
import pytest
import grader.plugin
grader.plugin.LOCAL_TIMEOUT = 3.0
sys.exit(pytest.main(sys.argv[1:]))
"""


def local_run(tmp_path: Path, before_sort: str) -> subprocess.CompletedProcess:
    """A student's `pytest` of one graded test (LOCAL) on the reference with `before_sort`
    run first thing in backward(), with the plugin's default timeout shortened to 3 s."""
    submission = engine_with(tmp_path / "sub", before_sort)
    suites = tmp_path / "suites" / "public" / "micrograd"
    suites.mkdir(parents=True)
    (suites / "test_hang_here.py").write_text(LOCAL)
    # PyTorch's answers made here, so that the run does not spend its 3 s importing torch
    cache = tmp_path / "cache"
    Oracle(cache).prepare(collect(suites.parent.parent, ["micrograd"], ("public",)), suites.parent.parent)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), CACHE_ENV: str(cache)}
    argv = [str(suites), "-p", "grader.plugin", f"--impl={submission}", "-p", "no:cacheprovider"]
    return subprocess.run(
        [sys.executable, "-c", PYTEST_WITH_SHORT_DEFAULT, *argv, "-c", str(REPO / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )


def test_locally_the_plugins_default_timeout_ends_a_hanging_test(tmp_path):
    """pytest-timeout, with the timeout the plugin gives every graded test when the user set
    none: the test whose graph hangs backward() (a product: the probe's sum gets through)
    fails, and the run ends."""
    done = local_run(tmp_path, '        while self._op == "*":\n            pass\n')
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-2000:]
    assert "Timeout (>3.0s) from pytest-timeout" in out and "1 failed" in out, out[-3000:]


def test_locally_a_backward_that_never_returns_fails_each_test_at_once(tmp_path):
    """A student's own run probes backward() as the sandbox does: one that hangs even on the
    tiny graph gets each test's short CPU budget, and fails saying where, not after a
    timeout per test."""
    done = local_run(tmp_path, "        while True:\n            pass\n")
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-2000:]
    assert "s of CPU in Value.backward (engine.py" in out and "1 failed" in out, out[-3000:]
    assert "pytest-timeout" not in out


def test_an_import_that_never_ends_fails_the_assignment_once_saying_where(tmp_path):
    """In process (a student's pytest), the submission's import gets a case's time limit, as
    in the sandbox's worker: a loop at the top of engine.py fails every case of micrograd
    with one message naming the line, and the import is not tried again case after case."""
    from grader.case.inprocess import Submission
    from grader.case.loading import SubmissionError

    shutil.copytree(REPO / "reference" / "micrograd", tmp_path / "micrograd")
    engine = tmp_path / "micrograd" / "engine.py"
    engine.write_text("while True:\n    pass\n" + engine.read_text())
    engines = Submission(tmp_path, timeout=0.5)
    first = engines.engine("micrograd")
    assert isinstance(first, SubmissionError)
    assert str(first) == "importing micrograd failed: timed out after 0.5 s in <module> (engine.py, line 1)"
    assert engines.engine("micrograd") is first


def test_grading_in_process_keeps_the_timeout_asked_for(tmp_path, oracle):
    """`grade --in-process --timeout 0.5`: the import and each case get 0.5 s, as in the
    sandbox. The option was dropped in process, and every case waited out the default 10 s."""
    from grader import cli

    shutil.copytree(REPO / "reference" / "micrograd", tmp_path / "sub" / "micrograd")
    engine = tmp_path / "sub" / "micrograd" / "engine.py"
    engine.write_text("while True:\n    pass\n" + engine.read_text())
    results = tmp_path / "results.json"
    argv = ["grade", str(tmp_path / "sub"), "--in-process", "--timeout", "0.5", "--assignment", "micrograd"]
    assert cli.main([*argv, "--suite", "public", "--results", str(results)]) == 0
    tests = json.loads(results.read_text())["tests"]
    said = "importing micrograd failed: timed out after 0.5 s in <module> (engine.py, line 1)"
    assert tests and all(said in test["output"] for test in tests), tests[:2]


#: relu's rule in the reference
RELU_RULE = "            self.grad += (1.0 if self.data > 0 else 0.0) * out.grad\n"


def relu_looping(tmp: Path) -> Path:
    """The reference with relu's gradient rule (`_backward`) looping for ever."""
    return edited_engine(tmp, RELU_RULE, "            while True:\n                pass\n")


def graded_in_a_class(submission: Path, root: Path, oracle) -> Report:
    """`submission` graded as one student of a class (`grade-class`), on micrograd's public
    suite."""
    shutil.copytree(submission, root / "class" / "student")
    book = Gradebook(root / "gradebook.db")
    try:
        cases = collect(SUITES_DIR, ["micrograd"], ("public",))
        backend = LocalBackend(1, Limits().budget + GRACE)
        grade_class(discover(root / "class", root / "work"), cases, oracle, book, backend, Limits())
        return book.report("student")
    finally:
        book.close()


@pytest.mark.parametrize("front_end", ["in process", "sandboxed", "a class"])
def test_a_rule_that_never_returns_fails_only_the_cases_that_call_it(tmp_path, oracle, front_end):
    """relu's rule never returns. The cases that run it (backward() through a relu node) time
    out, saying where; every other case keeps its verdict on the reference, the forward cases
    that apply relu among them: a case whose results are right never runs a rule, not even to
    read its tape. The cases that use relu (or an MLP), as PyTorch's run says, fail within the
    short CPU budget the probe of each rule gives them, wherever they are graded."""
    sandbox = front_end != "in process"
    looping = relu_looping(tmp_path / "submission")
    if front_end == "a class":
        report = graded_in_a_class(looping, tmp_path, oracle)
    else:
        report = grade(looping, "public", ["micrograd"], oracle=oracle, sandbox=sandbox)
    reference = grade(REPO / "reference", "public", ["micrograd"], oracle=oracle, sandbox=sandbox)
    assert reference.results and all(r.passed for r in reference.results)
    failed = [r for r in report.results if not r.passed]
    uses_relu = {r.id for r in report.results if {"relu", "mlp"} & set(r.ops)}  # an MLP's neurons apply relu
    assert failed and {r.id for r in failed} <= uses_relu
    for r in failed:
        assert r.status == "timed out", (r.id, r.message)
        assert "in Value.relu._backward (engine.py, line" in r.message, r.message
        assert r.blame == "relu", (r.id, r.blame)  # counted where it was stuck, from every front end
    # the short CPU budget the probe gave them ended them (in the sandbox, on a busy machine,
    # the wall-clock backstop behind a budget may come first)
    short = [
        r
        for r in failed
        if "of CPU" in r.message and "did not return on the grader's tiny probe" in r.message
    ]
    assert short if sandbox else short == failed, [r.message for r in failed]
    forward = [r for r in report.results if "relu" in r.ops and r.topic == "forward"]
    assert forward and all(r.passed for r in forward)


class OuterAlarm(Exception):
    """What the alarm set outside a case's limit raises (pytest-timeout's, in a student's run)."""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_an_alarm_set_outside_a_limit_rings_at_its_own_time():
    """pytest-timeout's alarm, shorter than the case's own limit, ends the case when it falls
    due, not once the case's limit is over (then the case's WallTimeout would be the context
    of the outer alarm's exception)."""

    def outer(signum: int, frame: object) -> None:
        raise OuterAlarm

    previous = signal.signal(signal.SIGALRM, outer)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(OuterAlarm) as rang:
            with hang.wall_limit(5.0):
                while True:  # ends only when an alarm rings
                    pass
        assert rang.value.__context__ is None
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # nothing left set
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_mutant_whose_rule_never_returns_gets_the_short_budget_where_grading_gives_it(tmp_path, oracle):
    """`grader check`'s mutants get the time limits grading gives: relu's rule looping for ever
    costs the cases that use relu the short CPU budget (their limit, as the mutant's process
    says before each case, is the backstop behind it), and every other case its full time."""
    from grader.authoring import killing
    from grader.authoring.mutants import Mutant
    from grader.pipeline import used_by

    engine = REPO / "reference" / "micrograd" / "engine.py"
    looping = engine.read_text().replace(RELU_RULE, "            while True:\n                pass\n")
    mutant = Mutant(
        "relu loops", "micrograd", "micrograd/engine.py", 0, "relu", 0, "solution", "loops", looping
    )
    cases = collect(SUITES_DIR, ["micrograd"], ("public",))
    rules = {c.id: tuple(sorted(used_by(oracle)(c))) for c in cases}
    uses_relu = [c.id for c in cases if {"relu", "mlp"} & set(rules[c.id]) and c.topic != "forward"][:3]
    others = [c.id for c in cases if not {"relu", "mlp"} & set(rules[c.id])][:3]
    assert uses_relu and others
    timeouts = dict.fromkeys(uses_relu + others, 30.0)
    receive, send = killing._context().Pipe(duplex=False)
    args = (
        mutant,
        REPO / "reference",
        tmp_path / "mutant",
        SUITES_DIR,
        uses_relu + others,
        timeouts,
        rules,
        send,
    )
    process = killing._context().Process(target=killing.child, args=args, daemon=True)
    process.start()
    send.close()
    allowed = {}
    try:
        while (message := receive.recv())[0] not in ("end", "load", "broken"):
            if message[0] == "start":
                allowed[message[1]] = message[2]
    finally:
        process.join(timeout=30)
    assert message == ("end",), message
    assert all(allowed[i] <= 20 * time_limits.SUSPECT_MAX for i in uses_relu), allowed
    assert all(allowed[i] == 30.0 for i in others), allowed


#: Tanh's rule in needle's reference
TANH_RULE = "        return out_grad * (1 - node**2)\n"


@pytest.mark.parametrize("sandbox", [False, True], ids=["in process", "sandboxed"])
def test_a_needle_rule_that_never_returns_fails_only_the_cases_that_use_its_op(tmp_path, oracle, sandbox):
    """Tanh.gradient never returns. The cases whose graphs hold a Tanh (PyTorch's run says)
    time out, within the short CPU budget the probe of each op's rule gives them, saying
    Tanh; every other case keeps the reference's verdict."""
    shutil.copytree(REPO / "reference" / "needle", tmp_path / "needle")
    ops = tmp_path / "needle" / "ops.py"
    assert ops.read_text().count(TANH_RULE) == 1
    ops.write_text(ops.read_text().replace(TANH_RULE, "        while True:\n            pass\n"))
    report = grade(tmp_path, "public", ["needle"], oracle=oracle, sandbox=sandbox)
    failed = [r for r in report.results if not r.passed]
    uses_tanh = {r.id for r in report.results if "Tanh" in r.ops}
    assert failed and {r.id for r in failed} <= uses_tanh
    assert all(r.status == "timed out" for r in failed), [r.message for r in failed]
    assert {r.blame for r in failed} == {"Tanh"}  # stuck in Tanh.gradient
    short = [r for r in failed if "through Tanh did not return on the grader's tiny probe" in r.message]
    assert short if sandbox else short == failed, [r.message for r in failed]
    forward = [r for r in report.results if "Tanh" in r.ops and r.topic == "forward"]
    assert forward and all(r.passed for r in forward)


MUL_RULE = "            self.grad += other.data * out.grad\n"
#: mul's rule a little wrong, and never returning where only the diagnosis runs it: alone, on
#: leaves whose gradients start at PROBE_SEED, with PROBE_GRAD as out.grad
SEED, GRAD = micrograd_backend.PROBE_SEED, micrograd_backend.PROBE_GRAD
MUL_LOOPS_ALONE = (
    f"            while self.grad == {SEED} and out.grad == {GRAD}:\n"
    "                pass\n"
    "            self.grad += 1.01 * other.data * out.grad\n"
)


def test_a_rule_that_never_returns_on_the_diagnosis_probe_costs_the_probe_budget(tmp_path, oracle):
    """mul's rule is wrong, and never returns when the diagnosis runs it alone (its inputs'
    gradients start non-zero there, never in backward()). The failing case still ran, and its
    tape is read within the probe's CPU budget for each rule, not the case's minute: every
    other node keeps its entry, and mul's rule reads as unknown."""
    edited_engine(tmp_path, MUL_RULE, MUL_LOOPS_ALONE)
    (case,) = [c for c in collect(SUITES_DIR, ["micrograd"], ("public",)) if c.id.endswith("::sanity_check")]
    engine = InProcessEngine.load(tmp_path, "micrograd")
    run = engine.run(case, seconds=60.0, tape=True)
    assert run.fault is None and run.failure is None, run
    assert run.results["x.grad"] != oracle.expected(case).results["x.grad"]  # wrong: its tape is read
    steps = oracle.expected(case).steps  # a submission's run keeps no steps: the oracle's are the same
    assert len(run.tape) == len(steps)  # read, not given up at the case's limit
    rules = [(step.op, entry.get("rule")) for step, entry in zip(steps, run.tape, strict=True)]
    assert [rule for op, rule in rules if op == "mul"] == [None, None, None]
    assert all(rule is not None for op, rule in rules if op in ("add", "relu")), rules


def test_a_rule_that_never_returns_on_the_diagnosis_probe_times_no_case_out_in_the_sandbox(tmp_path, oracle):
    """The same engine graded in the sandbox: the cases that apply mul (sub, neg and division
    are built from it) fail on their gradients, none timed out while its tape was read, and
    mul's own cases still name mul's gradient. The ops' cases and the composite ones: each
    failing case's tape costs a probe's budget per mul in it, and these hold every kind."""
    edited_engine(tmp_path, MUL_RULE, MUL_LOOPS_ALONE)
    kept = ("micrograd/test_ops::", "micrograd/test_composite::")
    report = grade(
        tmp_path, "public", ["micrograd"], oracle=oracle, sandbox=True, keep=lambda c: c.id.startswith(kept)
    )
    failed = [r for r in report.results if not r.passed]
    assert failed
    assert not [r for r in failed if r.status == "timed out"], [r.message for r in failed][:3]
    # and the diagnosis still names the rule: mul's own cases say it is mul's gradient
    muls = [r for r in failed if "::backward[mul" in r.id or "::rule[mul" in r.id]
    assert len(muls) == 6 and all("wrong gradient from mul" in r.message for r in muls), muls


@contextlib.contextmanager
def collections_seen() -> Iterator[list[int]]:
    """The generations of every collection the cyclic collector makes meanwhile."""
    seen: list[int] = []

    def note(phase: str, info: dict) -> None:
        if phase == "stop":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def test_a_process_that_goes_on_frees_a_deep_cases_graph_without_walking_its_whole_heap():
    """A kernel (or a test process) grades case after case: the 10**5-op chain's graph, built
    with the collector off, is freed as the case ends, by a collection of the young
    generations only. A full one would walk everything the process holds (PyTorch's modules,
    the answers), a tenth of a second and more after every deep case."""
    (case,) = [c for c in collect(SUITES_DIR, ["micrograd"], ("public",)) if not c.trace]
    engine = InProcessEngine.load(REPO / "reference", "micrograd", ends_after_run=False)
    engine.probe()  # before the watching: the probe settles what is due as it pleases
    gc.collect()
    Value = engine.modules["engine"].Value

    def alive() -> int:
        return sum(1 for obj in gc.get_objects() if type(obj) is Value)

    before = alive()
    with collections_seen() as seen:
        run = engine.run(case)
    assert run.failure is None and run.fault is None and run.results, run
    assert 2 not in seen and seen, seen
    assert alive() - before < 10  # the 10**5 Values are gone


def test_settling_before_a_budget_leaves_no_collection_due_and_walks_the_heap_only_when_its_turn_comes():
    """Before a case with a CPU budget, the generations that are due are collected, so that no
    collection lands in the budget: the young ones alone, unless the oldest is due, or would
    be once the young ones' collection has counted towards it."""
    young, _, oldest = gc.get_threshold()
    gc.disable()  # the collections here are the test's own
    try:
        for oldest_count, collected in ((0, 0), (oldest - 1, 2), (oldest, 2)):
            gc.collect()
            for _ in range(oldest_count):
                gc.collect(1)  # each counts one towards the oldest generation
            for _ in range(young + 1):
                garbage: list = []
                garbage.append(garbage)  # a cycle: only a collection frees it
            del garbage
            with collections_seen() as seen:
                time_limits.settle_garbage()
            assert seen == [collected], (oldest_count, seen)
            due = [count >= limit for count, limit in zip(gc.get_count(), gc.get_threshold(), strict=True)]
            assert not any(due), gc.get_count()
    finally:
        gc.enable()


@pytest.mark.parametrize(
    ("assignment", "stuck_in", "part"),
    [
        ("micrograd", "Value.backward", "backward"),
        ("micrograd", "Value.__mul__._backward", "mul"),
        ("micrograd", "Value.__init__", ""),  # given code: no part of the student's
        ("needle", "Tanh.gradient", "Tanh"),
        ("needle", "find_topo_sort", "find_topo_sort"),
        ("needle", "Value._init", ""),
    ],
)
def test_a_case_out_of_time_is_laid_at_the_part_it_was_stuck_in(assignment, stuck_in, part, oracle):
    """For the class's counts: the part whose code was running when the time ran out, if it
    is one of the assignment's parts (a rule, backward, the sort), else none."""
    case = collect(SUITES_DIR, [assignment], ["public"])[0]
    result = verdict(case, oracle.expected(case), Run(fault="timed out after 10 s", stuck_in=stuck_in))
    assert result.status == "timed out" and result.blame == part
