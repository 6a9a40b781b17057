"""The grader's imports form layers without cycles.

Every module of `grader/` is parsed (not imported) and every import it holds, at the top or
inside a function, is an edge of the import graph: a cycle is a failure, and so is an import
across a layer's boundary. What runs beside student code (`grader/case/`, and the
assignments' folders but their PyTorch oracles) imports nothing trusted; the renderings
(`grader/report/`) import nothing from the verdict.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRADER = REPO / "grader"

#: imports that break the rules today and are on their way out. Each entry is (importer,
#: imported); remove it when its import goes (a test says when).
LEAVING: set[tuple[str, str]] = set()

#: all the worker side may import from the grader (and the package's own `__init__`): so
#: nothing of the verdict, the sandbox, the reports or the pipeline
WORKER_SIDE = ("grader.case", "grader.assignments")
#: layer -> what it must not import
FORBIDDEN = {"grader.report": ("grader.verdict",)}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(GRADER.rglob("*.py"))}


def imported(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The grader's modules one import statement loads: `from P import x` is P's module x
    when there is one, else P itself; a relative import is resolved against `name`."""
    if isinstance(node, ast.Import):
        targets = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, *([node.module] if node.module else [])])
        targets = set()
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            targets.add(submodule if submodule in modules() else base)
    return {target for target in targets if target in modules()}


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the grader's modules it imports anywhere in its text."""
    edges = {}
    for name, path in modules().items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found |= imported(name, path, node)
        edges[name] = frozenset(found - {name})
    return edges


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm,
    iterative): each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def staying(edges: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    return {
        name: frozenset(t for t in targets if (name, t) not in LEAVING) for name, targets in edges.items()
    }


def test_the_graph_sees_every_kind_of_import():
    """Module-level, inside a function, relative, `from package import module`."""
    edges = graph()
    assert "grader.pipeline" in edges["grader.cli"]  # at the top
    assert "grader.authoring.release" in edges["grader.cli"]  # inside cmd_release
    assert "grader.case.define" in edges["grader.case"]  # grader/case/__init__.py
    assert "grader.intake" in edges["grader.pipeline"]  # `from grader import intake`
    assert cycles(
        {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}
    ) == [["a", "b", "c"]]


def test_the_grader_has_no_import_cycle():
    found = cycles(staying(graph()))
    described = [
        " <-> ".join(component)
        + ": "
        + ", ".join(f"{a} -> {b}" for a in component for b in graph()[a] if b in component)
        for component in found
    ]
    assert not found, "import cycles:\n" + "\n".join(described)


def worker_side() -> list[str]:
    """The package's `__init__`, `grader.case` and the assignments' folders but their oracles."""
    return sorted(
        name
        for name in modules()
        if name == "grader"
        or within(name, "grader.case")
        or (within(name, "grader.assignments") and not name.endswith(".oracle"))
    )


@pytest.mark.parametrize("name", worker_side())
def test_the_worker_side_imports_nothing_trusted(name):
    """It is copied into the sandbox and shipped to students: no verdict, no oracle."""
    for target in graph()[name]:
        assert target == "grader" or any(within(target, allowed) for allowed in WORKER_SIDE), (
            f"{name} imports {target}"
        )
        assert not target.endswith(".oracle"), f"{name} imports an oracle: {target}"


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_each_layer_imports_nothing_it_must_not(layer):
    edges = staying(graph())
    crossing = [
        f"{name} -> {target}"
        for name, targets in sorted(edges.items())
        if within(name, layer)
        for target in sorted(targets)
        if any(within(target, forbidden) for forbidden in FORBIDDEN[layer])
    ]
    assert not crossing, f"{layer} must not import {', '.join(FORBIDDEN[layer])}: " + "; ".join(crossing)


def test_every_import_on_its_way_out_is_still_there():
    """An entry of LEAVING whose import is gone must go too, or the list would hide a new one."""
    gone = sorted(f"{a} -> {b}" for a, b in LEAVING if b not in graph().get(a, ()))
    assert not gone, f"no longer imported: remove from LEAVING in {Path(__file__).name}: {'; '.join(gone)}"


def printed_by(code: str) -> tuple[list[str], str]:
    """What `python -c CODE`, run fresh in the checkout, prints: its words, and all it said."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    return done.stdout.split(), done.stdout[-3000:] + done.stderr[-2000:]


def test_a_students_micrograd_run_never_imports_numpy():
    """A student's run of the micrograd suite grades scalars: numpy (a third of what a run
    imports) stays out of it, so the kit's own modules must import it only where arrays are
    (bench/bench_bundle.py measures what that saves)."""
    words, said = printed_by(
        "import sys, pytest; "
        "code = pytest.main(['-q', '-p', 'no:cacheprovider', '-k', 'ops or deep', "
        "'tests/public/micrograd']); "
        "print('numpy' in sys.modules, int(code))"
    )
    assert words[-2:] == ["False", "0"], said


def test_the_command_line_starts_without_numpy():
    """`python -m grader` loads its commands without numpy: the sandbox needs only where numpy
    is installed (`grader.sandbox.bwrap.numpy_dirs` says what that saves). A command imports
    it where it meets arrays."""
    words, said = printed_by("import sys, grader.cli; print('numpy' in sys.modules)")
    assert words[-1:] == ["False"], said


def test_notebooks_are_read_without_the_iri_grammar_and_it_stays_importable():
    """`grader.authoring.jupyter`: nbformat imported through it leaves jsonschema's IRI
    grammar unloaded (1.7 s of every notebook-reading process), validates notebooks as
    before, and a later direct import of the grammar works as usual."""
    import importlib.util

    if importlib.util.find_spec("nbformat") is None:
        pytest.skip("nbformat is not installed (the nbgrader extra)")
    words, said = printed_by(
        "import sys\n"
        "from grader.authoring.jupyter import import_nbformat\n"
        "nbformat = import_nbformat()\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1 + 1')])\n"
        "nbformat.validate(nb)\n"
        "print('rfc3987_syntax' in sys.modules)\n"
        "try:\n"
        "    import rfc3987_syntax\n"
        "except ImportError as exc:\n"
        "    print('blocked' if 'None in sys.modules' in str(exc) else 'missing')\n"
        "else:\n"
        "    print('works' if rfc3987_syntax.is_valid_syntax('iri', 'https://example.org/') else 'broken')\n"
    )
    installed = importlib.util.find_spec("rfc3987_syntax") is not None
    assert words == ["False", "works" if installed else "missing"], said
