"""The sandboxed grader: strict parsing, the worker's world, faults, the oracle cache, the
command line, and verdicts equal to the in-process path on honest (buggy) submissions."""

import builtins
import fnmatch
import json
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader import assignments
from grader.case import hang
from grader.case import limits as time_limits
from grader.case.define import collect
from grader.case.limits import REPEATS, SHORT_TIMEOUT
from grader.case.quantity import MalformedResult, Quantity
from grader.case.wire import TAPE_KEYS, encode
from grader.classgrade.engine import GRACE, LocalBackend, grade_class
from grader.classgrade.gradebook import Gradebook
from grader.classgrade.layout import Submission
from grader.classgrade.runner import cpu_count
from grader.pipeline import Request, grade_submission, select_cases
from grader.report.gradescope import gradescope
from grader.report.markdown import markdown
from grader.sandbox import Limits
from grader.sandbox.engine import SandboxEngine, copy_once
from grader.sandbox.protocol import FrameReader, decode, parse_run, parse_tape
from grader.sandbox.root import GRADER, SandboxError, add_suite, build, precompile, worker_modules
from grader.verdict import integrity
from grader.verdict.compare import compare
from grader.verdict.oracle import Oracle, run_from_plain, run_to_plain
from tests.harness.bugs import materialize as write_bug
from tests.harness.bugs import micrograd as micrograd_bugs
from tests.harness.bugs import needle as needle_bugs
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
FAST = Limits(timeout=2.0, budget=60.0, memory=1024)


@pytest.fixture(scope="module")
def oracle(oracle_cache):
    """The run's oracle cache, holding the small suites' runs too: the commands these tests
    run read it (an oracle of its own, so that it writes what this process already knew)."""
    oracle = Oracle(oracle_cache)
    oracle.prepare(collect(SMALL, ["micrograd"], ["public", "hidden"]), SMALL)
    return oracle


def submission(tmp_path, name="sub", edits=(), file="engine.py"):
    root = tmp_path / name
    shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
    path = root / "micrograd" / file
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return root


def verdicts(report):
    return {r.id: (r.passed, r.message) for r in report.results}


# ---- strict parsing of what the worker sends ----

GOOD = {
    "kind": "run",
    "id": "c",
    "results": {"a": {"data": [1.0], "shape": [], "dtype": "float64"}, "a.grad": None},
    "tape": [
        {
            "value": {"data": [1.0], "shape": [], "dtype": "float64"},
            **dict.fromkeys(TAPE_KEYS[1:]),
        }
    ],
    "failure": None,
    "output": "",
    "notes": [],
    "missing": [],
}


def with_(**changes):
    return {**GOOD, **changes}


def test_a_well_formed_run_parses():
    run = parse_run(decode(encode(GOOD)[4:]), "c")
    assert run.results["a"] == Quantity((1.0,), ())
    assert run.fault is None and run.steps == []  # steps only ever come from the oracle


@pytest.mark.parametrize(
    "message",
    [
        with_(id="other"),
        with_(kind="done"),
        with_(extra=1),
        with_(results=[]),
        with_(results={"a": {"data": [True], "shape": [], "dtype": "float64"}}),
        with_(results={"a": {"data": ["1.0"], "shape": [], "dtype": "float64"}}),
        with_(results={"a": {"data": [1.0, 2.0], "shape": [], "dtype": "float64"}}),
        with_(results={"a": {"data": [1.0], "shape": [], "dtype": "object"}}),
        with_(results={"a": {"data": [10**400], "shape": [1], "dtype": "float64"}}),
        with_(results={"a": {"data": [1.0], "shape": [], "dtype": "float64", "eq": "always"}}),
        with_(tape=[{"value": None}]),
        with_(failure={"type": "X", "message": 3, "where": None, "rule": None}),
        with_(failure={"type": "X", "message": "m", "where": ["f", "1", "g"], "rule": None}),
        with_(failure={"type": "X", "message": "m", "where": None, "rule": 1}),
        with_(failure={"type": "X", "message": "m", "where": None}),
        with_(output=None),
        with_(notes=None),
        with_(notes=[1]),
        with_(notes=["a note"] * 100),
        with_(missing=None),
        with_(missing=[3]),
        with_(missing=["tanh"] * 1000),
    ],
)
def test_anything_unexpected_is_malformed(message):
    with pytest.raises(MalformedResult):
        parse_run(message, "c")


def test_a_held_back_tape_comes_only_when_asked_for_and_is_parsed_as_strictly():
    held = parse_run(with_(tape=None), "c")
    assert held.results["a"] == Quantity((1.0,), ()) and held.tape == []
    tape = parse_tape({"kind": "tape", "id": "c", "tape": GOOD["tape"]}, "c")
    assert tape == parse_run(GOOD, "c").tape
    for bad in (
        {"kind": "tape", "id": "other", "tape": GOOD["tape"]},
        {"kind": "run", "id": "c", "tape": GOOD["tape"]},
        {"kind": "tape", "id": "c", "tape": [{"value": None}]},
        {"kind": "tape", "id": "c", "tape": None},
        {"kind": "tape", "id": "c", "tape": GOOD["tape"], "extra": 1},
    ):
        with pytest.raises(MalformedResult):
            parse_tape(bad, "c")


def test_frames_are_bounded_and_json_only():
    reader = FrameReader(limit=100)
    assert reader.feed(struct.pack(">I", 2) + b"{}" + struct.pack(">I", 3)) == [b"{}"]
    assert reader.feed(b"[1]") == [b"[1]"]
    with pytest.raises(MalformedResult):
        FrameReader(limit=100).feed(struct.pack(">I", 101))
    for junk in (b"\xff\xfe", b"[1, 2]", b'{"no": "kind"}', b"1" * 50 + b"e"):
        with pytest.raises(MalformedResult):
            decode(junk)


def test_only_a_case_with_wrong_results_has_its_tape_sent(tmp_path, oracle):
    """The sandbox holds each tape back and asks for it when the results are wrong: a wrong
    case gets the tape its diagnosis reads, a right one costs nothing to send."""
    sub = submission(tmp_path, edits=[("(1.0 - out.data**2) * out.grad", "(1.0 - out.data) * out.grad")])
    cases = [c for c in collect(SMALL, ["micrograd"], ["public"]) if c.trace]
    oracle.prepare(cases, SMALL)
    by_id = {c.id: oracle.expected(c).results for c in cases}
    runs = SandboxEngine(sub, SMALL, FAST, expected=by_id.get).run_all(cases)
    wrong = {
        c.id for c, run in zip(cases, runs, strict=True) if run.results and compare(by_id[c.id], run.results)
    }
    assert wrong and wrong != {c.id for c in cases}
    for case, run in zip(cases, runs, strict=True):
        assert run.fault is None and run.failure is None, (case.id, run)
        assert bool(run.tape) == (case.id in wrong), case.id
        if run.tape:
            assert len(run.tape) == len(oracle.expected(case).tape)
    told = SandboxEngine(sub, SMALL, FAST).run_all(cases)  # no expected results: every tape comes
    assert all(run.tape for run in told)


# ---- the worker's world ----


def test_the_worker_gets_no_oracle_no_verdict_and_one_suite(tmp_path):
    lib, work = build(tmp_path, REPO / "reference", "micrograd")
    assert list((lib / "suites").iterdir()) == []  # each suite comes when its phase does
    add_suite(lib, SMALL, "public", "micrograd")
    shipped = {p.relative_to(lib).as_posix() for p in lib.rglob("*.py") if "numpy" not in p.parts}
    packages = {p.split("/")[1] for p in shipped if p.startswith("grader/")}
    assert packages == {"__init__.py", "case", "assignments"}
    assert not any(p.endswith("/oracle.py") for p in shipped)
    assert "grader/case/worker.py" in shipped
    assert any(p.startswith("suites/public/micrograd/") for p in shipped)
    assert not any(p.startswith("suites/hidden") for p in shipped)
    # the package whole, and the submission's other Python files in their places (no data)
    assert (work / "micrograd" / "engine.py").is_file()
    assert all(p.suffix == ".py" for p in work.rglob("*") if p.is_file() and "micrograd" not in p.parts)
    assert not (work / "micrograd" / "__pycache__").exists()


def test_after_precompile_a_worker_s_world_compiles_nothing(tmp_path, monkeypatch):
    """The class run compiles in its fork server what every submission's `lib/` holds, so
    that no submission's process compiles any of it again."""
    precompile(SMALL)
    compiled, real = [], builtins.compile
    monkeypatch.setattr(builtins, "compile", lambda *a, **k: compiled.append(a[1]) or real(*a, **k))
    lib, _ = build(tmp_path, REPO / "reference", "micrograd")
    add_suite(lib, SMALL, "public", "micrograd")
    add_suite(lib, SMALL, "hidden", "micrograd")
    assert (lib / "pyseccomp.py").is_file() and (lib / "__pycache__").is_dir()
    assert compiled == []


def test_runs_starting_together_make_one_whole_copy_of_the_grader(tmp_path):
    """A class's copy of the grader's worker modules is made by the first of its submissions'
    runs that binds it: runs starting at once each get the whole copy, and nothing half made
    is left beside it."""
    place = tmp_path / "grader"
    together = threading.Barrier(4)

    def start() -> Path:
        together.wait()
        return copy_once(place, other_user=False)

    with ThreadPoolExecutor(4) as pool:
        copies = list(pool.map(lambda _: start(), range(4)))
    assert copies == [place] * 4
    assert [p.name for p in tmp_path.iterdir()] == ["grader"]
    for module in worker_modules():
        assert (place / module.relative_to(GRADER)).read_bytes() == module.read_bytes()


def test_a_suite_that_imports_the_trusted_side_cannot_run(tmp_path, oracle):
    suites = tmp_path / "suites"
    shutil.copytree(SMALL, suites)
    bad = suites / "public" / "micrograd" / "test_bad.py"
    bad.write_text("from grader.verdict.oracle import Oracle  # noqa: F401\n")
    with pytest.raises(SandboxError, match="No module named 'grader.verdict'"):
        grade(REPO / "reference", "public", ["micrograd"], suites, oracle, limits=FAST)


def test_the_worker_cannot_import_torch(tmp_path, oracle):
    """Past the import guard (which would give it a placeholder), torch is not there."""
    guard_off = "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != 'ImportGuard']\n"
    sub = submission(
        tmp_path,
        edits=[
            (
                "import math\n",
                f"import math\nimport importlib\nimport sys\n{guard_off}"
                "importlib.import_module('tor' + 'ch')\n",
            )
        ],
    )
    report = grade(sub, "public", ["micrograd"], SMALL, oracle, limits=FAST)
    assert report.score == 0
    assert "No module named 'torch'" in report.results[0].message


# ---- faults at load time: every case zero, one clear message ----


@pytest.mark.parametrize(
    "edits, file, expected",
    [
        (
            [("def relu(self):", "def relu(self)")],
            "engine.py",
            "micrograd.engine does not compile: expected ':' (engine.py, line",
        ),
        (
            [("import math\n", "import math\nraise ImportError('on purpose')\n")],
            "engine.py",
            "ImportError: on purpose",
        ),
        (
            [("import math\n", "import math\nfrom micrograd import data\n")],
            "engine.py",
            "cannot import name 'data'",
        ),
    ],
)
def test_load_faults_score_zero_with_a_clear_message(tmp_path, oracle, edits, file, expected):
    sub = submission(tmp_path, edits=edits, file=file)
    boxed = grade(sub, "all", ["micrograd"], SMALL, oracle, limits=FAST)
    assert boxed.score == 0 and boxed.max_score > 0
    assert all(expected in r.message for r in boxed.results), boxed.results[0].message
    assert verdicts(boxed) == verdicts(grade(sub, "all", ["micrograd"], SMALL, oracle, sandbox=False))


def test_missing_package_or_file(tmp_path, oracle):
    (tmp_path / "empty").mkdir()
    report = grade(tmp_path / "empty", "public", None, SMALL, oracle, limits=FAST)
    assert report.score == 0 and report.max_score > 0
    assert all("no package 'micrograd'" in r.message for r in report.results if r.assignment == "micrograd")
    sub = submission(tmp_path)
    (sub / "micrograd" / "nn.py").unlink()  # no case of this suite needs it
    report = grade(sub, "public", ["micrograd"], SMALL, oracle, limits=FAST)
    assert report.score == report.max_score > 0


def test_the_budget_bounds_the_whole_submission(tmp_path, oracle, monkeypatch):
    monkeypatch.setattr(time_limits, "PROBE_CPU", 0)  # full timeouts, as a hang on some graphs has
    sub = submission(
        tmp_path, edits=[("        topo, visited = [], set()", "        while True:\n            pass")]
    )
    started = time.monotonic()
    limits = Limits(timeout=1.0, budget=3.0)
    report = grade(sub, "all", ["micrograd"], SMALL, oracle, limits=limits)
    assert time.monotonic() - started < limits.budget + 5  # killing the last worker, scoring
    messages = [r.message for r in report.results]
    assert any(m.startswith("timed out after 1 s") for m in messages)
    assert any(m.startswith("grading budget exhausted") for m in messages)
    assert report.score <= 1  # at most mul_rule, which never calls backward()


LOOP = "        while True:\n            pass  # stuck here\n"


def loop_line(sub: Path, file: str = "engine.py") -> int:
    lines = (sub / "micrograd" / file).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "stuck here" in line)


def test_a_timed_out_case_says_where_it_was_stuck(tmp_path, oracle, monkeypatch):
    """Cases that hang are cut to SHORT_TIMEOUT once REPEATS of them hung in one function
    (without the probe, as for a backward() that hangs on some graphs but not the probe's;
    tests/harness/test_hang.py has the probe)."""
    monkeypatch.setattr(time_limits, "PROBE_CPU", 0)
    sub = submission(
        tmp_path,
        edits=[("        topo, visited = [], set()\n", LOOP + "        topo, visited = [], set()\n")],
    )
    line = loop_line(sub)
    report = grade(sub, "all", ["micrograd"], SMALL, oracle, limits=Limits(timeout=2.0, budget=120.0))
    hung = [r.message for r in report.results if "timed out" in r.message]
    assert len(hung) == len([r for r in report.results if "mul_rule" not in r.id]) > REPEATS
    for message in hung:
        assert re.search(rf"in Value\.backward \(engine\.py, line ({line}|{line - 1})\)", message), message
    assert not any("cut to" in m for m in hung[:REPEATS])
    cut = f"timed out after {SHORT_TIMEOUT:g} s"
    assert all(
        m.startswith(cut) and f"once {REPEATS} cases had hung in Value.backward" in m for m in hung[REPEATS:]
    )


def test_an_import_that_hangs_says_where(tmp_path, oracle):
    sub = submission(
        tmp_path, edits=[("import math\n", "import math\n\nwhile True:\n    pass  # stuck here\n")]
    )
    line = loop_line(sub)
    report = grade(sub, "public", ["micrograd"], SMALL, oracle, limits=Limits(timeout=2.0, budget=60.0))
    assert report.score == 0
    where = rf"in <module> \(engine\.py, line ({line}|{line - 1})\)"
    for r in report.results:
        assert re.match(rf"importing micrograd failed: timed out after 2 s {where}", r.message), r.message


def test_hang_location_ignores_frames_outside_the_submission(tmp_path):
    work = tmp_path / "work"
    dump = (
        'Thread 0x1 (most recent call first):\n  File "/elsewhere/engine.py", line 3 in backward\n'
        f'  File "{tmp_path}/lib/grader/case/worker.py", line 9 in other_thread\n\n'
        "Current thread 0x2 (most recent call first):\n"
        '  File "/usr/lib/python3.11/numpy/core.py", line 5 in dot\n'
        f'  File "{work}/micrograd/engine.py", line 42 in backward\n'
        f'  File "{tmp_path}/lib/grader/case/worker.py", line 9 in main\n'
    )
    assert hang.where(dump, work) == ("micrograd/engine.py", 42, "backward")
    assert hang.where("no dump here", work) is None
    assert hang.describe(hang.where(dump, work)) == " in backward (engine.py, line 42)"  # no such file
    # a dump still being written is complete once the cases' thread's bottom frame is
    cases_thread = dump[dump.index("Current thread") :]
    assert hang.complete(cases_thread) and not hang.complete(cases_thread[: cases_thread.rfind("worker.py")])


def engine_dump(tmp_path: Path, source: str):
    """A submission's work folder whose micrograd/engine.py is `source`, and how the worker's
    stack dump names frames in it: (line, function) pairs, innermost first, above the
    worker's own bottom frame."""
    work = tmp_path / "work"
    (work / "micrograd").mkdir(parents=True)
    (work / "micrograd" / "engine.py").write_text(source)
    bottom = f'  File "{tmp_path}/lib/grader/case/worker.py", line 9 in main\n'

    def dump(*frames: tuple[int, str]) -> str:
        inner = "".join(f'  File "{work}/micrograd/engine.py", line {n} in {func}\n' for n, func in frames)
        return "Current thread 0x2:\n" + inner + bottom

    return work, dump


def test_a_hang_names_its_function_as_a_traceback_would(tmp_path):
    """A dump names a function by its code's name alone; read off the source, the message
    names it with its class and the functions around it, as the in-process engine's does."""
    source = (
        "class Value:\n"
        "    def backward(self):\n"
        "        while True:\n"  # line 3
        "            pass\n"
        "\n"
        "    def __mul__(self, other):\n"
        "        def _backward():\n"
        "            return 1\n"  # line 8
        "        return _backward\n"
        "\n"
        "def backward():\n"
        "    return 2\n"  # line 12
    )
    work, dump = engine_dump(tmp_path, source)
    for line, func, named in [(3, "backward", "Value.backward"), (8, "_backward", "Value.__mul__._backward"),
                              (12, "backward", "backward"), (3, "other", "other")]:  # fmt: skip
        assert hang.where(dump((line, func)), work) == ("micrograd/engine.py", line, named)


def test_a_hang_in_given_code_is_laid_at_the_code_that_called_it(tmp_path):
    """The innermost frame that is not one of the functions the template gives whole (the
    assignment's GIVEN): a loop in a rule that makes Values is where the time ran out, not
    Value's constructor; where every frame is given code, the innermost."""
    source = (
        "class Value:\n"
        "    def __init__(self, data):\n"
        "        self.data = data\n"  # line 3
        "\n"
        "    def tanh(self):\n"
        "        def _backward():\n"
        "            while True:\n"
        "                Value(1.0)\n"  # line 8
        "        return _backward\n"
    )
    work, dump = engine_dump(tmp_path, source)
    inner, outer = (3, "__init__"), (8, "_backward")
    given = assignments.given("micrograd")
    assert hang.where(dump(inner, outer), work, given) == ("micrograd/engine.py", 8, "Value.tanh._backward")
    # no given code named: the innermost frame
    assert hang.where(dump(inner, outer), work) == ("micrograd/engine.py", 3, "Value.__init__")
    assert hang.where(dump(inner), work, given) == ("micrograd/engine.py", 3, "Value.__init__")


# ---- integrity ----


def test_integrity_scan_finds_autodiff_imports_however_written():
    source = (
        "import os\nif True:\n    from jax import grad\n"
        "importlib.import_module('autograd.numpy')\n__import__('torch')\n"
    )
    found = integrity.scan_source(source, "engine.py")
    assert [(f.library, f.where) for f in found] == [
        ("jax", "engine.py line 3"),
        ("autograd", "engine.py line 4"),
        ("torch", "engine.py line 5"),
    ]
    assert found[0].reason == "uses jax to compute gradients (engine.py line 3): not allowed"
    assert integrity.scan_source("import numpy\nimport math\n", "x.py") == []


# ---- the oracle's disk cache ----


def test_the_oracle_cache_round_trips_exactly(oracle):
    """PyTorch's runs (this oracle has not read the kit's suites from the cache) survive the
    cache's plain form, and a run read back passes on its detail as read, unchanged."""
    cases = [
        c  # not the deep chains: seconds of PyTorch each
        for c in collect(REPO / "tests", ["micrograd", "needle"], ["public"])
        if "deep" not in c.id and "hundred_thousand" not in c.id
    ]
    for case in cases[:20] + cases[-20:]:
        run = oracle.expected(case)
        plain = json.loads(json.dumps(run_to_plain(run)))
        again = run_from_plain(plain)
        assert again.ops == run.ops is not None  # kept apart: read without decoding the steps
        assert repr(again.steps) == repr(run.steps) and again.tape == run.tape
        assert again.results == run.results and again.names == run.names and again.outputs == run.outputs
        kept, decoded = run_from_plain(plain), run_from_plain(plain)
        assert decoded.tape is not None  # read: encoded anew, where `kept` passes on its detail as read
        assert run_to_plain(kept) == run_to_plain(decoded) == plain


def test_a_warm_grade_never_imports_torch(oracle):
    code = (
        "import sys\nfrom grader.cli import main\n"
        f"rc = main(['grade', {str(REPO / 'reference')!r}, '--assignment', 'micrograd', '--suite', 'all',"
        f" '--cache-dir', {str(oracle.cache_dir)!r}, '--suites', {str(SMALL)!r}])\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', rc)\n"
    )
    assert len(list(oracle.cache_dir.glob("micrograd-*.json"))) >= 2  # one per suite
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "NO-TORCH 0" in warm.stdout, warm.stderr


def test_a_cold_grade_fills_the_cache(tmp_path):
    cache = Oracle(tmp_path / "cache")
    cache.prepare(collect(SMALL, ["micrograd"], ["public"]), SMALL)
    (path,) = (tmp_path / "cache").glob("micrograd-public-*.json")
    again = Oracle(tmp_path / "cache")
    again.prepare(collect(SMALL, ["micrograd"], ["public"]), SMALL)
    assert again._runs.keys() == cache._runs.keys() and set(again.seconds) == set(cache.seconds)
    assert path.stat().st_mode & 0o777  # written (atomically) and readable


# ---- output: results.json, feedback, exit codes ----


def test_command_line_writes_gradescope_results_and_feedback(tmp_path, oracle):
    sub = submission(
        tmp_path,
        edits=[
            (
                "self.grad += (1.0 - out.data**2) * out.grad",
                "print('SECRET-PRINT'); self.grad += (1.0 - out.data) * out.grad",
            )
        ],
    )
    results, feedback = tmp_path / "out" / "results.json", tmp_path / "out" / "feedback.md"
    argv = [sys.executable, "-m", "grader", "grade", str(sub), "--suite", "all", "--results", str(results)]
    argv += [
        "--feedback",
        str(feedback),
        "--suites",
        str(SMALL),
        "--cache-dir",
        str(oracle.cache_dir),
        "--timeout",
        "5",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(results.read_text())
    assert {"score", "execution_time", "tests", "extra_data"} <= set(data)
    assert data["score"] == 5 and data["extra_data"]["max_score"] == 8
    for test in data["tests"]:
        assert {"name", "score", "max_score", "status", "output", "tags", "visibility"} <= set(test)
    hidden = [t for t in data["tests"] if "hidden" in t["tags"]]
    assert hidden and all(t["visibility"] == "after_published" for t in hidden)
    assert all("SECRET-PRINT" not in t["output"] and "expected" not in t["output"] for t in hidden)
    text = feedback.read_text()
    assert "wrong gradient from tanh" in text and "SECRET-PRINT" in text  # visible case: full diagnostic
    assert "Hidden cases: " in text  # one line of points, by default
    assert "tanh_chain" not in text and "sub_div" not in text and "lib.value" not in text


def test_exit_code_is_nonzero_only_when_grading_cannot_run(tmp_path):
    broken = tmp_path / "suites" / "public" / "micrograd"
    broken.mkdir(parents=True)
    (broken / "test_broken.py").write_text("raise RuntimeError('a broken suite')\n")
    argv = [sys.executable, "-m", "grader", "grade", str(tmp_path), "--assignment", "micrograd"]
    argv += ["--suites", str(tmp_path / "suites"), "--no-cache"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "grader error" in done.stderr


def test_hidden_feedback_shows_only_pass_or_fail(tmp_path, oracle):
    sub = submission(tmp_path, edits=[("self.grad += (1.0 - out.data**2) * out.grad", "self.grad += 0.0")])
    report = grade(sub, "all", ["micrograd"], SMALL, oracle, limits=FAST)
    hidden_failed = [r for r in report.results if r.hidden and not r.passed]
    assert hidden_failed
    text = markdown(report)
    entries = gradescope(report)["tests"]
    for r in hidden_failed:
        assert r.message not in text
        assert all(r.message not in e["output"] for e in entries)


# ---- the same verdicts as in process, on honest submissions ----


def bank():
    """Every bug of both banks, with the function that writes it out."""
    return [(bug, write_bug) for bug in [*micrograd_bugs.BUGS, *needle_bugs.BUGS]]


def quick(oracle, case):
    """Deep graphs take seconds in any engine; the bug tests check them in process."""
    return "deep" not in case.id and case.topic != "deep" and oracle.seconds.get(case.id, 0.0) < 0.5


def sampled(case):
    return zlib.crc32(case.id.encode()) % 8 == 0


def aimed(bug, case):
    name = f"{case.module}::{case.name}" + (f"[{case.param_id}]" if case.param_id is not None else "")
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in bug.caught_by)


def chosen(bug, oracle, cases):
    """The suites where the bug is meant to be caught; in them, the cases meant to catch it
    and a fixed eighth of the other quick ones."""
    suites = {c.suite for c in cases if aimed(bug, c)} or {"public"}
    suite = "all" if len(suites) == 2 else suites.pop()

    def keep(case):
        return quick(oracle, case) and (aimed(bug, case) or sampled(case))

    return suite, keep


def heap_layouts(count=16):
    """Yield `count` times, each time with a different amount of live garbage on the heap, so
    that new objects land at other addresses and sets of them iterate in another order."""
    for k in range(count):
        junk = [[object() for _ in range(k)], [[None] * i for i in range(k)], [{} for _ in range(k)]]
        yield
        del junk


def in_process_verdicts(sub, case_id, oracle):
    """The verdicts the in-process path gives the case under several heap layouts."""
    seen = set()
    only, suites = [case_id.split("/")[0]], REPO / "tests"
    for _ in heap_layouts():
        report = grade(sub, "all", only, suites, oracle, sandbox=False, keep=lambda c: c.id == case_id)
        seen.add((report.results[0].passed, report.results[0].message))
    return seen


def test_sandboxed_verdicts_equal_in_process_ones(tmp_path, oracle):
    """Every bug of the banks gets the same verdict (pass/fail and message) in the sandbox as
    in process, case by case. A bug whose result follows the order in which a set of Values
    is visited (a rule assigning with `=`, a breadth-first "topological" order) is
    nondeterministic in any engine: each process iterates those sets in its own order
    (addresses differ). A case may differ only when its in-process verdict changes with the
    heap's layout. The sandboxed runs are graded as one class (`grade_class`: the same
    sandbox, each submission in a process forked from a warm one), the quick way to grade 49."""
    bugs = bank()
    assert bugs, "no bug bank"
    cases = [
        c for c in collect(REPO / "tests", ["micrograd", "needle"], ["public", "hidden"]) if quick(oracle, c)
    ]
    oracle.prepare(cases, REPO / "tests")
    limits = Limits(timeout=30.0, budget=600.0)
    requests = {
        "reference": (
            REPO / "reference",
            Request("all", None, REPO / "tests", False, limits, lambda c: quick(oracle, c) and sampled(c)),
        )
    }
    for bug, materialize in bugs:
        names = tuple(sorted({Path(file).parts[0] for file, _, _ in bug.edits}))
        suite, keep = chosen(bug, oracle, [c for c in cases if c.assignment in names])
        requests[bug.name] = (
            materialize(bug, tmp_path / bug.name),
            Request(suite, names, REPO / "tests", False, limits, keep),
        )
    local = {
        name: verdicts(grade_submission(sub, request, oracle)) for name, (sub, request) in requests.items()
    }
    chosen_cases = {name: select_cases(sub, request, oracle) for name, (sub, request) in requests.items()}
    run = grade_class(
        [Submission(name, sub) for name, (sub, _) in requests.items()],
        lambda submission: chosen_cases[submission.student],
        oracle,
        Gradebook(tmp_path / "gradebook.db"),
        LocalBackend(cpu_count(), limits.budget + GRACE),
        limits,
    )
    assert not run.failed, run.failed
    assert run.graded.keys() == requests.keys()
    assert run.graded["reference"].score == run.graded["reference"].max_score > 0
    for name, (sub, _) in requests.items():
        boxed = verdicts(run.graded[name])
        assert boxed.keys() == local[name].keys()
        for case_id, verdict in local[name].items():
            if boxed[case_id] == verdict:
                continue
            varies = len(in_process_verdicts(sub, case_id, oracle) | {verdict}) > 1
            assert varies, (name, case_id, boxed[case_id], verdict)


def test_one_worker_serves_both_suites_of_an_assignment(tmp_path, oracle, started_workers):
    """Each suite runs in a child forked from the assignment's one worker: the interpreter
    starts once per assignment, not once per suite. A child that dies takes only its own
    worker with it: a fresh one serves the rest."""
    report = grade(REPO / "reference", "all", ["micrograd"], SMALL, oracle, limits=FAST)
    assert report.score == report.max_score and len(started_workers) == 1

    started_workers.clear()
    crash = ("        self.grad += out.grad\n", "        import os; os._exit(7)\n")
    sub = submission(tmp_path, edits=[crash])  # add's rule: every case with backward() through an add
    report = grade(sub, "all", ["micrograd"], SMALL, oracle, limits=FAST)
    verdicts = {r.name: r for r in report.results}
    assert "exited with status 7" in verdicts["add"].message and len(started_workers) > 1
    assert verdicts["tanh_chain"].passed  # hidden, and no add in it


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "in-process"])
def test_an_engine_without_its_value_class_says_so_once(sandbox, tmp_path, oracle, started_workers):
    """Every case builds its numbers with micrograd's `Value`: an engine.py without it (the
    class renamed) is said once for all, naming the classes it does define, as a module that
    cannot be imported is. Each case stopped on it in the worker, and so cost a worker of its
    own: the message said only that the worker exited."""
    renamed = submission(tmp_path, edits=[("class Value:", "class Scalar:")])
    report = grade(renamed, "all", ["micrograd"], SMALL, oracle, limits=FAST, sandbox=sandbox)
    said = "micrograd/engine.py defines no Value, which every case uses (the classes it defines: Scalar)"
    assert report.results and all(said in r.message for r in report.results), report.results
    assert len(started_workers) == (1 if sandbox else 0)  # each suite's child ends on the error at once


UNSAYABLE = """
class Unsayable(Exception):
    def __str__(self):
        raise RuntimeError("no words")
"""


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "in-process"])
def test_an_exception_whose_message_raises_is_reported_as_raised(sandbox, tmp_path, oracle, started_workers):
    """A KeyError's message is its key's repr: a Value whose `__repr__` raises makes the
    message raise too. The case is reported as raised, saying so; it ended the worker in
    every such case (each saying only that the worker exited). The same when the module's
    import raises such an exception: its import failed, saying so."""
    edits = [
        (
            "        self.grad += out.grad\n",
            "        raise KeyError(self)\n",
        ),  # add's rule, on its first input
        ("    def __repr__(self):\n", "    def __repr__(self):\n        raise RuntimeError('no repr')\n"),
    ]
    report = grade(
        submission(tmp_path, edits=edits), "all", ["micrograd"], SMALL, oracle, limits=FAST, sandbox=sandbox
    )
    add = next(r for r in report.results if r.name == "add")
    said = "(no message: the submission's __repr__ or __str__ raised RuntimeError making it)"
    assert add.message.startswith("KeyError in Value.__add__._backward") and said in add.message, add.message
    assert len(started_workers) == (1 if sandbox else 0)
    broken = [("import math\n", f"import math\n{UNSAYABLE}\nraise Unsayable()\n")]
    report = grade(
        submission(tmp_path, "raises", broken),
        "all",
        ["micrograd"],
        SMALL,
        oracle,
        limits=FAST,
        sandbox=sandbox,
    )
    assert report.results and all(
        "importing micrograd/engine.py failed: Unsayable: (no message" in r.message for r in report.results
    ), report.results
