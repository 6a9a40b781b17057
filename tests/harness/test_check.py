"""`python -m grader check`: passes on the kit, and fails (exit 1, the right row) when the
reference does not score full marks, when a case no mutant fails, when a case is worth no
points. The mutants themselves: one slip each, in the right pool, always valid Python."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.authoring import check, mutants
from grader.authoring.forward import solution_functions
from grader.case.define import collect
from grader.verdict.oracle import Oracle, default_cache_dir

REPO = Path(__file__).resolve().parents[2]
ROWS = {
    "topics": "every case is in one topic, with points",
    "reference": "the reference scores full marks",
    "template": "the template scores only the forward points",
    "sync": "generated files are in sync",
    "leaks": "no solution leaks",
    "mutants": "every case can fail",
}

SMALL_SUITE = '''
import numpy as np

from grader.case import case


@case("needle", topic="vacuous", points=1)
def test_constant(lib):
    """Compares a number the case made itself: no engine can fail it."""
    return {{"n": 2.0}}


@case("needle", topic="ops", points={points})
def test_mul_gradient(lib):
    """The product's gradient, through backward()."""
    a = lib.tensor(np.array([1.0, -2.0, 3.0]), "a")
    b = lib.tensor(np.array([0.5, 4.0, -1.5]), "b")
    out = (a * b).sum()
    lib.backward(out)
    return {{"a": a, "b": b, "out": out}}
'''


MUL = "other.grad += self.data * out.grad"  # micrograd's product rule, for its second factor


def grader_check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "grader", "check", *args], cwd=REPO, env=env, capture_output=True, text=True
    )


def row(output: str, key: str) -> str:
    """The table's lines of one row, joined (its detail wraps over several)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if ROWS[key] in line)
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if line.startswith(("├", "└")):
            break
        block.append(line)
    return " ".join(" ".join(cell.strip() for cell in line.split("│")) for line in block)


def test_the_kit_passes():
    """needle, with the first 60 mutants (one or more per function): every check passes."""
    done = grader_check("--assignment", "needle", "--mutants", "60")
    assert done.returncode == 0, done.stdout + done.stderr
    for key in ROWS:
        assert " ok " in row(done.stdout, key), row(done.stdout, key)
    assert "all 6 checks passed" in done.stdout


def test_a_reference_short_of_full_marks_fails(tmp_path):
    """micrograd's (the quicker to check) product rule, slipped: the reference row fails, exit 1."""
    reference = tmp_path / "reference"
    shutil.copytree(REPO / "reference", reference, ignore=shutil.ignore_patterns("__pycache__"))
    engine = reference / "micrograd" / "engine.py"
    text = engine.read_text()
    assert text.count(MUL) == 1
    engine.write_text(text.replace(MUL, "other.grad += other.data * out.grad"))
    done = grader_check("--assignment", "micrograd", "--mutants", "0", "--reference", str(reference))
    assert done.returncode == 1, done.stdout + done.stderr
    line = row(done.stdout, "reference")
    assert "FAIL" in line and "; failed: micrograd/" in line, line
    assert "of 5 checks failed" in done.stdout  # --mutants 0: that check is left out, not failed
    assert "every case can fail" not in done.stdout


@pytest.fixture
def small_suites(tmp_path) -> Path:
    folder = tmp_path / "suites" / "public" / "needle"
    folder.mkdir(parents=True)
    (folder / "test_small.py").write_text(SMALL_SUITE.format(points=1))
    return tmp_path / "suites"


def test_a_case_no_mutant_fails_is_named(small_suites):
    cases = collect(small_suites, ["needle"], ["public"])
    options = check.Options(
        repo=REPO,
        reference=REPO / "reference",
        template=REPO / "student_template",
        suites=small_suites,
        course=REPO / "assignments",
        assignments=("needle",),
        mutants=40,
        oracle=Oracle(default_cache_dir()),
    )
    reference = check.graded_reference(options, cases)
    assert check.check_reference(reference.report).ok
    assert reference.forward == {"needle/test_small::constant"}  # it calls no gradient at all
    # what each case's run called: a mutant elsewhere is not run on it
    rules = solution_functions(REPO / "reference", ["needle"])
    assert not reference.calls["needle/test_small::constant"] & rules
    ops = REPO / "reference" / "needle" / "ops.py"
    mul = next(
        m
        for m in mutants.mutants_of(ops.read_text(), "needle/ops.py", "needle")
        if m.site == "EWiseMul.gradient"
    )
    assert (str(ops.resolve()), mul.function) in reference.calls["needle/test_small::mul_gradient"]
    verdict = check.check_mutants(options, cases, reference)
    assert not verdict.ok and verdict.name == ROWS["mutants"]
    assert "no mutant fails: needle/test_small::constant" in verdict.detail
    assert "mul_gradient" not in verdict.detail.split("no mutant fails:")[1]


def test_a_case_worth_nothing_fails_the_topic_row(tmp_path):
    folder = tmp_path / "suites" / "public" / "needle"
    folder.mkdir(parents=True)
    (folder / "test_small.py").write_text(SMALL_SUITE.format(points=0))
    cases = collect(tmp_path / "suites", ["needle"], ["public"])
    verdict = check.check_topics(cases, tmp_path / "suites")
    assert not verdict.ok
    assert "points not > 0: needle/test_small::mul_gradient" in verdict.detail
    kit = check.check_topics(collect(REPO / "tests", ["needle"], ["public", "hidden"]), REPO / "tests")
    assert kit.ok, kit.detail


def test_mutants_are_single_slips_in_the_right_pool():
    text = (
        "def f(x, y):\n"
        "    z = x * y\n"
        "    ### BEGIN SOLUTION\n"
        "    # hint: add\n"
        "    z += x - y\n"
        "    ### END SOLUTION\n"
        "    return z\n"
    )
    found = mutants.mutants_of(text, "micrograd/engine.py", "micrograd")
    assert found and len({m.text for m in found}) == len(found)
    for mutant in found:
        ast.parse(mutant.text)
        changed = [
            i
            for i, (a, b) in enumerate(zip(text.splitlines(), mutant.text.splitlines(), strict=True))
            if a != b
        ]
        assert len(changed) == 1, mutant.id
        assert mutant.pool == ("solution" if changed[0] == 4 else "forward"), mutant.id
    texts = {m.text.splitlines()[4].strip() for m in found if m.pool == "solution"}
    assert {"z = x - y", "z -= x - y", "z += 2 * (x - y)", "z += (x + y)", "z += (y - x)", "pass"} <= texts
    assert any(m.text.splitlines()[1].strip() == "z = (x / y)" for m in found)


def test_every_function_is_tried_before_any_is_tried_twice():
    found = mutants.mutants(REPO / "reference", ["micrograd"])
    sites = {(m.path, m.site, m.pool) for m in found}
    first = mutants.ordered(found)[: len(sites)]
    assert {(m.path, m.site, m.pool) for m in first} == sites
    assert mutants.ordered(found) == mutants.ordered(found)  # the order is the seed's alone


def test_the_solution_functions_are_the_rules_and_backward():
    found = solution_functions(REPO / "reference", ["micrograd"])
    engine = (REPO / "reference" / "micrograd" / "engine.py").read_text().splitlines()
    names = sorted(engine[line - 1].strip() for _, line in found)
    assert names.count("def _backward():") == 8 and "def backward(self):" in names
    assert len(names) == 9


def test_a_wrong_mutant_count_is_a_usage_error():
    done = grader_check("--mutants", "some")
    assert done.returncode == 2 and "a number of mutants, or all" in done.stderr
