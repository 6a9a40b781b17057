"""Each submission is imported fresh from its own directory: nothing leaks between two."""

import shutil
import sys
from pathlib import Path

import pytest

from grader.case.loading import SubmissionError, load_package, present_packages

REPO = Path(__file__).resolve().parents[2]


def make(tmp_path, name, engine_source):
    root = tmp_path / name
    shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
    (root / "micrograd" / "engine.py").write_text(engine_source)
    return root


def test_two_submissions_in_one_process_do_not_see_each_other(tmp_path):
    a = make(tmp_path, "a", "class Value:\n    who = 'a'\n")
    b = make(tmp_path, "b", "class Value:\n    who = 'b'\n")
    first = load_package(a, "micrograd", ("engine",))
    second = load_package(b, "micrograd", ("engine",))
    assert first["engine"].Value.who == "a"
    assert second["engine"].Value.who == "b"
    assert "micrograd" not in sys.modules
    assert str(a) not in sys.path and str(b) not in sys.path


def test_nn_uses_the_same_submissions_engine(tmp_path):
    modules = load_package(REPO / "reference", "micrograd", ("engine", "nn"))
    assert modules["nn"].Value is modules["engine"].Value


def test_a_sibling_imported_by_its_bare_name_is_the_same_module(tmp_path):
    """`from engine import Value` in nn.py works as it does when the student runs nn.py from
    inside micrograd/: one module under both names, so nn's Value is engine's Value; and two
    submissions doing so still do not see each other."""
    roots = []
    for name in ("a", "b"):
        root = tmp_path / name
        shutil.copytree(REPO / "reference" / "micrograd", root / "micrograd")
        nn = root / "micrograd" / "nn.py"
        bare = nn.read_text().replace("from micrograd.engine import Value", "from engine import Value")
        nn.write_text(bare)
        assert "from engine import Value" in nn.read_text()
        (root / "micrograd" / "engine.py").write_text(
            (REPO / "reference" / "micrograd" / "engine.py").read_text() + f"\nWHO = {name!r}\n"
        )
        roots.append(root)
    first, second = (load_package(root, "micrograd", ("engine", "nn")) for root in roots)
    assert first["nn"].Value is first["engine"].Value and first["engine"].WHO == "a"
    assert second["nn"].Value is second["engine"].Value and second["engine"].WHO == "b"
    assert "engine" not in sys.modules


def test_missing_package_is_a_clear_error(tmp_path):
    with pytest.raises(SubmissionError, match="no package 'micrograd'"):
        load_package(tmp_path, "micrograd")
    assert present_packages(tmp_path) == []


def test_syntax_error_names_file_and_line(tmp_path):
    root = make(tmp_path, "broken", "class Value:\n    def f(self)\n        pass\n")
    with pytest.raises(SubmissionError, match=r"does not compile: .*engine.py, line 2"):
        load_package(root, "micrograd", ("engine",))


def test_import_error_is_reported(tmp_path):
    root = make(tmp_path, "imports", "from micrograd.helpers import thing\n")
    with pytest.raises(SubmissionError, match="ModuleNotFoundError"):
        load_package(root, "micrograd", ("engine",))
