"""Hostile submissions (tests/harness/hostile/<name>/micrograd/) against the sandboxed grader.

Each is the reference engine with one planted honest bug (tanh's rule forgets the square),
overlaid with the hostile part. Honestly it earns 5 of 8 points on the small suite in
hostile/suites. For every one: grading ends within the budget, no case passes
that the honest base fails, the faulted cases say why, and the grader is unharmed.
"""

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from grader.pipeline import UNFILTERED
from grader.report.gradescope import gradescope, write_json
from grader.sandbox import Limits, confine, engine
from grader.sandbox.process import SUBMISSION_PROCESS as PROCESS
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "tests" / "harness" / "hostile"
SUITES = HOSTILE / "suites"
LIMITS = Limits(timeout=2.0, budget=60.0, memory=512)
#: those whose cases run into the timeout get a short one, to keep this file fast
GRACE = 10.0  # seconds past the budget for killing the last worker and scoring
SHORT = {"loop_at_import", "loop_in_backward", "signals_ignored", "memory_exhaustion"}
PUBLIC_BACKWARD = ["add", "tanh[pos]", "tanh[neg]", "expression"]
PUBLIC = ["add", "mul_rule", "tanh[pos]", "tanh[neg]", "expression"]
BACKWARD = [*PUBLIC_BACKWARD, "sub_div", "tanh_chain"]
ALL = [*PUBLIC, "sub_div", "tanh_chain"]
TANH = ["tanh[pos]", "tanh[neg]", "tanh_chain"]

#: name -> what the in-process engine (a student's own pytest) says of the cases the sandbox
#: zeroes, as the sandbox says it: sys.exit() ends neither run, which goes on to the next case
IN_PROCESS = {
    "exit_at_import": "importing micrograd failed: sys.exit(3) was called in <module> (__init__.py, line 7)",
    "exit_in_backward": "sys.exit(3) was called during the case in backward (__init__.py, line 9)",
    "exit_builtin_in_backward": "sys.exit(3) was called during the case in backward (__init__.py, line 8)",
    "base_exception_in_backward": "Stop in backward (__init__.py, line 12): not finished",
}

#: name -> (suite, cases that must score zero, text their message must hold). Those that
#: restart the worker after every case run the public suite only, to keep this file fast.
EXPECTED = {
    # sys.exit() ends no worker: its cases say what the in-process engine says (IN_PROCESS)
    "exit_at_import": ("all", ALL, IN_PROCESS["exit_at_import"]),
    "exit_in_backward": ("all", BACKWARD, IN_PROCESS["exit_in_backward"]),
    "exit_builtin_in_backward": ("all", BACKWARD, IN_PROCESS["exit_builtin_in_backward"]),
    "interrupt_in_backward": ("all", BACKWARD, "KeyboardInterrupt in backward (__init__.py, line 8)"),
    "interrupt_at_import": (
        "all",
        ALL,
        "importing micrograd failed: KeyboardInterrupt in <module> (__init__.py, line 5)",
    ),
    "base_exception_in_backward": ("all", BACKWARD, IN_PROCESS["base_exception_in_backward"]),
    # os._exit() cannot be caught: it ends the submission's process
    "os_exit_at_import": ("all", ALL, f"importing micrograd failed: {PROCESS} exited with status 0"),
    "os_exit_in_backward": ("public", PUBLIC_BACKWARD, f"{PROCESS} exited with status 7 during the case"),
    # the debugger stops on the line after breakpoint()
    "breakpoint_in_backward": (
        "public",
        PUBLIC_BACKWARD,
        "BdbQuit in backward (__init__.py, line 11): a debugger stop (breakpoint(), pdb.set_trace()) left",
    ),
    "input_in_backward": (
        "public",
        PUBLIC_BACKWARD,
        "EOFError in backward (__init__.py, line 11): EOF when reading a line: input() left in the code",
    ),
    "loop_at_import": ("all", ALL, "importing micrograd failed: timed out after 0.5 s"),
    # found by the probe: each case then has a short CPU budget (see test_hang.py)
    "loop_in_backward": ("public", PUBLIC_BACKWARD, "of CPU in backward (__init__.py, line"),
    # the probe's own alarm stops tanh's rule (its limit sets the handler it needs): a short
    # budget ends each case; else the grader's kill after the timeout
    "signals_ignored": ("all", TANH, ("timed out after 0.5 s", "s of CPU in tanh._backward")),
    "unbounded_recursion": ("public", PUBLIC_BACKWARD, f"{PROCESS} was killed by SIGSEGV"),
    # filling 512 MiB may take longer than the 0.5 s a case has here: either reason will do
    "memory_exhaustion": (
        "public",
        PUBLIC_BACKWARD,
        (f"{PROCESS} ran out of memory (limit 512 MiB)", "timed out"),
    ),
    "memory_error": ("public", PUBLIC_BACKWARD, f"{PROCESS} ran out of memory (limit 512 MiB)"),
    "output_flood": ("all", TANH, "wrong gradient from tanh"),
    "fake_results": ("all", TANH, "wrong gradient from tanh"),
    "monkeypatch": ("all", TANH, "wrong gradient from tanh"),
    "lying_gradients": ("all", TANH, "wrong gradient from tanh"),
    "read_reference": ("all", TANH, "wrong gradient from tanh"),
    # refused in the worker: the first case that calls backward() (hidden runs first) fails, in every run
    "background_thread": ("all", ["sub_div"], "starting a thread is not allowed in graded code"),
    # started around the refusal: seen in the live worker; every backward case starts one anew,
    # and after two such cases the others are not run
    "thread_around_refusal": (
        "all",
        BACKWARD,
        ("started 1 thread(s) still running after it", "not run: 2 cases of micrograd started threads"),
    ),
    # importing torch costs nothing; calling it costs the cases that did, saying where
    "torch_import": ("all", TANH, "wrong gradient from tanh"),
    "torch_in_rule": (
        "all",
        ["expression"],
        "uses torch to compute gradients (torch.tensor called at __init__.py line 9, in relu): not allowed",
    ),
    # without bubblewrap, within 512 MiB torch fails to import, either as the import runs out
    # of time or memory or after its libraries are mapped (and seen); with more it loads, and
    # is seen (test below). Under bubblewrap it is not there to import: the base runs honestly.
    "torch_smuggled": ("public", PUBLIC, ("importing micrograd failed", "uses torch to compute gradients")),
    # what each phase could see: see test_public_cases_never_see_the_hidden_suite
    "peek_at_suites": ("all", ALL, "suites in reach: ['test_small.py'"),
    # graded without its __init__.py, which says what it saw in a note: see below
    "peek_in_a_note": ("all", TANH, "wrong gradient from tanh"),
}
ISOLATION = engine.strongest_isolation()
if ISOLATION == "bubblewrap":
    EXPECTED["torch_smuggled"] = ("public", [], "")


def base(dest: Path) -> Path:
    shutil.copytree(REPO / "reference" / "micrograd", dest / "micrograd")
    engine = dest / "micrograd" / "engine.py"
    right = "self.grad += (1.0 - out.data**2) * out.grad"
    engine.write_text(engine.read_text().replace(right, "self.grad += (1.0 - out.data) * out.grad"))
    return dest


def short(case_id: str) -> str:
    return case_id.split("::")[1]


@pytest.fixture(scope="module")
def honest(tmp_path_factory, oracle):
    sub = base(tmp_path_factory.mktemp("honest") / "sub")
    report = grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)
    assert (report.score, report.max_score) == (5, 8)
    return {short(r.id): r.passed for r in report.results}


def test_every_hostile_submission_has_a_test():
    names = {p.name for p in HOSTILE.iterdir() if p.is_dir() and p.name not in ("suites", "__pycache__")}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_submission(name, tmp_path, oracle, honest, monkeypatch):
    suite, zeroed, reason = EXPECTED[name]
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / name / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    sandboxes = tmp_path / "tmp"
    sandboxes.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(sandboxes))
    results = tmp_path / "results.json"
    started = time.monotonic()
    limits = Limits(timeout=0.5, budget=60.0, memory=512) if name in SHORT else LIMITS
    report = grade(sub, suite, ["micrograd"], SUITES, oracle, limits=limits)
    write_json(gradescope(report), results)
    elapsed = time.monotonic() - started

    assert elapsed < limits.budget + GRACE, f"{name} took {elapsed:.1f} s, past the budget"
    got = {short(r.id): r for r in report.results}
    assert set(got) == set(ALL if suite == "all" else PUBLIC)
    for case, result in got.items():
        assert not result.passed or honest[case], f"{case} passed, though the honest base fails it"
    assert report.score <= 5
    for case in zeroed:
        assert not got[case].passed, case
        reasons = reason if isinstance(reason, tuple) else (reason,)
        assert any(r in got[case].message for r in reasons), (case, got[case].message)
    # the grader is unharmed: its results are its own, its sandboxes are gone
    assert json.loads(results.read_text())["score"] == report.score
    assert list(sandboxes.iterdir()) == []
    for result in got.values():
        assert len(result.output) <= 4000 and len(result.message) <= 20000


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_in_process_the_same_submissions_cost_the_same_cases(name, tmp_path, oracle, honest):
    """Graded in process, as a student's pytest grades, a submission that exits loses the
    cases the sandbox takes from it, each saying why, and the others keep
    the honest base's verdicts: the run is not ended, and no case is retried for ever."""
    suite, zeroed, _ = EXPECTED[name]
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / name / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, suite, ["micrograd"], SUITES, oracle, sandbox=False)
    got = {short(r.id): r for r in report.results}
    assert set(got) == set(ALL if suite == "all" else PUBLIC)
    for case, result in got.items():
        if case in zeroed:
            assert not result.passed and result.message.startswith(IN_PROCESS[name]), (case, result.message)
        else:
            assert result.passed == honest[case], (case, result.message)


#: what a Python program may raise that `except Exception` does not catch
RAISED = [
    "exit_in_backward",
    "exit_builtin_in_backward",
    "interrupt_in_backward",
    "base_exception_in_backward",
]


@pytest.mark.parametrize("name", RAISED)
def test_what_a_python_program_may_raise_costs_its_cases_not_a_worker_each(
    name, tmp_path, oracle, started_workers
):
    """sys.exit(), exit(), a KeyboardInterrupt and any other BaseException raised in
    backward() fail the cases that call it, in the one worker: each case used to end the
    worker, and a fresh one (an interpreter's start and the submission's import) then served
    the next case."""
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / name / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)
    assert [short(r.id) for r in report.results if not r.passed] == BACKWARD
    assert len(started_workers) == 1, started_workers


def test_threads_around_the_refusal_cost_two_workers_then_the_rest_is_not_run(tmp_path, oracle):
    """Each case that leaves a thread costs a fresh worker: after two, the submission's other
    cases of that assignment fail without running."""
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / "thread_around_refusal" / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)
    threaded = [r for r in report.results if "started 1 thread(s) still running after it" in r.message]
    not_run = [r for r in report.results if r.message.startswith("not run: 2 cases of micrograd started")]
    assert len(threaded) == 2 and not_run, [r.message for r in report.results]
    # what ran before that (a case without backward()) keeps its verdict
    assert all(r.passed for r in report.results if r not in threaded and r not in not_run)


def test_smuggled_torch_is_flagged_when_it_loads(tmp_path, oracle, monkeypatch):
    """Where torch can be reached (isolation weaker than bubblewrap), its libraries in the
    worker's memory map give it away."""
    weaker = "mount namespace" if confine.available() else "none"
    monkeypatch.setattr(engine, "strongest_isolation", lambda: weaker)
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / "torch_smuggled" / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, "public", ["micrograd"], SUITES, oracle, limits=Limits(timeout=20.0, memory=4096))
    assert report.score == 0
    assert (
        report.results[0].message
        == "uses torch to compute gradients (loaded while its cases ran): not allowed"
    )
    assert any("uses torch" in e for e in report.errors)


#: appended to a correct engine.py: its first addition, inside a case, reaches torch past the
#: import guard, as torch_smuggled does when it is imported
TORCH_ON_FIRST_ADD = """

_add = Value.__add__


def _add_with_torch(self, other):
    import importlib, sys

    if "to" + "rch" not in sys.modules:
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ImportGuard"]
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        sys.path.append(f"{sys.prefix}/lib/{version}/site-packages")
        try:
            importlib.import_module("to" + "rch")
        except Exception as exc:
            print("no luck:", exc)
    return _add(self, other)


Value.__add__ = _add_with_torch
"""


def test_torch_smuggled_in_during_a_case_is_flagged(tmp_path, oracle, monkeypatch):
    """The grader reads a worker's maps again between cases only when its address space has
    changed size: a library loaded by a case, not by the import, grows it and is seen."""
    weaker = "mount namespace" if confine.available() else "none"
    monkeypatch.setattr(engine, "strongest_isolation", lambda: weaker)
    sub = base(tmp_path / "sub")
    engine_py = sub / "micrograd" / "engine.py"
    engine_py.write_text(engine_py.read_text() + TORCH_ON_FIRST_ADD)
    report = grade(sub, "public", ["micrograd"], SUITES, oracle, limits=Limits(timeout=20.0, memory=4096))
    assert report.score == 0
    assert any("uses torch" in e for e in report.errors), report.errors


def test_fake_results_stay_inside_the_sandbox(tmp_path, oracle, monkeypatch):
    """Planted results.json files are never read; with confinement they cannot even be written."""
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / "fake_results" / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    sandboxes = tmp_path / "deep" / "tmp"
    sandboxes.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(sandboxes))
    real = tmp_path / "deep" / "results.json"
    write_json(gradescope(grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)), real)
    assert json.loads(real.read_text())["score"] == 5
    if confine.available():
        planted = [p for p in tmp_path.rglob("results.json") if p != real]
        assert planted == []


@pytest.mark.skipif(not confine.available(), reason="needs a mount namespace (Linux, root)")
def test_confined_workers_cannot_reach_the_reference_by_absolute_path(tmp_path, oracle):
    sub = base(tmp_path / "sub")
    target = REPO / "reference" / "micrograd" / "engine.py"
    engine = sub / "micrograd" / "engine.py"  # every case imports it: a failure here is every case's
    engine.write_text(
        engine.read_text()
        + f"\nnamespace = {{}}\nexec(open({str(target)!r}).read(), namespace)\nValue = namespace['Value']\n"
    )
    report = grade(sub, "public", ["micrograd"], SUITES, oracle, limits=LIMITS)
    assert report.score == 0
    assert "FileNotFoundError" in report.results[0].message


ESCAPE = """
import ctypes, os, subprocess, sys
from micrograd.engine import Value

_backward = Value.backward
TRIED = []


def keep_a_key():
    # add_key(2) into the user's keyring, which outlives the process: a later worker of the
    # same user (a root grader's --user) could read it back
    number = {{"x86_64": 248, "aarch64": 217}}[os.uname().machine]
    libc = ctypes.CDLL(None, use_errno=True)
    serial = libc.syscall(number, b"user", b"for-later", b"hidden", 6, ctypes.c_int(-4))
    if serial < 0:
        raise OSError(ctypes.get_errno(), "add_key")
    return serial


def backward(self):
    for what, attempt in [
        ("kill", lambda: os.kill({victim}, 9)),
        ("kill everyone", lambda: os.kill(-1, 9)),
        ("kill the grader", lambda: os.kill(os.getppid(), 9)),
        ("fork", os.fork),
        ("run", lambda: subprocess.run(["/bin/true"])),
        ("leave the group", os.setsid),
        ("read the grader's memory", lambda: open(f"/proc/{{os.getppid()}}/mem", "rb").read(1)),
        ("keep a key for a later worker", keep_a_key),
    ]:
        try:
            if attempt() == 0:
                os._exit(0)  # a forked child
            TRIED.append(what)
        except Exception:
            pass
    if TRIED:
        raise RuntimeError("escaped: " + ", ".join(TRIED))
    _backward(self)


Value.backward = backward
"""


def test_workers_cannot_start_processes_or_signal_others(tmp_path, oracle):
    """Beyond the list: no killing the grader or anyone else, no processes that outlive the
    worker's group, no reading the grader's memory, nothing kept in the kernel's keyrings."""
    victim = subprocess.Popen(["sleep", "60"])
    try:
        sub = base(tmp_path / "sub")
        (sub / "micrograd" / "__init__.py").write_text(ESCAPE.format(victim=victim.pid))
        report = grade(sub, "public", ["micrograd"], SUITES, oracle, limits=LIMITS)
        if ISOLATION == "none" or UNFILTERED in report.notes:
            pytest.skip("needs the seccomp filter and some confinement (Linux)")
        assert victim.poll() is None, "the worker killed another process"
        got = {short(r.id): r for r in report.results}
        assert all("escaped" not in r.message for r in got.values()), [r.message for r in got.values()]
        assert report.score == 4  # the honest base's public score: nothing was lost either
    finally:
        victim.kill()
        victim.wait()


def test_public_cases_never_see_the_hidden_suite(tmp_path, oracle):
    """One worker serves both suites of an assignment, each in a child of its own: the hidden
    suite's files enter its lib/ only after the public child is gone."""
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / "peek_at_suites" / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)
    seen = {short(r.id): r.message for r in report.results}
    for case in PUBLIC:
        assert "'test_small.py'" in seen[case] and "test_small_hidden" not in seen[case], seen[case]
    for case in ("sub_div", "tanh_chain"):
        assert "'test_small_hidden.py'" in seen[case], seen[case]


def test_no_note_comes_from_a_hidden_phase(tmp_path, oracle):
    """A note's text is the submission's own (here, why its __init__.py failed), and the
    report shows notes whatever the visibility of hidden cases: only the public phase's
    reach it, and the hidden phase, which has the hidden suite at hand, says nothing."""
    sub = base(tmp_path / "sub")
    shutil.copytree(HOSTILE / "peek_in_a_note" / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    report = grade(sub, "all", ["micrograd"], SUITES, oracle, limits=LIMITS)
    said = [n for n in report.notes if "suites in reach" in n]
    assert said and all("'test_small.py'" in n for n in said), report.notes
    assert not any("test_small_hidden" in n for n in report.notes), report.notes
