"""Defects a new user hits: imports inside functions, torch, an installed grader, pytest run
from a student's folder, options checked before grading, printed output, pytest's options.

Submissions are built in tmp_path from reference/ copies.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.case.define import Case
from grader.report.model import Report, Status
from grader.verdict.oracle import Oracle
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "reference"
MODULES = {"micrograd": {"test_composite", "test_detach"}, "needle": {"test_composite", "test_detach"}}


def few(case: Case) -> bool:
    """A few cases: composite ones, and forward ones that run no gradient rule."""
    forward = case.module == "test_ops" and case.name == "forward" and case.param_id in ("add", "mul", "tanh")
    return case.module in MODULES[case.assignment] or forward


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Oracle:
    return Oracle(tmp_path_factory.mktemp("options-oracle"))


def copy(name: str, dest: Path) -> Path:
    shutil.copytree(REFERENCE / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def patch(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def full(report: Report) -> bool:
    return report.max_score > 0 and report.score == report.max_score


def failing(report: Report) -> dict[str, str]:
    return {r.id: r.message for r in report.results if not r.passed}


def pytest_run(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m pytest ARGS` as a student runs it, with this checkout's grader."""
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


# ---- 1. the student's own package imported inside a function ----


def imports_inside_functions(dest: Path) -> Path:
    """micrograd: `import micrograd` in a rule; needle: `from .autograd import Tensor` in a
    gradient (both run normally with the package installed)."""
    engine = copy("micrograd", dest / "micrograd") / "engine.py"
    patch(
        engine,
        "            self.grad += other.data * out.grad",
        "            import micrograd\n\n            assert micrograd.Value is Value\n"
        "            self.grad += other.data * out.grad",
    )
    ops = copy("needle", dest / "needle") / "ops.py"
    text = ops.read_text()
    start = text.index("class EWiseMul")
    at = text.index("        lhs, rhs = node.inputs\n", start)
    ops.write_text(text[:at] + "        from .autograd import Tensor\n\n        assert Tensor\n" + text[at:])
    return dest


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_imports_of_the_own_package_inside_functions_work_in_grading(tmp_path, oracle, sandbox):
    sub = imports_inside_functions(tmp_path / "sub")
    report = grade(sub, "public", ("micrograd", "needle"), oracle=oracle, sandbox=sandbox, keep=few)
    assert full(report), failing(report)


def test_imports_of_the_own_package_inside_functions_work_in_pytest(tmp_path):
    sub = imports_inside_functions(tmp_path / "sub")
    done = pytest_run(
        "tests/public/micrograd/test_composite.py",
        "tests/public/needle/test_composite.py",
        f"--impl={sub}",
        "-q",
        "-p",
        "no:cacheprovider",
    )
    assert done.returncode == 0, done.stdout[-3000:]


# ---- 2. torch: importing costs nothing, computing with it costs the cases that did ----


def torch_helper(dest: Path, called: bool) -> Path:
    """A helper that imports torch; with `called`, mul's rule computes its gradient with it."""
    package = copy("micrograd", dest / "micrograd")
    (package / "checks.py").write_text(
        "import torch\n\n\ndef torch_grad(a, b):\n"
        "    x = torch.tensor(a, requires_grad=True)\n    (x * b).backward()\n    return float(x.grad)\n"
    )
    if called:
        patch(
            package / "engine.py",
            "            self.grad += other.data * out.grad",
            "            from micrograd.checks import torch_grad\n\n"
            "            self.grad += torch_grad(self.data, other.data) * out.grad",
        )
    return dest


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_an_unused_torch_import_costs_nothing(tmp_path, oracle, sandbox):
    report = grade(
        torch_helper(tmp_path, called=False),
        "public",
        ("micrograd",),
        oracle=oracle,
        sandbox=sandbox,
        keep=few,
    )
    assert full(report), failing(report)
    assert not report.errors


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_gradients_from_torch_cost_the_cases_that_used_it(tmp_path, oracle, sandbox):
    report = grade(
        torch_helper(tmp_path, called=True),
        "public",
        ("micrograd",),
        oracle=oracle,
        sandbox=sandbox,
        keep=few,
    )
    used = [r for r in report.results if not r.passed]
    assert used and any(r.passed for r in report.results)
    for r in used:
        assert r.status is Status.ERROR
        assert "uses torch to compute gradients (torch.tensor called at checks.py line 5, in torch_grad)" in (
            r.message
        ), r.message


def test_local_pytest_applies_the_same_rule(tmp_path):
    sub = torch_helper(tmp_path / "sub", called=True)
    done = pytest_run(
        "tests/public/micrograd/test_composite.py", f"--impl={sub}", "-q", "-p", "no:cacheprovider"
    )
    assert done.returncode == 1 and "uses torch to compute gradients" in done.stdout, done.stdout[-3000:]
