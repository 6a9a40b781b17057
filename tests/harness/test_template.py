"""student_template/ is generated from reference/: it must not drift or leak solutions."""

import ast
import shutil
from pathlib import Path

import pytest

from grader import assignments
from grader.authoring.template import MarkerError, check, generate, regions, strip_solutions

REPO = Path(__file__).resolve().parents[2]


def test_committed_template_matches_reference():
    assert check(REPO / "reference", REPO / "student_template") == []


def test_stub_keeps_indentation_and_uses_the_hint():
    text = (
        "def f(x):\n"
        "    y = x + 1\n"
        "    ### BEGIN SOLUTION\n"
        "    # hint: double it\n"
        "    return 2 * y\n"
        "    ### END SOLUTION\n"
    )
    out = strip_solutions(text)
    assert out == (
        "def f(x):\n    y = x + 1\n    # YOUR CODE HERE\n    raise NotImplementedError('double it')\n"
    )
    namespace = {}
    exec(out, namespace)
    with pytest.raises(NotImplementedError, match="double it"):
        namespace["f"](1)


@pytest.mark.parametrize(
    "text",
    [
        "### BEGIN SOLUTION\nx = 1\n",
        "x = 1\n### END SOLUTION\n",
        "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n### END SOLUTION\n",
    ],
    ids=["unclosed", "end-without-begin", "nested"],
)
def test_unbalanced_markers_are_errors(text):
    with pytest.raises(MarkerError):
        strip_solutions(text)


@pytest.fixture
def copies(tmp_path):
    reference, template = tmp_path / "reference", tmp_path / "template"
    shutil.copytree(REPO / "reference", reference, ignore=shutil.ignore_patterns("__pycache__"))
    generate(reference, template)
    assert check(reference, template) == []
    return reference, template


def test_drift_is_reported(copies):
    reference, template = copies
    engine = reference / "micrograd" / "engine.py"
    engine.write_text(engine.read_text().replace("import math", "import math\nimport os"))
    assert any("differs" in p for p in check(reference, template))


def test_solution_line_in_template_is_reported(copies):
    reference, template = copies
    engine = template / "micrograd" / "engine.py"
    engine.write_text(
        engine.read_text() + "\n# self.grad += other.data * out.grad\nself.grad += other.data * out.grad\n"
    )
    problems = check(reference, template)
    assert any("solution line: self.grad += other.data * out.grad" in p for p in problems)


def test_missing_and_extra_files_are_reported(copies):
    reference, template = copies
    (template / "needle" / "init.py").unlink()
    (template / "micrograd" / "extra.py").write_text("x = 1\n")
    problems = check(reference, template)
    assert any("init.py is missing" in p for p in problems)
    assert any("extra.py is not in" in p for p in problems)


def test_every_gradient_rule_is_left_to_write():
    """The SPEC's list: micrograd's closures and backward, needle's gradients and sorts."""
    engine = (REPO / "student_template" / "micrograd" / "engine.py").read_text()
    assert engine.count("def _backward():\n            # YOUR CODE HERE") == 8
    assert "def backward(self):" in engine
    ops = (REPO / "student_template" / "needle" / "ops.py").read_text()
    assert ops.count("def gradient(") == ops.count("raise NotImplementedError") - ops.count(
        "def _sum_to_shape"
    )
    autograd = (REPO / "student_template" / "needle" / "autograd.py").read_text()
    for name in ("def find_topo_sort", "def compute_gradient_of_variables"):
        body = autograd.split(name, 1)[1].split("\ndef ", 1)[0]
        assert "raise NotImplementedError" in body


def given_functions(package: Path) -> set[str]:
    """The qualified names (as a traceback names them) of the functions in `package` in
    which no solution region starts: the code the template gives whole."""
    found: set[str] = set()

    def visit(node: ast.AST, prefix: str, starts: list[int]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not any(child.lineno <= line <= (child.end_lineno or child.lineno) for line in starts):
                    found.add(prefix + child.name)
                visit(child, f"{prefix}{child.name}.", starts)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", starts)

    for path in sorted(package.glob("*.py")):
        source = path.read_text()
        starts = [region.start + 1 for region in regions(source.splitlines(), str(path))]
        visit(ast.parse(source), "", starts)
    return found


@pytest.mark.parametrize("name", assignments.NAMES)
def test_the_given_functions_a_hang_passes_over_are_the_templates(name):
    """A case stuck in a function the template gives whole is laid at the student's code that
    called it (`grader.case.hang.where`): the assignment's GIVEN lists exactly those."""
    assert assignments.given(name) == given_functions(REPO / "reference" / name)
