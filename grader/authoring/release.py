"""`python -m grader release OUT`: the student bundle, checked for leaks before it exists.

The bundle is a repository to hand out (a GitHub Classroom template, a zip): a student
edits the packages at its root, and the repository itself is a submission directory.

    micrograd/, needle/      the template packages, from student_template/
    tests/public/<name>/     the public suites
    grader/                  what the student's loop runs: the pytest plugin and the Classroom
                             command, with everything they import, and the packages the
                             suites import (grader/case, grader/assignments: they run beside
                             student code; the oracles come too, since the local yardstick is
                             PyTorch). Not the instructor's tools (grader/authoring, the
                             command line, notebooks, nbgrader, Gradescope's report)
    grader/answers/<name>.json   PyTorch's answers: every public case's expected run (values,
                             gradients) and those of the programs the random-program
                             searches try, stamped with each suite file's digest
                             (`grader.verdict.oracle`): a student's run needs no torch;
                             `<name>.detail.json` beside it holds the tapes diagnoses read
    docs/students.md         the students' page: running the tests, the submission contract
    requirements.txt         every third-party module those files import, pinned to the
                             version this kit runs (numpy==..., ...), and pytest-timeout; not
                             torch, which only a changed test needs
    pytest.ini, conftest.py  the plugin and its settings: the repository grades itself
    README.md                the student's: set-up in two commands, one task, the score line
    .github/workflows/classroom.yml   GitHub Classroom's workflow, grading with
                             `python -m grader.classroom`
    .gitignore

Never: reference/, the hidden suites, the harness (bug banks, hostile submissions), bytecode,
oracle caches. The bundle is written beside OUT under a temporary name and scanned
(`grader.authoring.leaks`: solution lines, hidden case names and sources, the checkout's
paths, forbidden files); only a clean bundle is renamed to OUT, else nothing is left and the
leaks are the error.

A release covers every assignment, or those named (`assignments=`): a narrower release
ships only their packages, suites and folders under grader/assignments/, so its grader
knows no other assignment. A scope file (`scopes=`, `grader.scope`) narrows an assignment
further: it becomes that assignment's default scope in the bundle
(`grader/assignments/<name>/scope.toml`), so the students' pytest and the Classroom command
grade only the ops and topics it admits, at its points, and the README counts the same.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from string import Template

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from grader.authoring.leaks import Leak, Secrets, forbidden_files, scan, secrets
from grader.scope import FILE as SCOPE_FILE
from grader.scope import Scope, ScopeError, load, resolve, select, vocabulary

REPO = Path(__file__).resolve().parents[2]
BUNDLE = Path(__file__).resolve().parent / "bundle"
#: the modules a student runs, relative to the grader package: their imports are followed
ENTRY_POINTS = ("__init__.py", "plugin.py", "classroom.py")
#: shipped whole: the suites import them, and they run beside student code
WHOLE = ("case", "assignments")
SKIP = {"__pycache__", ".pytest_cache"}
#: imported by the bundle's files but not required: the oracles import torch, which a
#: student's run needs only for a test changed since the release (the answers are shipped)
OPTIONAL = {"torch"}
#: pytest plugins the bundle's run uses without importing them: a time limit per test
PLUGINS = ("pytest-timeout",)
#: what each assignment is, for the student README
ENGINES = {
    "micrograd": "micrograd (a scalar engine with one gradient closure per op)",
    "needle": "needle (a tensor engine whose ops carry `compute` and `gradient`)",
}
#: a file and a -k word to show in "Run one task", and the message its template gives
EXAMPLES = {
    "micrograd": (
        "tests/public/micrograd/test_ops.py",
        "tanh",
        "not implemented yet: Value.__mul__._backward — <the hint written above it>",
    ),
    "needle": (
        "tests/public/needle/test_ops.py",
        "tanh",
        "not implemented yet: EWiseMul.gradient — <the hint written above it>",
    ),
}
PYTEST_INI = """\
[pytest]
# The grader's pytest plugin (registered in conftest.py) grades this folder's packages.
# Hypothesis's own plugin is off: no test here is a hypothesis test (a random search calls
# hypothesis itself, only to shrink a failure), and it would load all of hypothesis at the
# end of every run. So is pytest's logging plugin: the grader captures what a case prints
# or logs itself, and the plugin's three handlers per test cost a run some 4%.
testpaths = tests
pythonpath = .
addopts = --import-mode=importlib -p no:hypothesispytest -p no:logging
grader_impl = .
"""
CONFTEST = """\
# The grader's pytest plugin: points, diagnostics and the score line. It is registered here,
# at the root, so that its options are understood before test paths are read.
pytest_plugins = ["grader.plugin"]
"""


class ReleaseError(Exception):
    """The release cannot be made as asked (a user's mistake or a missing checkout)."""


@dataclass
class Release:
    out: Path
    files: list[str]
    size: int  # bytes
    leaks: list[Leak]


# ---- what goes in ----


def _imports(path: Path) -> frozenset[str]:
    """Every module a file imports, at any depth (a function's lazy import counts)."""
    info = path.stat()
    return _parsed_imports(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=1024)
def _parsed_imports(path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """`_imports`, parsed once per version of the file (a release reads each file twice,
    for the grader's closure and for the requirements, and a second release in the same
    process reads them all again)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return frozenset(found)


def _module_file(grader: Path, name: str) -> Path | None:
    parts = name.split(".")[1:]
    base = grader.joinpath(*parts) if parts else grader
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not SKIP.intersection(p.parts))


def grader_files(grader: Path, names: Iterable[str]) -> list[Path]:
    """The grader's files a bundle ships: the entry points and `WHOLE` (less the folders of
    assignments not released), and every grader module they import, transitively."""
    names = set(names)
    all_assignments = {p.name for p in (grader / "assignments").iterdir() if (p / "adapter.py").is_file()}

    def wanted(path: Path) -> bool:
        rel = path.relative_to(grader).parts
        return not (len(rel) > 2 and rel[0] == "assignments" and rel[1] in all_assignments - names)

    todo = [grader / name for name in ENTRY_POINTS if (grader / name).is_file()]
    todo += [p for package in WHOLE for p in _files(grader / package) if wanted(p)]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if path.suffix != ".py":
            continue
        for module in _imports(path):
            if module != "grader" and not module.startswith("grader."):
                continue
            parts = module.split(".")
            for i in range(1, len(parts) + 1):
                found = _module_file(grader, ".".join(parts[:i]))
                if found is not None and wanted(found):
                    todo.append(found)
    return sorted(seen)


def third_party(files: Iterable[Path], local: Iterable[str]) -> set[str]:
    """Top-level modules the files import that are neither the standard library nor local."""
    skip = set(local) | set(sys.stdlib_module_names)
    return {m.split(".")[0] for f in files if f.suffix == ".py" for m in _imports(f)} - skip


def pins(modules: Iterable[str], pyproject: Path) -> list[str]:
    """`name==version` for the distribution of each module, at the version installed here
    (without a local label such as +cpu), with the environment marker pyproject.toml gives."""
    markers = {}
    for line in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        req = Requirement(line)
        if req.marker is not None:
            markers[canonicalize_name(req.name)] = str(req.marker)
    providers = metadata.packages_distributions()
    lines = []
    for module in sorted(modules):
        dists = providers.get(module)
        if not dists:
            raise ReleaseError(f"cannot pin {module}: it is imported by the bundle but not installed here")
        name = metadata.metadata(dists[0])["Name"]
        version = metadata.version(dists[0]).split("+")[0]
        marker = markers.get(canonicalize_name(name))
        lines.append(f"{name}=={version}" + (f"; {marker}" if marker else ""))
    return sorted(set(lines), key=str.lower)


def plugin_pins(names: Iterable[str]) -> list[str]:
    """`name==version` of each distribution, as installed here."""
    try:
        return [f"{name}=={metadata.version(name).split('+')[0]}" for name in names]
    except metadata.PackageNotFoundError as exc:
        raise ReleaseError(
            f"cannot pin {exc.name}: the bundle's run uses it but it is not installed here"
        ) from None


def search_names_in(path: Path) -> list[str]:
    """The tests of a suite file that are random-program searches (`@search(...)`)."""
    return [
        node.name
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(d, ast.Call) and getattr(d.func, "id", "") == "search" for d in node.decorator_list
        )
    ]


def search_names(suite: Path) -> list[str]:
    """The tests of a suite folder that are random-program searches."""
    return [name for path in sorted(suite.glob("test_*.py")) for name in search_names_in(path)]


def search_programs(suite: Path) -> set[str]:
    """The case ids of the fixed programs the searches of a suite folder try first
    (`__grader_programs__`, `grader.case.search`): the same on every run and machine."""
    from grader.case.define import load_module

    found = set()
    for path in sorted(suite.glob("test_*.py")):
        names = search_names_in(path)
        module = load_module(path) if names else None
        for name in names:
            found |= {case.id for case in getattr(module, name).__grader_programs__()}
    return found


def search_runs(bundle: Path, repo: Path, names: list[str], seed: Path | None = None) -> dict[str, dict]:
    """The expected runs of the programs each assignment's searches try on a correct
    submission (their fixed programs: `search_programs`), found as a student's run finds
    them: pytest in the bundle, grading the reference, which also shows that every search
    passes on it. One run for all `names` (PyTorch is imported once, if at all). Its oracle
    keeps them in a folder of its own, one file per assignment's searches, which starts with
    the searches' files of the oracle cache `seed` and gives it back the one it used: a
    release made again from the same kit runs no PyTorch for them. Only the fixed programs'
    runs are taken from that file (it also holds what searches of other submissions drew and
    shrank), so a release is the same whatever ran before it. Returns, for each name,
    {"runs": ..., "seconds": ...}."""
    from grader.verdict import cache
    from grader.verdict.oracle import CACHE_ENV

    found: dict[str, dict] = {name: {"runs": {}, "seconds": {}} for name in names}
    searches = {name: search_names(bundle / "tests" / "public" / name) for name in names}
    searched = [name for name in names if searches[name]]
    if not searched:
        return found
    with tempfile.TemporaryDirectory(prefix="grader-release-search-") as folder:
        for version in cache.versions(seed) if seed is not None and seed.is_dir() else []:
            if version.assignment in searches and version.suite == "search":
                cache.copy_version(version.path, Path(folder))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(PYTHONDONTWRITEBYTECODE="1", HYPOTHESIS_STORAGE_DIRECTORY=f"{folder}/hypothesis")
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--impl={repo / 'reference'}",
        ]
        argv += [f"tests/public/{name}" for name in searched]
        argv += ["-k", " or ".join(sorted({test for name in searched for test in searches[name]}))]
        done = subprocess.run(
            argv, cwd=bundle, env={**env, CACHE_ENV: folder}, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise ReleaseError(
                f"the {' and '.join(searched)} searches fail on reference/: {done.stdout.strip()[-500:]}"
            )
        used: dict[str, cache.Version] = {}  # the run read or wrote one version per assignment
        for version in cache.versions(Path(folder)):  # the most recently used first
            if version.assignment in found and version.suite == "search":
                used.setdefault(version.assignment, version)
        for name, version in used.items():
            data = json.loads(version.path.read_text())
            wanted = search_programs(bundle / "tests" / "public" / name)
            if missing := wanted - data["runs"].keys():
                raise ReleaseError(f"the {name} searches did not run {len(missing)} of their fixed programs")
            found[name]["runs"].update({key: data["runs"][key] for key in sorted(wanted)})
            found[name]["seconds"].update({key: data["seconds"][key] for key in sorted(wanted)})
            if seed is not None:
                cache.copy_version(version.path, seed)
    return found


def write_answers(bundle: Path, repo: Path, names: list[str]) -> None:
    """`grader/answers/<name>.json`: every public case's run (`Oracle.answers`) and those of
    the searches' programs; their details (tapes and steps, for diagnoses) apart, in
    `<name>.detail.json` (`split_answers`)."""
    from grader.case.define import collect
    from grader.verdict.oracle import oracle_from, split_answers

    oracle = oracle_from()
    (bundle / "grader" / "answers").mkdir()
    searched = search_runs(bundle, repo, names, oracle.cache_dir)
    for name in names:
        answered = oracle.answers(collect(repo / "tests", [name], ("public",)))
        answered["runs"].update(searched[name]["runs"])
        answered["seconds"].update(searched[name]["seconds"])
        runs, details = split_answers(answered)
        folder = bundle / "grader" / "answers"
        (folder / f"{name}.json").write_text(json.dumps(runs, separators=(",", ":")))
        (folder / f"{name}.detail.json").write_text(json.dumps(details, separators=(",", ":")))


def tasks_table(cases: list, searches: dict[str, list[str]] | None = None) -> str:
    """One row per topic; then each assignment's random-program searches, which pytest runs
    beside the cases but which are worth nothing (`searches`: assignment -> their files)."""
    rows: dict[tuple[str, str], list] = {}
    for case in cases:
        rows.setdefault((case.assignment, case.topic), []).append(case)
    lines = ["| assignment | topic | in | cases | points |", "| --- | --- | --- | ---: | ---: |"]
    for (assignment, topic), group in rows.items():
        files = ", ".join(sorted({f"`{c.module}.py`" for c in group}))
        points = sum(c.points for c in group)
        lines.append(f"| {assignment} | {topic} | {files} | {len(group)} | {points:g} |")
    for assignment, files in (searches or {}).items():
        if files:
            shown = ", ".join(f"`{f}`" for f in sorted(set(files)))
            lines.append(f"| {assignment} | random search (not graded) | {shown} | {len(files)} | 0 |")
    return "\n".join(lines)


def searches_in(suites: Path, names: Iterable[str]) -> dict[str, list[str]]:
    """Each assignment's random-program searches, as the file each is in (one per search)."""
    found = {}
    for name in names:
        folder = suites / "public" / name
        found[name] = [f"{path.name}" for path in sorted(folder.glob("test_*.py")) if search_names_in(path)]
    return found


def _commented(lines: list[tuple[str, str]]) -> str:
    width = max(len(command) for command, _ in lines)
    return "\n".join(f"{command.ljust(width)}   # {comment}" for command, comment in lines)


def student_readme(names: list[str], cases: list, searches: dict[str, list[str]] | None = None) -> str:
    example = EXAMPLES.get(names[0], (f"tests/public/{names[0]}/", "forward", "not implemented yet: ..."))
    first = cases[0] if cases else None
    return Template((BUNDLE / "README.md").read_text()).substitute(
        title=" and ".join(names),
        engines=" and ".join(ENGINES.get(name, name) for name in names),
        packages=" and ".join(f"`{name}/`" for name in names),
        one_task=_commented(
            [
                (f"python -m pytest {example[0]}", "one file"),
                (
                    f"python -m pytest {example[0]} -k {example[1]}",
                    f'the cases whose name has "{example[1]}"',
                ),
                ("python -m pytest --lf", "only what failed last time"),
            ]
        ),
        example_message=example[2],
        total=f"{sum(c.points for c in cases):g}",
        first_topic=f"{first.assignment} / {first.topic}" if first else "assignment / topic",
        tasks=tasks_table(cases, searches),
        collected=len(cases) + sum(len(files) for files in (searches or {}).values()),
        cases=len(cases),
    )


# ---- writing and checking ----


def _copy(src: Path, dest: Path) -> None:
    for path in _files(src):
        target = dest / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def scope_toml(scope: Scope) -> str:
    """A scope as the TOML of a scope file (the bundle's default for its assignment)."""
    ops, features = vocabulary(scope.assignment)
    name = scope.assignment
    lines = [
        f"# The {name} assignment's scope in this repository (written by `python -m grader release",
        f"# --scope {Path(scope.source).name}`): the ops and topics graded, and each topic's points factor.",
        f"[{name}]",
        f"ops = {json.dumps([op for op in ops if op in scope.ops])}",
        f"features = {json.dumps([f for f in features if f in scope.features])}",
        "",
        f"[{name}.topics]",
        *(f"{json.dumps(topic)} = {float(factor)!r}" for topic, factor in scope.topics.items()),
    ]
    return "\n".join(lines) + "\n"


def graded_cases(repo: Path, names: list[str], scopes: dict[str, Scope]) -> list:
    """The public cases the bundle grades: in scope, with their points scaled. PyTorch runs
    (or its cache is read) only when a scope leaves an op out."""
    from grader.case.define import collect
    from grader.pipeline import needs_from
    from grader.verdict.oracle import oracle_from

    defaults = {name: load(repo / "grader" / "assignments" / name / SCOPE_FILE)[0] for name in names}
    cases = collect(repo / "tests", names, ("public",))
    return select(cases, {**defaults, **scopes}, needs_from(oracle_from()))


def build(dest: Path, repo: Path, names: list[str], scopes: dict[str, Scope] | None = None) -> None:
    """Write the bundle into the empty directory `dest`, all but its answers (`write_answers`),
    unchecked: see `release`."""
    scopes = scopes or {}

    grader = repo / "grader"
    for name in names:
        _copy(repo / "student_template" / name, dest / name)
        _copy(repo / "tests" / "public" / name, dest / "tests" / "public" / name)
    shipped = grader_files(grader, names)
    for path in shipped:
        target = dest / "grader" / path.relative_to(grader)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    suites = _files(dest / "tests")
    modules = third_party([*shipped, *suites], ["grader", *names])
    (dest / "docs").mkdir()
    shutil.copyfile(repo / "docs" / "students.md", dest / "docs" / "students.md")
    header = "# The versions the tests were made with (written by `python -m grader release`).\n"
    required = pins(modules - OPTIONAL, repo / "pyproject.toml") + plugin_pins(PLUGINS)
    (dest / "requirements.txt").write_text(header + "\n".join(sorted(required, key=str.lower)) + "\n")
    (dest / "pytest.ini").write_text(PYTEST_INI)
    (dest / "conftest.py").write_text(CONFTEST)
    for name, scope in scopes.items():
        (dest / "grader" / "assignments" / name / SCOPE_FILE).write_text(scope_toml(scope))
    searches = searches_in(repo / "tests", names)
    (dest / "README.md").write_text(student_readme(names, graded_cases(repo, names, scopes), searches))
    (dest / ".gitignore").write_text((BUNDLE / "gitignore").read_text())
    workflows = dest / ".github" / "workflows"
    workflows.mkdir(parents=True)
    shutil.copyfile(BUNDLE / "classroom.yml", workflows / "classroom.yml")


def check_bundle(root: Path, found: Secrets, only: Collection[str] | None = None) -> list[Leak]:
    """Every leak in a bundle: what must not ship by name, and by content (of the files
    `only` names, relative to `root`, when given)."""
    return forbidden_files(root) + scan(root, found, only)


def stamps(root: Path) -> dict[str, tuple[int, int]]:
    """Each file under `root` (relative path) -> its modification time and size."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            info = path.stat()
            found[path.relative_to(root).as_posix()] = (info.st_mtime_ns, info.st_size)
    return found


def release(
    out: Path,
    repo: Path = REPO,
    assignments: Iterable[str] | None = None,
    scopes: Iterable[str | Path] = (),
) -> Release:
    """Write the bundle to `out` (new, or an empty directory) if it is clean. With leaks,
    nothing is written and the returned release lists them. `scopes`: scope files, each
    assignment they cover graded as they say."""
    out = Path(out).resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReleaseError(f"{out} exists and is not an empty directory")
    for needed in ("student_template", "tests/public", "reference", "docs/students.md"):
        if not (repo / needed).exists():
            raise ReleaseError(f"releasing needs the kit's checkout: {repo / needed} is missing")
    known = sorted(p.name for p in (repo / "tests" / "public").iterdir() if p.is_dir())
    names = list(assignments) if assignments else known
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ReleaseError(f"no public suite for {', '.join(unknown)} (known: {', '.join(known)})")
    try:
        chosen = resolve(scopes, repo / "tests", shipped=False)
    except ScopeError as exc:
        raise ReleaseError(str(exc)) from None
    outside = sorted(set(chosen) - set(names))
    if outside:
        raise ReleaseError(f"a scope covers {', '.join(outside)}, which this release leaves out")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        build(staging, repo, names, chosen)
        found = secrets(repo / "reference", repo / "tests")  # once for both scans
        leaks = check_bundle(staging, found)
        if not leaks:  # the answers last (they run the bundle's own pytest), and what that
            # wrote or changed scanned too (every file's name is checked again)
            before = stamps(staging)
            write_answers(staging, repo, names)
            changed = {rel for rel, stamp in stamps(staging).items() if before.get(rel) != stamp}
            leaks = check_bundle(staging, found, changed)
        files = [p.relative_to(staging).as_posix() for p in sorted(staging.rglob("*")) if p.is_file()]
        size = sum((staging / f).stat().st_size for f in files)
        if leaks:
            return Release(out, files, size, leaks)
        staging.chmod(0o755)  # mkdtemp's folder is its owner's alone; a bundle is for all
        if out.exists():
            out.rmdir()
        staging.rename(out)
        return Release(out, files, size, [])
    finally:
        if staging.exists():
            shutil.rmtree(staging)
