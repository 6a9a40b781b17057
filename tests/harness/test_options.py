"""Defects a new user hits: imports inside functions, torch, an installed grader, pytest run
from a student's folder, options checked before grading, printed output, pytest's options.

Submissions are built in tmp_path from reference/ copies.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from grader.case.define import Case
from grader.report.model import Report, Status
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "reference"
MODULES = {"micrograd": {"test_composite", "test_detach"}, "needle": {"test_composite", "test_detach"}}


def few(case: Case) -> bool:
    """A few cases: composite ones, and forward ones that run no gradient rule."""
    forward = case.module == "test_ops" and case.name == "forward" and case.param_id in ("add", "mul", "tanh")
    return case.module in MODULES[case.assignment] or forward


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
def installed(tmp_path_factory, wheel_file) -> Path:
    """The grader as a non-editable `pip install .` puts it: the kit's wheel installed into a
    target directory (beside the environment's own packages)."""
    target = tmp_path_factory.mktemp("installed")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-deps", "--target", target, wheel_file], check=True)
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
        (
            ["--feedback", "{tmp}/afile/feedback.md"],
            "--feedback {tmp}/afile/feedback.md: {tmp}/afile is not a directory",
        ),
        (["--results", "{tmp}"], "is a directory"),
        (["--suites", "{tmp}"], "no graded suites in {tmp}"),
        (["--timeout", "abc"], "argument --timeout: invalid float value: 'abc'"),
    ],
)
def test_options_are_checked_before_grading(tmp_path, capsys, monkeypatch, args, words):
    from grader import cli

    monkeypatch.setattr(cli, "grade_submission", lambda *a, **k: pytest.fail("graded"))
    (tmp_path / "afile").write_text("")
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


# ---- 4, 6, 8: pytest as a student runs it ----


def chatty(dest: Path, broken: bool) -> Path:
    """micrograd whose add rule prints; with `broken`, mul's rule forgets out.grad."""
    engine = copy("micrograd", dest / "micrograd") / "engine.py"
    patch(
        engine,
        "            self.grad += out.grad\n",
        "            print('hello from add')\n            self.grad += out.grad\n",
    )
    if broken:
        patch(engine, "            self.grad += other.data * out.grad", "            self.grad += other.data")
    return dest


COMPOSITE = str(REPO / "tests" / "public" / "micrograd" / "test_composite.py")


def test_pytest_from_a_students_folder_grades_that_folder(tmp_path):
    student = chatty(tmp_path / "student", broken=True)
    (student / "micrograd" / "__init__.py").unlink()
    done = pytest_run(COMPOSITE, "-p", "no:cacheprovider", cwd=student)
    out = done.stdout
    assert done.returncode == 1, out[-3000:]
    assert f"grader: grading {student} (micrograd: micrograd/ (no __init__.py))" in out.splitlines()[:6], out[
        :2000
    ]
    [score] = [line for line in out.splitlines() if line.startswith("Score:")]
    assert score.endswith(f"points for {student}") and not score.startswith("Score: 9/9"), score


def test_printed_output_is_shown_on_failure_and_with_s(tmp_path):
    broken = chatty(tmp_path / "broken", broken=True)
    done = pytest_run(COMPOSITE, f"--impl={broken}", "-p", "no:cacheprovider")
    assert done.returncode == 1
    assert "Captured stdout call" in done.stdout and "hello from add" in done.stdout, done.stdout[-3000:]
    right = chatty(tmp_path / "right", broken=False)
    quiet = pytest_run(COMPOSITE, f"--impl={right}", "-p", "no:cacheprovider")
    assert quiet.returncode == 0 and "hello from add" not in quiet.stdout
    loud = pytest_run(COMPOSITE, f"--impl={right}", "-p", "no:cacheprovider", "-s")
    assert loud.returncode == 0 and "hello from add" in loud.stdout, loud.stdout[-3000:]


def test_a_students_run_selects_the_graded_suites_only(tmp_path):
    sub = copy("micrograd", tmp_path / "sub" / "micrograd").parent
    done = pytest_run(f"--impl={sub}", "--co", "-q", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout[-3000:]
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith("tests/public/") for line in collected), collected[:5]
    # no test paths named, as above, but no --impl: the grader's own tests are collected too
    # (testpaths narrowed to one of them beside the graded suites: collecting every test
    # module of the kit imports Jupyter, PyTorch and the rest for 8 s)
    narrowed = "testpaths=tests/harness/test_report.py tests/public"
    everything = pytest_run("--co", "-q", "-p", "no:cacheprovider", "-o", narrowed)
    assert everything.returncode == 0, everything.stdout[-3000:]
    listed = everything.stdout.splitlines()
    assert any(line.startswith("tests/harness/test_report.py::") for line in listed), listed[:5]
    assert any(line.startswith("tests/public/") for line in listed)


def test_each_case_is_one_test_rerun_by_its_classroom_command_and_chosen_with_m():
    """Every graded case is collected once, under the node id Classroom's feedback tells a
    student to rerun it by; that command runs it alone; its markers select it with `-m`."""
    from grader.case.define import collect
    from grader.classroom import locations

    cases = collect(REPO / "tests", ["micrograd"], ["public", "hidden"])
    _, rerun = locations(cases, REPO)
    nodes = {case_id: shlex.split(command)[-1] for case_id, command in rerun.items()}
    listed = pytest_run("tests/public/micrograd", "tests/hidden/micrograd", "--suite=all", "--co", "-q")
    assert listed.returncode == 0, listed.stdout[-3000:]
    collected = [line for line in listed.stdout.splitlines() if "::" in line]
    graded = Counter(line for line in collected if "search" not in line)
    assert graded == Counter(nodes.values())
    one = next(case for case in cases if case.param_id is not None and case.suite == "public")
    alone = pytest_run(nodes[one.id], "-p", "no:cacheprovider")
    assert alone.returncode == 0 and "1 passed" in alone.stdout, alone.stdout[-3000:]
    hidden = pytest_run("tests/hidden/micrograd", "--suite=all", "--co", "-q", "-m", "hidden and topic")
    chosen = [line for line in hidden.stdout.splitlines() if "::" in line]
    wanted = Counter(nodes[case.id] for case in cases if case.suite == "hidden")
    assert Counter(chosen) == wanted, hidden.stdout[-2000:]


def test_last_failed_reruns_the_failures_and_the_cache_stays_outside_the_submission(tmp_path):
    sub = chatty(tmp_path / "sub", broken=True)
    cache = ["-o", f"cache_dir={tmp_path / 'cache'}"]
    first = pytest_run(COMPOSITE, f"--impl={sub}", *cache)
    failed = int(first.stdout.split(" failed")[0].split()[-1])
    again = pytest_run(COMPOSITE, f"--impl={sub}", "--lf", *cache)
    assert f"run-last-failure: rerun previous {failed} failure" in again.stdout, again.stdout[-3000:]
    counts = [line for line in again.stdout.splitlines() if re.search(r" in [\d.]+s\b", line)][-1]
    assert f"{failed} failed" in counts and " passed" not in counts  # the score section comes after
    assert (tmp_path / "cache").is_dir() and not list(sub.rglob(".pytest_cache"))
    first_failed = pytest_run(COMPOSITE, f"--impl={sub}", "--ff", *cache)
    assert "run-last-failure: rerun previous" in first_failed.stdout


def test_the_score_table_survives_xdist(tmp_path):
    sub = chatty(tmp_path / "sub", broken=True)
    one = pytest_run(COMPOSITE, f"--impl={sub}", "-p", "no:cacheprovider")
    two = pytest_run(COMPOSITE, f"--impl={sub}", "-p", "no:cacheprovider", "-n", "2")
    assert "2 workers" in two.stdout, two.stdout[-3000:]

    def table(out: str) -> list[str]:
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if " score " in line)
        return lines[start : next(i for i, line in enumerate(lines) if line.startswith("Score:")) + 1]

    assert table(two.stdout) == table(one.stdout)


def test_impl_with_a_space_works_with_the_installed_plugin(installed, tmp_path):
    """`--impl DIR` (space) for a DIR outside the project: the plugin, installed as pytest11
    entry point, knows the option before pytest looks for the project's root."""
    sub = copy("micrograd", tmp_path / "sub" / "micrograd").parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(installed)

    def run(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]
        return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)

    listed = run("--impl", str(sub), "--co", "-q")
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    collected = [line for line in listed.stdout.splitlines() if "::" in line]
    assert collected and all(line.startswith("tests/public/") for line in collected), collected[:3]
    graded = run("--impl", str(sub), "tests/public/micrograd/test_composite.py")
    assert graded.returncode == 0, graded.stdout[-3000:]
    assert f"grader: grading {sub} (micrograd: micrograd/)" in graded.stdout
    assert f"points for {sub}" in graded.stdout


def test_pytest_grades_a_zip_and_names_a_missing_optional_import(tmp_path):
    package = copy("micrograd", tmp_path / "src" / "hw1" / "micrograd")
    engine = package / "engine.py"
    engine.write_text("from beartype import beartype  # noqa\n" + engine.read_text())
    archive = shutil.make_archive(str(tmp_path / "sub"), "zip", tmp_path / "src")
    done = pytest_run(COMPOSITE, f"--impl={archive}", "-p", "no:cacheprovider")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "micrograd: hw1/micrograd/" in done.stdout
    notes = [line for line in done.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "micrograd imports beartype, which is not installed" in notes[0], notes


def test_pytest_says_a_missing_impl_is_missing(tmp_path):
    done = pytest_run(f"--impl={tmp_path / 'nowhere'}", "-p", "no:cacheprovider")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"--impl {tmp_path / 'nowhere'}: no such file or directory" in done.stderr


def test_pytest_with_no_arguments_from_a_submission_inside_the_kit_runs_the_suites(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(REPO / name, kit / name)
    (kit / "tests" / "public" / "micrograd").mkdir(parents=True)
    shutil.copy(COMPOSITE, kit / "tests" / "public" / "micrograd")
    (kit / "tests" / "harness").mkdir()
    (kit / "tests" / "harness" / "test_never.py").write_text("def test_never():\n    assert False\n")
    mine = copy("micrograd", kit / "mine" / "micrograd").parent
    done = pytest_run("-p", "no:cacheprovider", cwd=mine)
    assert done.returncode == 0, done.stdout[-3000:]
    assert f"grader: grading {mine} (micrograd: micrograd/)" in done.stdout
    cases = Path(COMPOSITE).read_text().count("@case(")
    assert f"points for {mine}" in done.stdout and f"{cases} passed" in done.stdout


# ---- options declared once, one oracle from them, one error for a user's mistake ----

#: the modules that build `python -m grader`'s parser
PARSER_MODULES = ("grader/cli.py", "grader/classgrade/cli.py", "grader/options.py")
#: options two commands each declare because they mean different things there
HOMONYMS = {"--jobs": "check: mutants graded at once; grade-class: submissions at once (0: every core)"}


def declared_options() -> Counter:
    found: Counter = Counter()
    for name in PARSER_MODULES:
        for node in ast.walk(ast.parse((REPO / name).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and str(first.value).startswith("--"):
                    found[first.value] += 1
    return found


def test_every_option_is_declared_once():
    declared = declared_options()
    assert {"--cache-dir", "--assignment", "--timeout", "--suites", "--only-cases"} <= set(declared)
    twice = {option: count for option, count in declared.items() if count > 1 and option not in HOMONYMS}
    assert not twice, f"declared more than once (use a group of grader.options): {twice}"


COMMANDS = {
    "grade": ["grade", "{tmp}"],
    "grade-class": ["grade-class", "{tmp}"],
    "gradescope": ["gradescope", "{tmp}/autograder.zip"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "args, words",
    [
        (["--timeout", "0"], "--timeout 0: must be more than 0 seconds"),
        (["--budget", "-1"], "--budget -1: must be more than 0 seconds"),
        (["--memory", "100"], "--memory 100: must be at least 256 MiB"),
        (["--suites", "{tmp}"], "no graded suites in {tmp}"),
        (["--memory", "lots"], "argument --memory: invalid int value: 'lots'"),
        (["--hidden-visibility", "never"], "argument --hidden-visibility: invalid choice: 'never'"),
    ],
)
def test_every_grading_command_checks_its_options_alike(tmp_path, capsys, monkeypatch, command, args, words):
    """The same mistake, the same one line and exit 2, before anything is graded or built."""
    from grader import cli
    from grader.authoring import gradescope_zip
    from grader.classgrade import layout

    monkeypatch.setattr(cli, "grade_submission", lambda *a, **k: pytest.fail("graded"))
    monkeypatch.setattr(layout, "discover", lambda *a, **k: pytest.fail("graded"))
    monkeypatch.setattr(gradescope_zip, "build", lambda *a, **k: pytest.fail("built"))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in [*COMMANDS[command], *args]]
    try:
        status = cli.main(argv)
    except SystemExit as exc:  # argparse's own checks
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1, err
    assert words.replace("{tmp}", str(tmp_path)) in err, err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["release", "{tmp}/notes.txt"], "{tmp}/notes.txt: not a directory"),
        (["release", "{tmp}/notes.txt/bundle"], "{tmp}/notes.txt/bundle: {tmp}/notes.txt is not a directory"),
        (["gradescope", "{tmp}/folder.zip"], "{tmp}/folder.zip: is a directory"),
        (["gradescope", "{tmp}/notes.txt/a.zip"], "{tmp}/notes.txt/a.zip: {tmp}/notes.txt is not a"),
        (["autograde", "--root", "{tmp}/nowhere"], "{tmp}/nowhere: no such autograder folder"),
        (["autograde", "--root", "{tmp}/notes.txt"], "{tmp}/notes.txt: no such autograder folder"),
    ],
)
def test_every_command_checks_where_it_writes_before_working(tmp_path, capsys, monkeypatch, argv, words):
    """A place that cannot be written is one line and exit 2 before the bundle or the zip is
    built (a minute's work), and an autograder root that is not there gets nothing written."""
    from grader import autograder, cli
    from grader.authoring import gradescope_zip, release

    monkeypatch.setattr(release, "release", lambda *a, **k: pytest.fail("released"))
    monkeypatch.setattr(gradescope_zip, "build", lambda *a, **k: pytest.fail("built"))
    monkeypatch.setattr(autograder, "main", lambda *a, **k: pytest.fail("graded"))
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "folder.zip").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"grader: error: {words.replace('{tmp}', str(tmp_path))}"), err
    assert len(err.strip().splitlines()) == 1, err
    assert sorted(tmp_path.rglob("*")) == before


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tables(path: Path) -> list[str]:
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as db:
        return sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


@pytest.mark.parametrize(
    "args, words",
    [
        (["--out", "{tmp}/notes.txt"], "--out {tmp}/notes.txt: not a directory"),
        (["--out", "{tmp}/notes.txt/grades"], "--out {tmp}/notes.txt/grades: {tmp}/notes.txt is not a"),
        (["--gradebook", "{tmp}"], "gradebook {tmp}: is a directory"),
        (["--gradebook", "{tmp}/notes.txt"], "gradebook {tmp}/notes.txt: cannot use it (file is not a"),
        (["--gradebook", "{tmp}/notes.txt/g.db"], "--gradebook {tmp}/notes.txt/g.db: {tmp}/notes.txt is"),
        (
            ["--gradebook", "{tmp}/course.db"],
            "gradebook {tmp}/course.db: another program's database (its tables: grade, student)",
        ),
        (["--dask", "nowhere"], "--dask nowhere: cannot reach the scheduler"),
        (["--dask", "tcp://127.0.0.1:{port}"], "--dask tcp://127.0.0.1:{port}: cannot reach the scheduler"),
    ],
)
def test_grade_class_checks_where_it_writes_and_runs_first(tmp_path, capsys, monkeypatch, args, words):
    """An output folder or gradebook that cannot be written, or a Dask scheduler that cannot be
    reached, is one line and exit 2 before any submission is read; another program's SQLite
    database given as the gradebook (say nbgrader's) is refused and left as it was."""
    import sqlite3

    import dask
    import distributed  # noqa: F401 (its config defaults, set before the test changes one)

    from grader import cli
    from grader.classgrade import layout

    monkeypatch.setattr(layout, "discover", lambda *a, **k: pytest.fail("graded"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a database\n")
    with contextlib.closing(sqlite3.connect(tmp_path / "course.db")) as db:
        db.executescript("CREATE TABLE student (id TEXT); CREATE TABLE grade (score REAL);")
    port = str(_closed_port())
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{port}", port) for a in args]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        status = cli.main(["grade-class", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1, err
    assert words.replace("{tmp}", str(tmp_path)).replace("{port}", port) in err, err
    assert _tables(tmp_path / "course.db") == ["grade", "student"]
    assert not (tmp_path / "class-grades").exists()


def test_merge_refuses_what_is_not_a_gradebook_before_writing(tmp_path, capsys):
    """Every shard is checked before the merged gradebook is made; a shard that is another
    program's database, or no database, is named in one line and left as it was."""
    import sqlite3

    from grader import cli
    from grader.classgrade.gradebook import Gradebook

    (tmp_path / "notes.txt").write_text("not a database\n")
    with contextlib.closing(sqlite3.connect(tmp_path / "course.db")) as db:
        db.executescript("CREATE TABLE student (id TEXT);")
    out = tmp_path / "merged.db"
    for shard, words in [
        ("nowhere.db", "nowhere.db: no such gradebook"),
        ("notes.txt", "notes.txt: cannot use it (file is not a database)"),
        ("course.db", "course.db: another program's database (its tables: student)"),
    ]:
        assert cli.main(["merge", str(out), str(tmp_path / shard)]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and words in err, err
        assert not out.exists()
    assert _tables(tmp_path / "course.db") == ["student"]
    Gradebook(tmp_path / "shard.db").close()  # an empty gradebook: merged into course.db, refused
    assert cli.main(["merge", str(tmp_path / "course.db"), str(tmp_path / "shard.db")]) == 2
    assert "another program's database" in capsys.readouterr().err
    assert _tables(tmp_path / "course.db") == ["student"]


@pytest.mark.parametrize("command", ["grade", "grade-class", "gradescope", "check"])
def test_the_oracle_is_built_from_the_options_alike(tmp_path, monkeypatch, command):
    """--cache-dir, else $GRADER_CACHE; --no-cache: none (PyTorch runs every case)."""
    from grader import cli, options

    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "environment"))
    before = {"gradescope": ["gradescope", "out.zip"], "check": ["check"]}.get(command, [command, "sub"])
    parse = cli.build_parser().parse_args
    assert options.oracle_of(parse(before)).cache_dir == tmp_path / "environment"
    given = parse([*before, "--cache-dir", str(tmp_path / "given")])
    assert options.oracle_of(given).cache_dir == tmp_path / "given"
    assert options.oracle_of(parse([*before, "--no-cache"])).cache_dir is None


def test_no_front_end_builds_the_oracle_from_a_cache_folder_itself():
    """`oracle_from` is the one place that turns the cache options into an oracle: no other
    module calls `Oracle(...)` with a cache folder (an oracle without one, `Oracle(None)`,
    is a frozen or in-memory oracle)."""
    builders = []
    for path in sorted((REPO / "grader").rglob("*.py")):
        if path == REPO / "grader" / "verdict" / "oracle.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Oracle":
                if node.args and not (isinstance(node.args[0], ast.Constant) and node.args[0].value is None):
                    builders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not builders, f"use grader.verdict.oracle.oracle_from: {builders}"


@pytest.mark.parametrize("error", ["MissingEntry", "OperationalError", "another"])
def test_a_course_without_the_assignment_is_the_users_mistake(tmp_path, monkeypatch, error):
    """nbgrader's own exceptions, caught by their classes: one line for the CLI (exit 2);
    any other failure stays the grader's own."""
    from grader.authoring import nbgrader_io
    from grader.authoring.jupyter import import_nbgrader
    from grader.classgrade.nbgrader import CourseGrades
    from grader.options import UserError

    import_nbgrader()
    from nbgrader.api import MissingEntry
    from sqlalchemy.exc import OperationalError

    raised = {
        "MissingEntry": MissingEntry("No such assignment: micrograd"),
        "OperationalError": OperationalError("SELECT ...\nFROM grade_cell", {}, Exception("no such table")),
        "another": RuntimeError("disk on fire"),
    }[error]

    def fail(*args: object) -> None:
        raise raised

    monkeypatch.setattr(nbgrader_io, "GradeWriter", fail)
    submitted = tmp_path / "submitted" / "s1" / "micrograd"
    submitted.mkdir(parents=True)
    (submitted / "micrograd.ipynb").write_text("{}")
    if error == "another":
        with pytest.raises(RuntimeError, match="disk on fire"):
            CourseGrades(tmp_path, "micrograd").finish({"s1": Report("s1")})
        return
    with pytest.raises(UserError) as caught:
        CourseGrades(tmp_path, "micrograd").add("s1", Report("s1"))
    message = str(caught.value)
    assert "\n" not in message and "does not know micrograd's grade cells" in message, message
    assert "nbgrader generate_assignment micrograd" in message


def test_a_run_stopped_early_says_its_score_counts_only_what_ran():
    """`-x` stops at the first failure: the score counts that one test, and says so, where
    "Score: 0/1" alone reads as the student's grade. A run that ends says nothing of it."""
    stopped = pytest_run(COMPOSITE, "--impl", str(REPO / "student_template"), "-x", "-p", "no:cacheprovider")
    whole = pytest_run(COMPOSITE, "--impl", str(REPO / "student_template"), "-p", "no:cacheprovider")
    collected = int(re.search(r"collected (\d+) item", whole.stdout).group(1))
    assert (
        f"the run stopped early (-x, --maxfail or Ctrl-C): 1 of the {collected} graded tests ran"
        in stopped.stdout
    )
    assert "stopped early" not in whole.stdout and "Score:" in whole.stdout
