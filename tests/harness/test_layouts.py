"""Layouts real students hand in: each is graded as its code deserves, or told what is wrong.

Every layout is built in tmp_path from reference/ copies, then graded on a few public cases
(the MLP ones among them) in-process; the layouts that change what the sandbox must copy
are graded in the sandbox too.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from grader.case.define import Case, collect
from grader.case.loading import SubmissionError, locate
from grader.classgrade.gradebook import Gradebook
from grader.report.model import Report, Status
from grader.verdict.oracle import Oracle
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "reference"
#: a few cases of each assignment: the MLP ones (they need nn.py) and some that do not
MODULES = {
    "micrograd": {"test_mlp", "test_composite", "test_detach"},
    "needle": {"test_composite", "test_detach"},
}
MLP = "micrograd/test_mlp::"


def few(case: Case) -> bool:
    return case.module in MODULES[case.assignment]


def copy(name: str, dest: Path, init: bool = True) -> Path:
    shutil.copytree(REFERENCE / name, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if not init:
        (dest / "__init__.py").unlink()
    return dest


def run(sub: Path, oracle: Oracle, only: tuple[str, ...] = ("micrograd",), sandbox: bool = False) -> Report:
    return grade(sub, "public", only, oracle=oracle, sandbox=sandbox, keep=few)


def by_status(report: Report) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in report.results:
        out.setdefault(r.status.value, []).append(r.id)
    return out


def full(report: Report) -> bool:
    return report.max_score > 0 and report.score == report.max_score


# ---- packages without __init__.py, modules no case needs ----


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_a_folder_without_init_py_is_a_namespace_package(tmp_path, oracle, sandbox):
    copy("micrograd", tmp_path / "micrograd", init=False)
    report = run(tmp_path, oracle, sandbox=sandbox)
    assert full(report), by_status(report)


def test_missing_nn_costs_only_the_mlp_cases_and_names_the_module(tmp_path, oracle):
    (copy("micrograd", tmp_path / "micrograd") / "nn.py").unlink()
    report = run(tmp_path, oracle)
    for r in report.results:
        if r.id.startswith(MLP):
            assert r.status is Status.ERROR and "has no module nn (micrograd/nn.py" in r.message, r.message
        else:
            assert r.passed, (r.id, r.message)
    assert report.score > 0


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_an_unimportable_nn_imported_by_init_costs_only_the_mlp_cases(tmp_path, oracle, sandbox):
    package = copy("micrograd", tmp_path / "micrograd")
    (package / "nn.py").write_text("class MLP:\n    def broken(self)\n        pass\n")
    (package / "__init__.py").write_text("from micrograd.engine import Value\nfrom micrograd.nn import MLP\n")
    report = run(tmp_path, oracle, sandbox=sandbox)
    mlp = [r for r in report.results if r.id.startswith(MLP)]
    assert mlp and all(
        "micrograd.nn does not compile" in r.message and "nn.py, line 2" in r.message for r in mlp
    )
    assert all(r.passed for r in report.results if not r.id.startswith(MLP)), by_status(report)
    assert any("micrograd/__init__.py failed" in note for note in report.notes), report.notes


def without_init(dest: Path) -> Path:
    """A needle without init.py whose autograd does not need it (seeds backward with numpy)."""
    package = copy("needle", dest / "needle")
    (package / "init.py").unlink()
    autograd = package / "autograd.py"
    seed = "init.ones(*self.shape, dtype=self.dtype, device=self.device)"
    text = autograd.read_text().replace(seed, "Tensor(numpy.ones(self.shape, dtype=self.dtype))")
    autograd.write_text(text.replace("from . import init, ops", "from . import ops"))
    return package


def test_needle_without_init_py_grades(tmp_path, oracle):
    package = without_init(tmp_path / "clean")
    text = (package / "__init__.py").read_text().replace("autograd, init, ops", "autograd, ops")
    (package / "__init__.py").write_text(text)
    report = run(tmp_path / "clean", oracle, ("needle",))
    assert full(report) and not report.notes, (by_status(report), report.notes)


def test_an_init_py_that_imports_a_missing_module_is_gone_around(tmp_path, oracle):
    """needle/__init__.py imports init, which is missing: its other modules are graded."""
    without_init(tmp_path)
    report = run(tmp_path, oracle, ("needle",))
    assert full(report), by_status(report)
    [note] = report.notes
    assert note.startswith("needle/__init__.py failed (ImportError: cannot import name 'init' from ")
    assert note.endswith("): its modules were imported without it")


# ---- where the package is ----


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_nested_packages_are_found(tmp_path, oracle, sandbox):
    copy("needle", tmp_path / "python" / "needle")
    copy("micrograd", tmp_path / "hw" / "micrograd", init=False)
    (tmp_path / "apps").mkdir()  # the course's layout has more beside python/
    report = run(tmp_path, oracle, ("micrograd", "needle"), sandbox=sandbox)
    assert full(report), by_status(report)
    assert {r.assignment for r in report.results} == {"micrograd", "needle"}


def single_module(dest: Path) -> Path:
    """engine.py and nn.py in one micrograd.py."""
    engine = (REFERENCE / "micrograd" / "engine.py").read_text()
    nn = (REFERENCE / "micrograd" / "nn.py").read_text().replace("from micrograd.engine import Value\n", "")
    assert "import Value" not in nn
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "micrograd.py").write_text(engine + "\n\n" + nn)
    return dest


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_a_single_micrograd_module_grades(tmp_path, oracle, sandbox):
    report = run(single_module(tmp_path / "sub"), oracle, sandbox=sandbox)
    assert full(report), by_status(report)


def test_two_packages_as_shallow_is_a_clear_error(tmp_path):
    copy("micrograd", tmp_path / "a" / "micrograd")
    copy("micrograd", tmp_path / "b" / "micrograd")
    with pytest.raises(SubmissionError, match="more than one micrograd in .*: a/micrograd, b/micrograd"):
        locate(tmp_path, "micrograd", ("engine.py",))


def test_many_packages_as_shallow_are_counted_not_all_named(tmp_path):
    """A folder of a whole class given as one submission: the message stays one short line."""
    for student in range(40):
        (tmp_path / f"s{student:02}" / "micrograd").mkdir(parents=True)
        (tmp_path / f"s{student:02}" / "micrograd" / "engine.py").write_text("")
    with pytest.raises(SubmissionError) as raised:
        locate(tmp_path, "micrograd", ("engine.py",))
    message = str(raised.value)
    assert "s00/micrograd, s01/micrograd, s02/micrograd, s03/micrograd, s04/micrograd and 35 more" in message
    assert len(message) < 300, message


def test_debris_and_tests_folders_are_not_packages(tmp_path):
    copy("micrograd", tmp_path / "__MACOSX" / "micrograd")
    (tmp_path / "tests" / "micrograd").mkdir(parents=True)
    (tmp_path / "tests" / "micrograd" / "test_engine.py").write_text("")
    copy("micrograd", tmp_path / "src" / "micrograd")
    assert locate(tmp_path, "micrograd", ("engine.py",)).path == tmp_path / "src" / "micrograd"


def test_nothing_found_says_what_was_found_and_where(tmp_path, oracle):
    shutil.copy(REFERENCE / "micrograd" / "engine.py", tmp_path / "value.py")
    (tmp_path / "notes.txt").write_text("my engine")
    (tmp_path / "hw").mkdir()
    report = run(tmp_path, oracle)
    message = report.results[0].message
    assert "no package 'micrograd'" in message and "it holds: hw/, notes.txt, value.py" in message
    assert "Python files: value.py" in message
    assert report.score == 0 and all(r.message.startswith(message) for r in report.results)


def test_a_notebook_handed_in_where_a_package_is_graded_says_so(tmp_path, oracle):
    (tmp_path / "micrograd.ipynb").write_text("{}")
    message = run(tmp_path, oracle).results[0].message
    assert "it holds: micrograd.ipynb (a notebook is not read here: hand in the micrograd/ folder" in message


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_loose_files_are_graded_as_their_package(tmp_path, oracle, sandbox):
    """engine.py and nn.py handed in without their folder (dropped into an upload), and
    needle's files beside them: each assignment is graded as its package."""
    sub = copy("micrograd", tmp_path / "sub")  # engine.py, nn.py, __init__.py at the top
    copy("needle", sub / "hw3")  # needle's files in a folder of another name
    report = run(sub, oracle, ("micrograd", "needle"), sandbox=sandbox)
    assert full(report), by_status(report)
    assert sorted(p.name for p in sub.iterdir()) == ["__init__.py", "engine.py", "hw3", "nn.py"]


def test_loose_files_as_shallow_in_two_folders_are_not_guessed(tmp_path, oracle):
    """Two folders, each with an engine.py, and no micrograd/: which is the student's is a
    question for them, answered in the message."""
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        shutil.copy(REFERENCE / "micrograd" / "engine.py", tmp_path / name / "engine.py")
    report = run(tmp_path, oracle)
    assert report.score == 0
    assert "first/engine.py belongs in a folder named micrograd/" in report.results[0].message


# ---- the submission's root and optional imports ----


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_a_stand_in_module_at_the_root_is_imported(tmp_path, oracle, sandbox):
    package = copy("needle", tmp_path / "python" / "needle")
    (tmp_path / "typecheck.py").write_text("def checked(f):\n    return f\n")
    autograd = package / "autograd.py"
    autograd.write_text("from typecheck import checked  # noqa\n" + autograd.read_text())
    report = run(tmp_path, oracle, ("needle",), sandbox=sandbox)
    assert full(report), by_status(report)


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_a_missing_optional_import_is_named_and_costs_nothing_unused(tmp_path, oracle, sandbox):
    assert importlib.util.find_spec("beartype") is None, (
        "beartype is installed here: the test needs it absent"
    )
    package = copy("micrograd", tmp_path / "micrograd")
    engine = package / "engine.py"
    text = engine.read_text().replace("    def relu(self):", "    @beartype\n    def relu(self):")
    engine.write_text("from beartype import beartype\n" + text)
    nn = package / "nn.py"
    nn.write_text("import not_installed_plotlib as plt\n" + nn.read_text())
    report = run(tmp_path, oracle, sandbox=sandbox)
    assert full(report), by_status(report)
    assert sum("imports beartype, which is not installed" in note for note in report.notes) == 1, report.notes
    assert sum("imports not_installed_plotlib" in note for note in report.notes) == 1, report.notes


def test_using_a_missing_optional_import_costs_the_cases_that_use_it(tmp_path, oracle):
    package = copy("micrograd", tmp_path / "micrograd")
    nn = package / "nn.py"
    text = nn.read_text().replace("class MLP(Module):", "plt.figure()\n\n\nclass MLP(Module):")
    nn.write_text("import not_installed_plotlib as plt\n" + text)
    report = run(tmp_path, oracle)
    mlp = [r for r in report.results if r.id.startswith(MLP)]
    assert mlp and all("not_installed_plotlib is not installed where grading runs" in r.message for r in mlp)
    assert all(r.passed for r in report.results if not r.id.startswith(MLP))


# ---- zips ----


def zipped(src: Path, dest: Path, extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(dest, "w") as archive:
        for path in sorted(src.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(src).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return dest


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_a_zip_is_unpacked_and_graded(tmp_path, oracle, sandbox):
    copy("micrograd", tmp_path / "src" / "hw1" / "micrograd")
    archive = zipped(
        tmp_path / "src", tmp_path / "submission.zip", {"__MACOSX/hw1/micrograd/._engine.py": b"\0"}
    )
    report = run(archive, oracle, sandbox=sandbox)
    assert full(report), by_status(report)
    # a folder that holds only the zip, as an upload does
    (tmp_path / "upload").mkdir()
    shutil.copy(archive, tmp_path / "upload" / "hw1.zip")
    assert full(run(tmp_path / "upload", oracle))


def symlink_member(archive: zipfile.ZipFile, name: str, target: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o120777 << 16
    archive.writestr(info, target)


@pytest.mark.parametrize("hostile", ["escape", "absolute", "symlink", "count", "size"])
def test_hostile_zips_are_refused_with_a_reason(tmp_path, oracle, hostile, monkeypatch):
    from grader import intake

    copy("micrograd", tmp_path / "src" / "micrograd")
    archive = zipped(tmp_path / "src", tmp_path / "sub.zip")
    with zipfile.ZipFile(archive, "a") as z:
        if hostile == "escape":
            z.writestr("../../escaped.py", "x = 1\n")
        elif hostile == "absolute":
            z.writestr("/tmp/absolute.py", "x = 1\n")
        elif hostile == "symlink":
            symlink_member(z, "micrograd/link.py", "/etc/passwd")
        elif hostile == "count":
            monkeypatch.setattr(intake, "MAX_MEMBERS", 2)
        elif hostile == "size":
            monkeypatch.setattr(intake, "MAX_BYTES", 1000)
    report = run(archive, oracle)
    assert report.score == 0
    words = {
        "escape": "leaves the archive",
        "absolute": "leaves the archive",
        "symlink": "is a symbolic link",
        "count": "more than 2 files",
        "size": "more than 1000 bytes",
    }[hostile]
    assert any(words in e for e in report.errors), report.errors
    assert not (tmp_path / "escaped.py").exists() and not Path("/tmp/absolute.py").exists()


# ---- what is graded ----


def test_a_missing_assignment_counts_as_missing_unless_left_out(tmp_path, oracle):
    copy("needle", tmp_path / "needle")
    report = grade(tmp_path, "public", None, oracle=oracle, sandbox=False, keep=few)
    micrograd = [r for r in report.results if r.assignment == "micrograd"]
    assert micrograd and not any(r.passed for r in micrograd)
    assert all(r.passed for r in report.results if r.assignment == "needle")
    assert report.score < report.max_score
    assert any(e.startswith("micrograd is missing: 0 of its") for e in report.errors), report.errors
    narrowed = grade(tmp_path, "public", ["needle"], oracle=oracle, sandbox=False, keep=few)
    assert full(narrowed) and not narrowed.errors


# ---- every front end takes every layout, through the one intake ----

SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
#: the small suite's public micrograd cases: what every front end grades here
SMALL_POINTS = sum(case.points for case in collect(SMALL, ["micrograd"], ("public",)))


def handed_in_folder(dest: Path) -> Path:
    copy("micrograd", dest / "micrograd")
    return dest


def handed_in_nested(dest: Path) -> Path:
    copy("micrograd", dest / "hw" / "micrograd", init=False)
    return dest


def handed_in_loose(dest: Path) -> Path:
    """The package's files without their folder: dropped one by one into an upload."""
    copy("micrograd", dest)
    return dest


def handed_in_loose_in_a_zip(dest: Path) -> Path:
    """A folder holding only a zip of the package's files, zipped without their folder."""
    with tempfile.TemporaryDirectory() as src:
        dest.mkdir(parents=True, exist_ok=True)
        zipped(handed_in_loose(Path(src) / "files"), dest / "files.zip")
    return dest


def _zip_of_nested(archive: Path, escape: bool = False) -> Path:
    with tempfile.TemporaryDirectory() as src:
        handed_in_nested(Path(src))
        extra = {"__MACOSX/hw/micrograd/._engine.py": b"\0"}
        if escape:
            extra["../../escaped.py"] = b"x = 1\n"
        archive.parent.mkdir(parents=True, exist_ok=True)
        return zipped(Path(src), archive, extra)


def handed_in_only_a_zip(dest: Path) -> Path:
    """A folder holding only the student's zip: what Gradescope's upload leaves."""
    _zip_of_nested(dest / "submission.zip")
    return dest


def handed_in_a_zip(dest: Path) -> Path:
    """The zip itself, where a front end takes a file (`grade`, a class's folder)."""
    return _zip_of_nested(dest.with_name(dest.name + ".zip"))


def handed_in_a_hostile_zip(dest: Path) -> Path:
    _zip_of_nested(dest / "submission.zip", escape=True)
    return dest


#: layout -> how it is built at a destination (returns what is handed in)
LAYOUTS: dict[str, Callable[[Path], Path]] = {
    "folder": handed_in_folder,
    "nested": handed_in_nested,
    "loose": handed_in_loose,
    "loose-in-a-zip": handed_in_loose_in_a_zip,
    "only-a-zip": handed_in_only_a_zip,
    "a-zip": handed_in_a_zip,
    "hostile-zip": handed_in_a_hostile_zip,
}
#: the front ends whose submission is always a folder (an upload, a repository, nbgrader's)
FOLDERS_ONLY = {"gradescope", "classroom", "nbgrader"}


@dataclass
class Outcome:
    score: float
    max_score: float
    text: str  # every message, to find a reason in

    @classmethod
    def of(cls, report: Report) -> Outcome:
        text = "\n".join([*report.errors, *(r.message for r in report.results)])
        return cls(report.score, report.max_score, text)


def grade_each(cache: Path, where: Path, layouts: list[str]) -> dict[str, Outcome]:
    """`python -m grader grade` on each, in-process (the intake comes before any engine)."""
    from grader import cli

    found = {}
    for name in layouts:
        sub = LAYOUTS[name](where / name)
        results = where / f"{name}-results.json"
        argv = ["grade", str(sub), "--in-process", "--suite", "public", "--suites", str(SMALL)]
        assert cli.main([*argv, "--cache-dir", str(cache), "--results", str(results)]) == 0
        document = json.loads(results.read_text())
        top = sum(test["max_score"] for test in document["tests"])
        found[name] = Outcome(document["score"], top, json.dumps(document))
    return found


def grade_class(cache: Path, where: Path, layouts: list[str], nbgrader: bool = False) -> dict[str, Outcome]:
    """`python -m grader grade-class` on a class with one student per layout; with
    `nbgrader`, in nbgrader's `submitted/<student>/micrograd/` (the fast path's staging)."""
    from grader import cli

    root = where / "class"
    for name in layouts:
        LAYOUTS[name](root / "submitted" / name / "micrograd" if nbgrader else root / name)
    argv = ["grade-class", str(root), "--suite", "public", "--suites", str(SMALL), "--jobs", "2"]
    assert cli.main([*argv, "--cache-dir", str(cache), "--out", str(where / "out")]) == 0
    with Gradebook(where / "out" / "gradebook.db") as book:
        return {student: Outcome.of(report) for student, report in book.reports()}


def gradescope_each(cache: Path, where: Path, layouts: list[str]) -> dict[str, Outcome]:
    """Gradescope's grader (`autograde --report`, what run_autograder starts) on each layout
    in `submission/`, its workers as the grader's own user."""
    from grader.authoring.gradescope_zip import Settings, suites_digest
    from grader.autograder import main as autograde

    source = where / "source"
    shutil.copytree(SMALL, source / "suites", ignore=shutil.ignore_patterns("__pycache__"))
    cases = collect(source / "suites", ["micrograd"], ("public",))
    (source / "oracle").mkdir()
    (source / "oracle" / "oracle.json").write_text(json.dumps(Oracle(cache).freeze(cases)))
    digest = suites_digest(source / "suites", ["micrograd"])
    settings = Settings(assignments=["micrograd"], suite="public", user="", suites_digest=digest)
    (source / "autograder.json").write_text(settings.to_json())
    found = {}
    for name in layouts:
        root = where / name
        shutil.copytree(source, root / "source")
        LAYOUTS[name](root / "submission")
        assert autograde(root, where / f"{name}.json") == 0
        found[name] = Outcome.of(Report.from_plain(json.loads((where / f"{name}.json").read_text())))
    return found


def classroom_each(cache: Path, where: Path, layouts: list[str]) -> dict[str, Outcome]:
    """GitHub Classroom's command on each layout as the student's repository."""
    from grader.classroom import grade_repository
    from grader.report.classroom import totals

    found = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GRADER_CACHE", str(cache))
        for name in layouts:
            runners = grade_repository(LAYOUTS[name](where / name), SMALL, timeout=10.0, budget=60.0)
            found[name] = Outcome(*totals(runners), json.dumps(runners))
    return found


FRONT_ENDS = {
    "grade": grade_each,
    "grade-class": grade_class,
    "nbgrader": partial(grade_class, nbgrader=True),
    "gradescope": gradescope_each,
    "classroom": classroom_each,
}


def takes(front_end: str) -> list[str]:
    return [name for name in LAYOUTS if not (front_end in FOLDERS_ONLY and name == "a-zip")]


@pytest.fixture(scope="module")
def front_ends(tmp_path_factory, oracle_cache) -> Callable[[str], dict[str, Outcome]]:
    """Each front end's outcome on every layout it takes, graded once (a class at a time)."""
    Oracle(oracle_cache).prepare(collect(SMALL, ["micrograd"], ("public",)), SMALL)
    graded: dict[str, dict[str, Outcome]] = {}

    def outcomes(front_end: str) -> dict[str, Outcome]:
        if front_end not in graded:
            where = tmp_path_factory.mktemp(front_end)
            graded[front_end] = FRONT_ENDS[front_end](oracle_cache, where, takes(front_end))
        return graded[front_end]

    return outcomes


@pytest.mark.parametrize(
    "front_end, layout", [(front_end, layout) for front_end in FRONT_ENDS for layout in takes(front_end)]
)
def test_every_front_end_takes_every_layout(front_ends, front_end, layout, tmp_path):
    outcome = front_ends(front_end)[layout]
    assert outcome.max_score == SMALL_POINTS, outcome
    if layout == "hostile-zip":
        assert outcome.score == 0 and "leaves the archive" in outcome.text, outcome
    else:
        assert outcome.score == SMALL_POINTS, outcome.text


def test_canvas_export_is_a_class_by_its_files_names(tmp_path, oracle_cache):
    """Canvas's "Download Submissions": one flat zip, each file named for its student. Files
    handed in loose, a late zip and a resubmitted file (the later id wins) are each a
    student; two students of one name keep their user ids; every one is graded."""
    from grader import cli

    src = tmp_path / "src"
    src.mkdir()
    engine = (REFERENCE / "micrograd" / "engine.py").read_text()
    (src / "doejane_101_9001_engine.py").write_text("raise SystemExit('an early draft')\n")
    (src / "doejane_101_9007_engine.py").write_text(engine)  # handed in again: a later file id
    (src / "doejane_101_9002_nn.py").write_text((REFERENCE / "micrograd" / "nn.py").read_text())
    zipped(handed_in_folder(tmp_path / "smith"), src / "smithjohn_late_202_9003_micrograd.zip")
    for user, file_id in (("303", "9004"), ("404", "9005")):
        zipped(handed_in_nested(tmp_path / f"lee{user}"), src / f"leejin_{user}_{file_id}_hw1.zip")
    export = zipped(src, tmp_path / "submissions.zip")
    out = tmp_path / "out"
    argv = ["grade-class", str(export), "--suite", "public", "--suites", str(SMALL), "--jobs", "2"]
    assert cli.main([*argv, "--cache-dir", str(oracle_cache), "--out", str(out)]) == 0
    with Gradebook(out / "gradebook.db") as book:
        scores = {student: report.score for student, report in book.reports()}
    assert scores == {s: SMALL_POINTS for s in ("doejane", "leejin_303", "leejin_404", "smithjohn")}


def test_moodle_exports_are_a_class_with_or_without_their_folders(tmp_path):
    """Moodle's files, flat (`<full name>_<id>_assignsubmission_file_<file>`) or in a folder
    per student: each student named without Moodle's suffix, and graded as handed in."""
    from grader.classgrade.layout import discover

    flat = tmp_path / "flat"
    flat.mkdir()
    for path in (REFERENCE / "micrograd").glob("*.py"):
        shutil.copy(path, flat / f"Jane Doe_1234_assignsubmission_file_{path.name}")
    zipped(handed_in_folder(tmp_path / "bo"), flat / "Bo Li_5678_assignsubmission_file_hw1.zip")
    found = discover(zipped(flat, tmp_path / "flat.zip"), tmp_path / "work-flat")
    assert [s.student for s in found] == ["Bo Li", "Jane Doe"]
    assert (found[1].path / "engine.py").is_file() and (found[0].path / "hw1.zip").is_file()

    folders = tmp_path / "folders"
    handed_in_loose(folders / "Jane Doe_1234_assignsubmission_file_")
    handed_in_folder(folders / "Jane Doe_4321_assignsubmission_file_")
    handed_in_folder(folders / "Bo Li_5678_assignsubmission_file_")
    found = discover(folders, tmp_path / "work-folders")
    assert [s.student for s in found] == ["Bo Li", "Jane Doe_1234", "Jane Doe_4321"]


def test_code_outside_every_students_folder_is_not_left_out_silently(tmp_path):
    from grader.classgrade.layout import LayoutError, discover

    handed_in_folder(tmp_path / "class" / "ann")
    shutil.copy(REFERENCE / "micrograd" / "engine.py", tmp_path / "class" / "engine.py")
    (tmp_path / "class" / "roster.csv").write_text("ann\n")  # not code: no student
    with pytest.raises(LayoutError, match=r"holds code outside any student's folder \(engine.py\)"):
        discover(tmp_path / "class", tmp_path / "work")


def test_a_class_folder_of_zips_is_a_class(tmp_path):
    """`ROOT/<student>.zip` is a student, graded again when the zip changes; a student who
    is both a folder and a zip is a question for the instructor, not a guess."""
    from grader.classgrade.hashing import files_hash
    from grader.classgrade.layout import LayoutError, discover

    root = tmp_path / "class"
    ann = handed_in_a_zip(root / "ann")
    handed_in_folder(root / "bo")
    found = discover(root, tmp_path / "work")
    assert [(s.student, s.path) for s in found] == [("ann", ann), ("bo", root / "bo")]
    before = files_hash(ann)
    with zipfile.ZipFile(ann, "a") as archive:
        archive.writestr("notes.txt", "a second try")
    assert files_hash(ann) != before
    handed_in_folder(root / "ann")
    with pytest.raises(LayoutError, match="holds both ann/ and ann.zip"):
        discover(root, tmp_path / "work")
