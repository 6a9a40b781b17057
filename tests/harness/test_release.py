"""The student bundle: what `python -m grader release` writes, and the leak check that guards
it; the students' loop in a fresh virtual environment inside the bundle (the README's two
commands); and GitHub Classroom's workflow and grading command, whose output is checked
against a schema of Classroom's grader-output format."""

from __future__ import annotations

import ast
import base64
import builtins
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest
import yaml

from grader.authoring.leaks import forbidden_files
from grader.authoring.release import grader_files, release, search_programs, search_runs
from grader.case.define import collect
from grader.cli import main as cli
from grader.pipeline import InProcessRunner, grade
from grader.verdict import cache
from grader.verdict.oracle import Oracle
from tests.harness import reporter
from tests.harness.bundle import plain_env, readme_commands

REPO = Path(__file__).resolve().parents[2]
NAMES = ("micrograd", "needle")
#: Classroom's grader-output format, as its reporter reads it
GRADER_OUTPUT = json.loads(Path(__file__).with_name("classroom_result.schema.json").read_text())


def public_cases(suites: Path = REPO / "tests") -> list:
    return collect(suites, NAMES, ("public",))


# ---- the release and its leak check ----


@pytest.fixture(scope="module")
def bundle(released_bundle, tmp_path_factory) -> Path:
    """The session's bundle, copied: this module's students install into it."""
    assert released_bundle.stat().st_mode & 0o777 == 0o755  # readable by whoever it is handed to
    out = tmp_path_factory.mktemp("student") / "autodiff"
    shutil.copytree(released_bundle, out)
    return out


def test_the_bundle_holds_what_a_student_needs_and_nothing_else(bundle):
    files = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    for name in NAMES:
        template = REPO / "student_template" / name
        for path in template.rglob("*.py"):
            assert (bundle / name / path.relative_to(template)).read_bytes() == path.read_bytes()
        suite = REPO / "tests" / "public" / name
        assert {p.name for p in (bundle / "tests" / "public" / name).iterdir()} == {
            p.name for p in suite.glob("*.py")
        }
    for needed in (
        "README.md",
        "requirements.txt",
        "pytest.ini",
        "conftest.py",
        "docs/students.md",
        ".github/workflows/classroom.yml",
        "grader/plugin.py",
        "grader/classroom.py",
        "grader/verdict/oracle.py",
    ):
        assert needed in files, needed
    assert not any(
        f.startswith(("reference/", "tests/hidden/", "tests/harness/", "student_template/")) for f in files
    )
    assert not any(f.startswith(("grader/authoring/", "grader/cli.py", "grader/notebook.py")) for f in files)
    assert forbidden_files(bundle) == []


#: what students never hold: the page they read must not send them looking for it
NOT_IN_THE_BUNDLE = (
    "reference/",
    "student_template",
    "tests/hidden",
    "tests/harness",
    "assignments/",
    ".ipynb",
    "nbgrader",
    "scope",
    "python -m grader ",
    "scripts/",
    "bench/",
    "examples/",
)


def test_the_students_pages_speak_only_of_what_the_bundle_holds(bundle):
    """docs/students.md is the bundle's page: every path its list of the repository names is
    in the bundle, and it names nothing that only the kit has; nor does the bundle's README."""
    page = (bundle / "docs" / "students.md").read_text()
    assert page == (REPO / "docs" / "students.md").read_text()
    for name in ("docs/students.md", "README.md"):
        text = (bundle / name).read_text().lower()
        assert [word for word in NOT_IN_THE_BUNDLE if word in text] == [], name
    holds = page.split("Your repository holds:")[1].split("\n## ")[0]
    listed = [
        path
        for row in holds.splitlines()
        if row.startswith("| `")
        for path in re.findall(r"`([^`]+)`", row.split(" | ")[0])
    ]
    assert len(listed) >= 8, listed
    assert [path for path in listed if not (bundle / path).exists()] == []


def test_the_grader_it_ships_is_the_closure_of_what_students_run():
    shipped = {p.relative_to(REPO / "grader").as_posix() for p in grader_files(REPO / "grader", NAMES)}
    assert {
        "plugin.py",
        "classroom.py",
        "pipeline.py",
        "case/worker.py",
        "assignments/needle/oracle.py",
    } <= shipped
    assert not any(f.startswith(("authoring/", "report/gradescope", "report/draw")) for f in shipped)
    narrow = {p.relative_to(REPO / "grader").as_posix() for p in grader_files(REPO / "grader", ["micrograd"])}
    assert not any(f.startswith("assignments/needle/") for f in narrow)


def test_requirements_are_pinned_to_what_the_kit_declares(bundle):
    lines = [
        line for line in (bundle / "requirements.txt").read_text().splitlines() if not line.startswith("#")
    ]
    assert all("==" in line for line in lines), lines
    names = {re.split(r"[=;]", line)[0].strip().lower() for line in lines}
    assert {"numpy", "pytest", "rich", "hypothesis", "pytest-timeout"} <= names
    assert "torch" not in names  # the answers are shipped
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    kit = {re.split(r"[<>=!~;\[ ]", d)[0].lower() for d in declared}
    assert names <= kit


def test_the_answers_are_every_public_cases_run_stamped_with_its_suite(bundle):
    from grader.verdict.oracle import FORMAT, file_digest

    for name in NAMES:
        answers = json.loads((bundle / "grader" / "answers" / f"{name}.json").read_text())
        assert answers["format"] == FORMAT
        cases = collect(REPO / "tests", [name], ("public",))
        assert {c.id for c in cases} <= set(answers["runs"])
        searched = {i for i in answers["runs"] if i.startswith(f"{name}/hypothesis::")}
        suite = bundle / "tests" / "public" / name
        assert searched and searched == search_programs(suite)  # the programs the search tries first
        assert answers["files"] == {
            f"public/{name}/{p.name}": file_digest(p) for p in suite.glob("test_*.py")
        }
        run = answers["runs"][cases[-1].id]
        assert run["results"] and "detail" not in run  # read at every run: the values only
        details = json.loads((bundle / "grader" / "answers" / f"{name}.detail.json").read_text())
        assert set(details) == set(answers["runs"])  # what a diagnosis reads, read when one does
        tapes = [json.loads(text)["tape"] for text in details.values()]
        assert all(tape is not None for tape in tapes) and any(tapes)


def test_a_release_ships_only_the_searches_fixed_programs(tmp_path, bundle, oracle_cache):
    """The oracle cache's search file also keeps what other runs' searches drew and shrank
    (a buggy submission's): a release ships the runs of its fixed programs only, so that it
    is the same whatever ran before it."""
    seed = tmp_path / "seed"
    seed.mkdir()
    drawn = "micrograd/hypothesis::random_program[drawn-by-another-run]"
    for version in cache.versions(oracle_cache):
        if version.assignment == "micrograd" and version.suite == "search":
            data = json.loads(version.path.read_text())
            data["runs"][drawn] = next(iter(data["runs"].values()))
            data["seconds"][drawn] = 0.0
            (seed / version.path.name).write_text(json.dumps(data))
    runs = search_runs(bundle, REPO, ["micrograd"], seed)["micrograd"]["runs"]
    assert set(runs) == search_programs(bundle / "tests" / "public" / "micrograd")
    used = max(seed.glob("micrograd-search-*.json"), key=os.path.getmtime)
    assert drawn in json.loads(used.read_text())["runs"]  # the cache keeps what it held


def test_a_narrower_release_ships_one_assignment(tmp_path, bundle, oracle_cache):
    """...with the searches' runs of the run's first release, which it left in the oracle
    cache for the next release to start from."""
    assert {v.assignment for v in cache.versions(oracle_cache) if v.suite == "search"} >= set(NAMES)
    made = release(tmp_path / "micrograd-only", assignments=["micrograd"])
    assert made.leaks == []
    answers = [json.loads((b / "grader/answers/micrograd.json").read_text()) for b in (made.out, bundle)]
    assert answers[0]["runs"] == answers[1]["runs"]
    root = made.out
    assert (root / "micrograd").is_dir() and not (root / "needle").exists()
    assert not (root / "tests" / "public" / "needle").exists()
    assert not (root / "grader" / "assignments" / "needle").exists()
    assert "needle" not in (root / "README.md").read_text().split("## Tasks")[1]


@pytest.fixture
def kit_copy(tmp_path) -> Path:
    """The parts of the checkout a release reads, to plant leaks in."""
    kit = tmp_path / "kit"
    for part in ("reference", "student_template", "tests/public", "tests/hidden", "docs", "grader"):
        shutil.copytree(REPO / part, kit / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(REPO / "pyproject.toml", kit / "pyproject.toml")
    return kit


def test_a_leak_fails_the_release_and_writes_nothing(kit_copy, tmp_path):
    engine = kit_copy / "student_template" / "micrograd" / "engine.py"
    solution = "self.grad += other.data * out.grad"
    assert solution in (kit_copy / "reference" / "micrograd" / "engine.py").read_text()
    engine.write_text(engine.read_text() + f"\n# {solution}\n{solution}\n")
    suite = kit_copy / "tests" / "public" / "needle" / "test_ops.py"
    suite.write_text(suite.read_text() + "\n# see also test_hidden_shapes\n")
    (kit_copy / "tests" / "public" / "needle" / "needle-public-0123456789abcdef01234567.json").write_text(
        "{}"
    )
    out = tmp_path / "out"
    made = release(out, repo=kit_copy)
    kinds = {(leak.path, leak.kind) for leak in made.leaks}
    assert ("micrograd/engine.py", "solution line") in kinds
    assert ("tests/public/needle/test_ops.py", "hidden case name") in kinds
    assert ("tests/public/needle/needle-public-0123456789abcdef01234567.json", "forbidden file") in kinds
    assert not out.exists() and list(tmp_path.glob(".out-*")) == []


def renamed(source: str, function: str) -> str:
    """`function` of `source` as someone hiding it would copy it: every name it binds or
    reads renamed, its comments and docstring gone, the same algorithm."""
    tree = ast.parse(source)
    (node,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    node.body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    names = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - set(dir(builtins)))
    names += [a.arg for a in node.args.args]
    new = {name: f"v{i}" for i, name in enumerate(dict.fromkeys(names))}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in new:
            n.id = new[n.id]
        elif isinstance(n, ast.arg) and n.arg in new:
            n.arg = new[n.arg]
    node.name = "walk"
    return ast.unparse(node)


def test_a_renamed_solution_fails_the_release(kit_copy, tmp_path, capsys, monkeypatch):
    import grader.authoring.release as module

    walk = renamed((kit_copy / "reference" / "needle" / "autograd.py").read_text(), "find_topo_sort")
    assert "visited" not in walk and "topo_order" not in walk and "for" in walk  # renamed, whole
    planted = kit_copy / "grader" / "case" / "define.py"
    planted.write_text(planted.read_text() + "\n\n" + walk + "\n")
    made = release(tmp_path / "out", repo=kit_copy)
    assert [(leak.path, leak.kind) for leak in made.leaks] == [("grader/case/define.py", "solution shape")]
    # both engines sort with one idiom: the walk has the shape of either's solution
    assert re.search(r"\((find_topo_sort|backward)\)", str(made.leaks[0])), made.leaks[0]
    assert not (tmp_path / "out").exists()
    # the command's error: one line naming the file, then the count
    monkeypatch.setattr(module, "release", functools.partial(release, repo=kit_copy))
    assert cli(["release", str(tmp_path / "out")]) == 1
    first, *rest = capsys.readouterr().err.splitlines()
    assert first.startswith("grader/case/define.py: solution shape: line ")
    # the solution it is most like: find_topo_sort's, or micrograd's backward, the same walk
    assert re.search(r" is (needle/autograd|micrograd/engine)\.py:\d+ \(\w+\) renamed(, \+\d+ more)?$", first)
    assert rest == ["release failed: 1 leaks (listed above); nothing was written"]


def test_the_checkouts_path_in_a_file_is_a_leak(kit_copy, tmp_path):
    conftest = kit_copy / "grader" / "case" / "define.py"
    conftest.write_text(conftest.read_text() + f"\n# built from {kit_copy / 'reference'}\n")
    made = release(tmp_path / "out", repo=kit_copy)
    assert [(leak.path, leak.kind) for leak in made.leaks] == [("grader/case/define.py", "kit path")]


def test_the_command_exits_1_on_a_leak_and_2_on_a_mistake(tmp_path, capsys, monkeypatch):
    import grader.authoring.release as module

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    assert cli(["release", str(busy)]) == 2
    assert "is not an empty directory" in capsys.readouterr().err

    real = module.check_bundle
    monkeypatch.setattr(module, "check_bundle", lambda *args: [*real(*args), module.Leak("a", "b", "c")])
    assert cli(["release", str(tmp_path / "leaky")]) == 1
    err = capsys.readouterr().err
    assert "a: b: c" in err and "nothing was written" in err
    assert not (tmp_path / "leaky").exists()


# ---- the students' loop, in a fresh virtual environment inside the bundle ----


@dataclass
class StudentEnv:
    venv: Path
    env: dict[str, str]
    commands: list[str]
    install_seconds: float


@pytest.fixture(scope="module")
def student(bundle, tmp_path_factory) -> StudentEnv:
    venv = bundle / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # no system site-packages
    env = plain_env(venv, tmp_path_factory.mktemp("oracle-cache"))
    commands = readme_commands(bundle / "README.md")
    assert len(commands) == 2, commands
    started = time.perf_counter()
    done = subprocess.run(commands[0], shell=True, cwd=bundle, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"\nfresh venv: `{commands[0]}` took {seconds:.1f} s")
    return StudentEnv(venv, env, commands, seconds)


def test_the_fresh_environment_cannot_reach_the_kit(student, bundle):
    probe = (
        "import importlib.util, json, sys, grader;"
        "print(json.dumps([grader.__file__, sys.path, importlib.util.find_spec('torch') is None]))"
    )
    done = subprocess.run(
        ["python", "-c", probe], cwd=bundle, env=student.env, capture_output=True, text=True, check=True
    )
    where, path, no_torch = json.loads(done.stdout)
    assert Path(where).resolve() == bundle / "grader" / "__init__.py"
    base = Path(sys.base_prefix).resolve()
    for entry in filter(None, path):
        resolved = Path(entry).resolve()
        assert resolved.is_relative_to(bundle) or resolved.is_relative_to(base), entry
    assert not any(Path(entry).resolve().is_relative_to(REPO) for entry in filter(None, path))
    assert no_torch  # the requirements hold none: a student's run reads the shipped answers


def counts_line(output: str) -> str:
    """pytest's last line of counts (`=== 3 failed, 5 passed in 1.2s ===`)."""
    found = [line for line in output.splitlines() if re.match(r"^=+ .*\d+ \w+.* in [\d.]+s", line)]
    assert found, output[-2000:]
    return found[-1]


def failure_messages(output: str) -> list[tuple[str, str]]:
    """pytest's FAILURES section: each failed test's name and first line."""
    found, name = [], None
    for line in output.split("= FAILURES =", 1)[-1].split(" short test summary info ", 1)[0].splitlines():
        header = re.match(r"^_{3,} (\S+) _{3,}$", line)
        if header:
            name = header.group(1)
        elif name and line.strip():
            found.append((name, line.strip()))
            name = None
    return found


def test_the_untouched_template_scores_only_what_needs_no_gradient(student, bundle, oracle):
    done = subprocess.run(
        student.commands[1], shell=True, cwd=bundle, env=student.env, capture_output=True, text=True
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # some cases failed; pytest itself ran
    assert "Traceback" not in output
    cases = public_cases(bundle / "tests")
    expected = grade(REPO / "student_template", cases, oracle, InProcessRunner())
    assert expected.score < expected.max_score
    forward = [r for r in expected.results if r.topic == "forward"]
    assert forward and all(r.passed for r in forward)
    score = re.search(r"^Score: (\S+)/(\S+) points\b", output, re.M)
    assert score, output[-3000:]
    assert (float(score.group(1)), float(score.group(2))) == (expected.score, expected.max_score)
    # per task: every failure is a missing function, named, with its hint
    messages = failure_messages(output)
    counts = counts_line(done.stdout)
    failed = re.search(r"(\d+) failed", counts)
    assert failed and len(messages) == int(failed.group(1)), done.stdout[-2000:]
    assert len(messages) >= sum(not r.passed for r in expected.results)  # and ungraded searches
    assert all(m.startswith("not implemented yet: ") for _, m in messages), messages
    for name in ("Value.__mul__._backward", "Value.backward", "EWiseMul.gradient", "find_topo_sort"):
        assert any(name in m for _, m in messages), name
    for assignment in NAMES:
        assert re.search(rf"^  {assignment} / forward +\d+/\d+ +tests", output, re.M)
    # the run ends with its score: after pytest's short test summary and its counts
    lines = done.stdout.rstrip().splitlines()
    assert lines[-1].startswith("Score: ")
    summary, section = done.stdout.index(" short test summary info "), done.stdout.index(" score ")
    assert summary < done.stdout.index(counts) < section


def test_the_readmes_counts_are_what_pytest_collects(student, bundle):
    readme = (bundle / "README.md").read_text()
    tasks = readme.split("## Tasks", 1)[1].split("\n## ", 1)[0]
    rows = [
        line.split("|")
        for line in tasks.splitlines()
        if re.match(r"^\| \w+ \| .* \| \d+ \| [\d.]+ \|$", line)
    ]
    assert len(rows) > len(NAMES)
    listed = sum(int(row[4]) for row in rows)
    collected = student_pytest(student, bundle, "--collect-only", "-q")
    assert collected.returncode == 0, collected.stdout[-2000:]
    ids = [line for line in collected.stdout.splitlines() if "::" in line]
    assert listed == len(ids) and f"`python -m pytest` runs {len(ids)} tests" in tasks


def test_pytest_inside_a_package_says_where_to_run_it(student, bundle):
    done = subprocess.run(
        ["python", "-m", "pytest"], cwd=bundle / "micrograd", env=student.env, capture_output=True, text=True
    )
    assert done.returncode == 4  # pytest's usage error
    (line,) = (done.stdout + done.stderr).strip().splitlines()
    assert f"run pytest in {bundle}" in line and "cd .. && python -m pytest" in line


def student_pytest(student: StudentEnv, repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["python", "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=repo,
        env=student.env,
        capture_output=True,
        text=True,
    )


def with_reference(bundle: Path, tmp_path: Path, name: str) -> Path:
    """A copy of the bundle whose packages are the reference solutions."""
    repo = submission(bundle, tmp_path, name)
    for package in NAMES:
        shutil.rmtree(repo / package)
        shutil.copytree(
            REPO / "reference" / package, repo / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return repo


def test_a_students_run_needs_no_torch(student, bundle, tmp_path):
    repo = with_reference(bundle, tmp_path, "reference-pytest")
    done = student_pytest(student, repo, "-rs")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    total = sum(c.points for c in public_cases())
    assert re.search(rf"^Score: {total:g}/{total:g} points\b", done.stdout, re.M)
    counts = counts_line(done.stdout)
    assert "skipped" not in counts and "failed" not in counts, counts  # every search's program was answered


def test_a_changed_test_without_torch_is_skipped_saying_why(student, bundle, tmp_path):
    from grader.plugin import NEEDS_TORCH

    repo = with_reference(bundle, tmp_path, "changed")
    suite = repo / "tests" / "public" / "micrograd" / "test_ops.py"
    suite.write_text(suite.read_text() + "\n# the student's own note\n")
    answers = repo / "grader" / "answers" / "micrograd.json"
    shipped = json.loads(answers.read_text())
    searched = sorted(i for i in shipped["runs"] if i.startswith("micrograd/hypothesis::"))
    for case_id in searched[::2]:  # programs beyond those shipped
        del shipped["runs"][case_id]
    answers.write_text(json.dumps(shipped))
    done = student_pytest(
        student, repo, "-rs", "tests/public/micrograd/test_ops.py", "tests/public/micrograd/test_random.py"
    )
    output = done.stdout
    assert done.returncode == 0, output[-3000:]  # nothing failed
    changed = [c for c in public_cases() if c.module == "test_ops" and c.assignment == "micrograd"]
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    needs = [line for line in skips if "needs PyTorch: its test changed since the release" in line]
    assert len(needs) == len(changed), skips[:3]
    assert f"note: {NEEDS_TORCH}" in output
    search = [line for line in skips if "test_random.py" in line]
    assert len(search) == 1 and f"{(len(searched) + 1) // 2} of its programs were not checked" in search[0]
    random = sum(
        c.points for c in public_cases() if c.module == "test_random" and c.assignment == "micrograd"
    )
    assert re.search(
        rf"^Score: {random:g}/{random:g} points\b", output, re.M
    )  # the changed cases: not scored


# ---- GitHub Classroom ----


def workflow(bundle: Path) -> dict:
    return yaml.safe_load((bundle / ".github" / "workflows" / "classroom.yml").read_text())


def test_the_workflow_has_classrooms_form(bundle):
    flow = workflow(bundle)
    assert flow["on"] == ["push", "repository_dispatch"]
    assert flow["permissions"] == {"checks": "write", "actions": "read", "contents": "read"}
    (job,) = flow["jobs"].values()
    assert job["if"] == "github.actor != 'github-classroom[bot]'"
    steps = {step.get("id"): step for step in job["steps"]}
    grading = steps["autograd-tests"]
    assert grading["run"] == "python -m grader.classroom"
    reporter = job["steps"][-1]
    assert reporter["uses"] == "classroom-resources/autograding-grading-reporter@v1"
    # the runners the grading step names in $GITHUB_ENV, beside each one's <ID>_RESULTS
    assert reporter["with"] == {"runners": "${{ env.CLASSROOM_RUNNERS }}"}
    assert "env" not in reporter
    assert job["steps"].index(grading) < job["steps"].index(reporter)


def reporter_input(text: str, variables: dict[str, str]) -> str:
    """A workflow input as Actions evaluates it: `${{ env.NAME }}` is the variable."""
    return re.sub(r"\$\{\{\s*env\.(\w+)\s*\}\}", lambda m: variables[m[1]], text)


def classroom_result(student: StudentEnv, repo: Path, tmp_path: Path) -> dict:
    """Run the workflow's grading step in `repo` as Actions would, then read its runners'
    results as the reporter step does (`tests/harness/reporter.py`). Returns them as one
    document (every test, `max_score` summed), the runners' own under "runners"."""
    steps = workflow(repo)["jobs"]["run-autograding-tests"]["steps"]
    command = next(s for s in steps if s.get("id") == "autograd-tests")
    github_env = tmp_path / f"github-env-{repo.name}"
    env = {**student.env, "GITHUB_ENV": str(github_env)}
    done = subprocess.run(command["run"], shell=True, cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    variables = dict(line.split("=", 1) for line in github_env.read_text().splitlines())
    runners = reporter.results_of(reporter_input(steps[-1]["with"]["runners"], variables), variables)
    assert set(variables) == {"CLASSROOM_RUNNERS"} | {f"{r.upper()}_RESULTS" for r, _ in runners}
    for runner, document in runners:
        encoded = variables[f"{runner.upper()}_RESULTS"]
        assert len(encoded) < 128 * 1024  # one environment string
        compact = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        assert compact == base64.b64decode(encoded).decode()
        jsonschema.validate(document, GRADER_OUTPUT)
        assert 0 <= sum(t["score"] for t in document["tests"]) <= document["max_score"]
    statuses = {document["status"] for _, document in runners}
    return {
        "status": "error" if "error" in statuses else "fail" if "fail" in statuses else "pass",
        "max_score": sum(document["max_score"] for _, document in runners),
        "tests": [t for _, document in runners for t in document["tests"]],
        "runners": runners,
    }


def points_scale() -> int:
    """What Classroom's points are, times the kit's: whole numbers (halves doubled)."""
    from grader.report.classroom import scale

    found = scale(c.points for c in public_cases())
    assert found in (1, 2)  # the suites' points are whole or halves
    return found


def assert_totals_agree(document: dict) -> None:
    """The reporter's console total and the grade Classroom records are the same, out of the
    same maximum, and every `max_score` is a whole number, as Classroom's graders give."""
    runners = document["runners"]
    assert reporter.console_total(runners) == reporter.recorded_total(runners)
    assert all(type(d["max_score"]) is int and d["max_score"] > 0 for _, d in runners)
    assert all(type(t["score"]) is int for _, d in runners for t in d["tests"])


def submission(bundle: Path, tmp_path: Path, name: str) -> Path:
    """A copy of the bundle as a student's repository, without the virtual environment."""
    repo = tmp_path / name
    shutil.copytree(bundle, repo, ignore=shutil.ignore_patterns(".venv", "__pycache__", ".pytest_cache"))
    return repo


def test_classroom_grades_the_reference_in_full(student, bundle, tmp_path):
    repo = submission(bundle, tmp_path, "reference")
    for name in NAMES:
        shutil.rmtree(repo / name)
        shutil.copytree(REPO / "reference" / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    document = classroom_result(student, repo, tmp_path)
    total = sum(c.points for c in public_cases()) * points_scale()
    assert document["status"] == "pass" and document["max_score"] == total
    assert sum(t["score"] for t in document["tests"]) == total
    assert_totals_agree(document)
    assert reporter.console_total(document["runners"]) == (total, total)
    assert len(document["tests"]) == len(public_cases())
    assert sum(t["duration"] for t in document["tests"]) > 0  # milliseconds each case took


def test_classroom_leaves_a_changed_test_unscored_without_torch(student, bundle, tmp_path):
    """As the student's pytest does: a case whose test changed since the release has no
    shipped answer; without torch it is left out of the score, and every other case counts."""
    repo = with_reference(bundle, tmp_path, "changed-classroom")
    suite = repo / "tests" / "public" / "micrograd" / "test_ops.py"
    suite.write_text(suite.read_text() + "\n# the student's own note\n")
    document = classroom_result(student, repo, tmp_path)
    changed = [c for c in public_cases() if c.module == "test_ops" and c.assignment == "micrograd"]
    assert changed
    total = (sum(c.points for c in public_cases()) - sum(c.points for c in changed)) * points_scale()
    assert document["status"] == "pass" and document["max_score"] == total
    assert sum(t["score"] for t in document["tests"]) == total
    assert len(document["tests"]) == len(public_cases()) - len(changed)
    assert_totals_agree(document)


def test_classroom_grades_the_template_like_pytest(student, bundle, tmp_path, oracle):
    document = classroom_result(student, bundle, tmp_path)
    cases = public_cases()
    expected = grade(REPO / "student_template", cases, oracle, InProcessRunner())
    assert document["status"] == "fail"
    factor = points_scale()
    assert (sum(t["score"] for t in document["tests"]), document["max_score"]) == (
        expected.score * factor,
        expected.max_score * factor,
    )
    assert_totals_agree(document)
    assert 0 < reporter.recorded_total(document["runners"])[0] < document["max_score"]
    failing = [t for t in document["tests"] if t["status"] != "pass"]
    assert failing and all(t["message"].startswith("not implemented yet") for t in failing)
    first = document["tests"][0]
    assert first["filename"].startswith("tests/public/") and first["line_no"] > 0


def test_classroom_scores_a_crashing_submission_zero_with_reasons(student, bundle, tmp_path):
    repo = submission(bundle, tmp_path, "crashing")
    (repo / "micrograd" / "engine.py").write_text("import os\n\nos._exit(3)\n")
    ops = repo / "needle" / "ops.py"  # a segmentation fault in log's forward: each case with a log crashes
    ops.write_text(
        ops.read_text()
        + "\n\ndef crash(self, a):\n    __import__('ctypes').string_at(0)\n\n\nLog.compute = crash\n"
    )
    document = classroom_result(student, repo, tmp_path)
    tests = document["tests"]
    assert document["status"] == "fail" and len(tests) == len(public_cases())
    micrograd = [t for t in tests if t["name"].startswith("micrograd /")]
    assert micrograd and all(t["status"] == "error" and t["score"] == 0 and t["message"] for t in micrograd)
    needle = [t for t in tests if t["name"].startswith("needle /")]
    crashed = [t for t in needle if t["status"] == "error"]
    assert crashed and all(t["score"] == 0 and t["message"] for t in crashed)
    assert any(t["status"] == "pass" for t in needle)  # its forward cases without a log


def test_classroom_writes_a_result_when_grading_cannot_run(tmp_path):
    suites = tmp_path / "suites" / "public" / "micrograd"
    suites.mkdir(parents=True)
    (suites / "test_broken.py").write_text("def broken(:\n")
    output = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.classroom",
            str(REPO / "student_template"),
            "--suites",
            str(suites.parents[1]),
        ],
        env={**os.environ, "GITHUB_ENV": str(output)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    variables = dict(line.split("=", 1) for line in output.read_text().splitlines())
    ((runner, document),) = reporter.results_of(variables["CLASSROOM_RUNNERS"], variables)
    jsonschema.validate(document, GRADER_OUTPUT)
    assert document["status"] == "error" and document["tests"][0]["status"] == "error"
    assert "grading could not run: SyntaxError" in document["tests"][0]["message"]
    assert reporter.recorded_total([(runner, document)]) == (0, document["max_score"])


def test_a_bundle_without_a_package_is_not_graded_on_the_graders_own_folders(bundle, tmp_path):
    from grader.case.loading import SubmissionError, locate_assignment

    repo = submission(bundle, tmp_path, "no-micrograd")
    shutil.rmtree(repo / "micrograd")
    assert (repo / "grader" / "assignments" / "micrograd" / "__init__.py").is_file()
    with pytest.raises(SubmissionError, match="no package 'micrograd'"):
        locate_assignment(repo, "micrograd")
    assert locate_assignment(repo, "needle").path == repo / "needle"


def test_classrooms_totals_agree_whatever_the_points_and_failures():
    """Cases worth 0.5, 1, 2 and 3 points, some passed: one runner per point value, so the
    reporter's console (passed / tests × max_score per runner) prints what Classroom records
    (the sum of the scores), in whole points, and the grade is the kit's fraction."""
    from grader.report.classroom import classroom, scale
    from grader.report.model import CaseResult, Report, Status

    worths = [0.5, 0.5, 0.5, 1, 1, 1, 1, 2, 2, 3, 3, 3]
    passed = [True, False, False, True, True, False, True, False, True, True, False, False]
    results = [
        CaseResult(
            f"micrograd::t{i}", f"t{i}", "micrograd", "ops", worth, Status.PASSED if ok else Status.FAILED
        )
        for i, (worth, ok) in enumerate(zip(worths, passed, strict=True))
    ]
    report = Report("s", results)
    runners = list(classroom(report).items())
    assert [r for r, _ in runners] == ["worth1", "worth2", "worth4", "worth6"]  # halves doubled
    console, recorded = reporter.console_total(runners), reporter.recorded_total(runners)
    assert console == recorded == (report.score * 2, report.max_score * 2)
    assert all(type(d["max_score"]) is int for _, d in runners)
    assert scale([1, 2, 3]) == 1 and scale([0.25, 1]) == 4
    # what one runner holding every case would have shown: the two totals apart
    single = [("all", {"max_score": report.max_score, "tests": [t for _, d in runners for t in d["tests"]]})]
    assert reporter.console_total(single)[0] != report.score


def test_the_schema_rejects_what_the_reporter_cannot_read():
    from grader.report.classroom import failed_to_grade

    (good,) = failed_to_grade("why", [("micrograd / ops / add", 2.0)]).values()
    jsonschema.validate(good, GRADER_OUTPUT)
    bad = [
        {**good, "tests": []},
        {**good, "max_score": 0},
        {**good, "status": "failed"},
        {**good, "tests": [{k: v for k, v in good["tests"][0].items() if k != "line_no"}]},
        {**good, "tests": [{**good["tests"][0], "score": "0"}]},
    ]
    for document in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(document, GRADER_OUTPUT)


def test_a_long_result_is_shortened_to_fit_one_environment_variable():
    from grader.report.classroom import MAX_ENCODED, encode, failed_to_grade

    names = [(f"needle / shapes / case {i}", 1.0) for i in range(2000)]
    (document,) = failed_to_grade("x" * 5000, names).values()
    encoded = encode(document)
    assert len(encoded) <= MAX_ENCODED
    decoded = json.loads(base64.b64decode(encoded))
    assert decoded["max_score"] == 2000 and sum(t["score"] for t in decoded["tests"]) == 0
    assert [t["name"] for t in decoded["tests"]] == ["needle / shapes"]  # summed up per topic
    assert decoded["tests"][0]["message"] == "0 of 2000 cases passed"
    (shorter,) = failed_to_grade("x" * 5000, names[:100]).values()
    decoded = json.loads(base64.b64decode(encode(shorter, limit=60_000)))
    assert [t["name"] for t in decoded["tests"]] == [name for name, _ in names[:100]]
    assert all(0 < len(t["message"]) < 5000 for t in decoded["tests"])  # only cut


def test_a_scope_file_narrows_what_the_bundle_grades(tmp_path):
    from grader.pipeline import needs_from
    from grader.scope import load, select, vocabulary

    ops = [op for op in vocabulary("micrograd")[0] if op != "sigmoid"]
    scope_file = tmp_path / "course.toml"
    scope_file.write_text(
        f"[micrograd]\nops = {json.dumps(ops)}\n\n"
        "[micrograd.topics]\nforward = 1\nops = 2\naccumulation = 0.5\n"
    )
    made = release(tmp_path / "out", assignments=["micrograd"], scopes=[scope_file])
    assert made.leaks == []
    (given,) = load(scope_file)
    (shipped,) = load(made.out / "grader" / "assignments" / "micrograd" / "scope.toml")
    assert (shipped.ops, shipped.features, dict(shipped.topics)) == (
        given.ops,
        given.features,
        dict(given.topics),
    )
    oracle = Oracle(tmp_path / "cache")
    cases = select(
        collect(REPO / "tests", ["micrograd"], ("public",)), {"micrograd": given}, needs_from(oracle)
    )
    assert {c.topic for c in cases} == {"forward", "ops", "accumulation"}
    assert not any("sigmoid" in c.id for c in cases)
    total = sum(c.points for c in cases)
    assert f"the\nwhole run is worth {total:g} points" in (made.out / "README.md").read_text()
    # the repository grades itself as the scope says (its own grader, not this checkout's)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/public/micrograd/test_ops.py",
        ],
        cwd=made.out,
        env={**env, "GRADER_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
    )
    score = re.search(r"^Score: (\S+)/(\S+) points\b", done.stdout, re.M)
    assert score, done.stdout[-3000:] + done.stderr[-3000:]
    in_file = sum(c.points for c in cases if c.module == "test_ops")
    assert float(score.group(2)) == in_file


def test_a_scope_for_an_assignment_left_out_is_a_mistake(tmp_path, capsys):
    scope_file = tmp_path / "course.toml"
    scope_file.write_text("[needle]\n")
    assert (
        cli(["release", str(tmp_path / "out"), "--assignment", "micrograd", "--scope", str(scope_file)]) == 2
    )
    assert "leaves out" in capsys.readouterr().err
    assert cli(["release", str(tmp_path / "out"), "--scope", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
