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


# ---- 3. an installed grader ----


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The grader as a non-editable `pip install .` puts it: a wheel installed into a target
    directory (beside the environment's own packages)."""
    wheels, target = tmp_path_factory.mktemp("wheels"), tmp_path_factory.mktemp("installed")
    build = tmp_path_factory.mktemp("build") / "src"
    shutil.copytree(REPO, build, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, build], check=True)
    [wheel] = wheels.glob("*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--target", target, wheel], check=True)
    return target


def run_installed(target: Path, *args: str, cwd: Path, env: dict[str, str] | None = None):
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_SUITES")}
    environment.update(PYTHONPATH=str(target), **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_an_installed_grader_says_the_suites_are_missing(installed, tmp_path):
    sub = copy("micrograd", tmp_path / "sub" / "micrograd").parent
    done = run_installed(installed, "grade", str(sub), "--in-process", cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert "no graded suites in" in line and "--suites" in line and "GRADER_SUITES" in line


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_installed_grader_grades_with_the_suites_pointed_at(installed, tmp_path, how):
    sub = copy("micrograd", tmp_path / "sub" / "micrograd").parent
    suites = tmp_path / "suites"
    shutil.copytree(
        REPO / "tests" / "public" / "micrograd",
        suites / "public" / "micrograd",
        ignore=shutil.ignore_patterns("__pycache__", "test_random.py", "test_ops.py", "test_deep.py"),
    )
    args = ["--suites", str(suites)] if how == "option" else []
    env = {"GRADER_SUITES": str(suites)} if how == "environment" else {}
    cache = ["--cache-dir", str(tmp_path / "cache")]
    done = run_installed(
        installed,
        "grade",
        str(sub),
        "--suite",
        "public",
        "--assignment",
        "micrograd",
        *cache,
        *args,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    score = [line for line in done.stdout.splitlines() if line.startswith("Score:")]
    assert score and score[0].split()[1].split("/")[0] == score[0].split()[1].split("/")[1] != "0", score


def test_an_installed_demo_does_not_crash(installed, tmp_path):
    done = run_installed(installed, "demo", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout
    assert "the demo needs the kit's checkout" in done.stdout + done.stderr


# ---- 5. options and output paths checked before grading ----


@pytest.mark.parametrize(
    "args, words",
    [
        (["--timeout", "0"], "--timeout 0: must be more than 0 seconds"),
        (["--budget", "-1"], "--budget -1: must be more than 0 seconds"),
        (["--memory", "100"], "--memory 100: must be at least 256 MiB"),
        (["--memory", "0"], "--memory 0: must be at least 256 MiB"),
        (["--results", "/proc/results.json"], "--results /proc/results.json: cannot write there"),
        (["--feedback", "{tmp}/no/such/dir/feedback.md"], "the directory {tmp}/no/such/dir does not exist"),
        (["--results", "{tmp}"], "is a directory"),
        (["--suites", "{tmp}"], "no graded suites in {tmp}"),
        (["--timeout", "abc"], "argument --timeout: invalid float value: 'abc'"),
    ],
)
def test_options_are_checked_before_grading(tmp_path, capsys, monkeypatch, args, words):
    from grader import cli

    monkeypatch.setattr(cli, "grade_submission", lambda *a, **k: pytest.fail("graded"))
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    try:
        status = cli.main(["grade", str(REFERENCE), *args])
    except SystemExit as exc:  # argparse's own checks
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1, err
    assert words.replace("{tmp}", str(tmp_path)) in err, err


def test_a_missing_submission_path_is_an_error(tmp_path, capsys):
    from grader import cli

    assert cli.main(["grade", str(tmp_path / "nowhere")]) == 2
    assert (
        capsys.readouterr().err.strip() == f"grader: error: {tmp_path / 'nowhere'}: no such file or directory"
    )


def test_version(capsys):
    from grader import __version__, cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"grader {__version__}"
