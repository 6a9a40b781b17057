"""The random programs catch what they caught when there were more of them.

The graded random programs are few (each one costs every grading a case), so this pins
what they must still catch: every bug of the banks below fails at least one public random
case and at least one hidden one (needle's public programs are smaller and catch fewer).
A change of the generator or of the number of programs that loses one fails here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from grader.case.define import collect
from grader.pipeline import REPO, SUITES_DIR, run_in_process, score
from tests.harness.bugs import materialize
from tests.harness.bugs.micrograd import BY_NAME as MICROGRAD
from tests.harness.bugs.needle import BUGS as NEEDLE_BUGS

NEEDLE = {bug.name: bug for bug in NEEDLE_BUGS}

RULES = ["add-assigns", "mul-assigns", "exp-without-out-grad", "pow-off-by-one", "tanh-no-square"]
RULES += ["sigmoid-uses-input", "log-divides-by-output", "rsub-reversed", "neg-outside-the-graph"]
#: bug -> suites whose random programs must catch it
CAUGHT = {
    **{("micrograd", name): ("public", "hidden") for name in RULES},
    **{("micrograd", name): ("public", "hidden") for name in ("no-seed", "breadth-first-order")},
    ("micrograd", "detach-returns-self"): ("public", "hidden"),
    **{
        ("needle", name): ("public", "hidden")
        for name in (
            "summation-not-broadcast-back",
            "topo-pre-order",
            "backward-ignores-out-grad",
            "reshape-gradient-wrong-shape",
            "tanh-derivative",
        )
    },
    **{
        ("needle", name): ("hidden",)
        for name in ("broadcast-axes-from-the-left", "divide-sign", "log-divides-by-output")
    },
    # An add that assigns is wrong only where its contribution lands after another one on the
    # same node, which depends on the order backward() runs the rules: with the contract's
    # order (inputs first, in order) no hidden program has such a node. The hidden suite still
    # catches it by its rule cases (the bug bank's caught_by).
    ("micrograd", "add-assigns"): ("public",),
}


@pytest.mark.parametrize("assignment, name", list(CAUGHT), ids=[f"{a}:{n}" for a, n in CAUGHT])
def test_random_programs_catch(assignment, name, oracle, tmp_path):
    bug = (MICROGRAD if assignment == "micrograd" else NEEDLE)[name]
    cases = [c for c in collect(SUITES_DIR, [assignment], ["public", "hidden"]) if c.topic == "random"]
    results = score(cases, oracle, run_in_process(materialize(bug, tmp_path / "sub"), cases), {})
    caught = {r.suite for r in results if not r.passed}
    for suite in CAUGHT[assignment, name]:
        assert suite in caught, f"{name} is no longer caught by the {suite} random programs"


def _python(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` in the kit's folder, the kit importable, as a user runs it there."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_failing_search_ends_with_its_program_shrunk(tmp_path):
    """The ungraded search on a wrong mul rule: it fails, naming the rule, and ends with the
    program shrunk to the one mul that shows the slip, as micrograd code to paste."""
    sub = materialize(MICROGRAD["mul-assigns"], tmp_path / "sub")
    done = _python(
        *("-m", "pytest", "-n", "0", "-p", "no:cacheprovider", f"--impl={sub}"),
        *("tests/public/micrograd/test_random.py", "-k", "search"),
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    failure = done.stdout.split("test_hypothesis_search ___", 1)[1].split("short test summary", 1)[0]
    assert failure.lstrip("_ \n").startswith("wrong gradient from mul"), failure
    program = failure.split("the program:\n", 1)[1].splitlines()[:-1]  # up to pytest's rule
    assert program[0].startswith("x0 = Value(") and program[-1] == "out.backward()", program
    assert len(program) <= 4, program  # shrunk: a program drawn has up to 3 leaves and 8 ops


def test_a_passing_search_never_imports_hypothesis():
    """On a correct submission each search checks its fixed programs and nothing else:
    hypothesis, a tenth of a student's run, is loaded only to shrink a failure (its own
    pytest plugin is off, in the kit's pytest settings as in the bundle's)."""
    check = (
        "import sys, pytest; "
        "status = pytest.main(['-q', '-n', '0', '-p', 'no:cacheprovider', '--impl=reference', "
        "'tests/public/micrograd/test_random.py', 'tests/public/needle/test_random.py', '-k', 'search']); "
        "print('hypothesis' in sys.modules); sys.exit(status)"
    )
    done = _python("-c", check)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "2 passed" in done.stdout and done.stdout.rstrip().endswith("False"), done.stdout[-2000:]
