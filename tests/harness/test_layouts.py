"""Layouts real students hand in: each is graded as its code deserves, or told what is wrong.

Every layout is built in tmp_path from reference/ copies, then graded on a few public cases
(the MLP ones among them) in-process; the layouts that change what the sandbox must copy
are graded in the sandbox too.
"""

from __future__ import annotations

import importlib.util
import shutil
import zipfile
from pathlib import Path

import pytest

from grader.case.define import Case
from grader.case.loading import SubmissionError, locate
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


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Oracle:
    return Oracle(tmp_path_factory.mktemp("layouts-oracle"))


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


def test_debris_and_tests_folders_are_not_packages(tmp_path):
    copy("micrograd", tmp_path / "__MACOSX" / "micrograd")
    (tmp_path / "tests" / "micrograd").mkdir(parents=True)
    (tmp_path / "tests" / "micrograd" / "test_engine.py").write_text("")
    copy("micrograd", tmp_path / "src" / "micrograd")
    assert locate(tmp_path, "micrograd", ("engine.py",)).path == tmp_path / "src" / "micrograd"


def test_nothing_found_says_what_was_found_and_where(tmp_path, oracle):
    shutil.copy(REFERENCE / "micrograd" / "engine.py", tmp_path / "engine.py")
    (tmp_path / "notes.txt").write_text("my engine")
    (tmp_path / "hw").mkdir()
    report = run(tmp_path, oracle)
    message = report.results[0].message
    assert "no package 'micrograd'" in message and "it holds: engine.py, hw/, notes.txt" in message
    assert "engine.py belongs in a folder named micrograd/" in message
    assert report.score == 0 and all(r.message.startswith(message) for r in report.results)


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
