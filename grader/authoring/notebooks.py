"""Write the nbgrader course's source notebooks from reference/ and the graded cases.

    assignments/source/<assignment>/<assignment>.ipynb

A notebook has, in order: an introduction; a setup cell with the package's imports; the
package's code, one cell per top-level definition (a class and the helper that applies
it share one), each after the explanation written for it in TEXT; a cell that draws an
expression graph; then one autograded test cell per topic of `grader.notebook.topics`.

Code cells keep reference/'s `### BEGIN SOLUTION` regions, which `nbgrader
generate_assignment` strips (a region's `# hint:` line is moved above it so that the
student still sees it); a cell without a region is locked, so autograding restores it.
Every code cell records the module it came from (`metadata.grader.module`): that is how
`grader.authoring.nbgrader_io.extract` turns a submitted notebook back into a package.

A test cell is worth its topic's public and hidden points. It is one call,
`grade_cell(...)`, whose value (the points earned) nbgrader takes as partial credit; the
call runs the hidden cases only when nbgrader autogrades. So the cell's source is the same
in the source, the released and the submitted notebook: nbgrader's checksum of it never
changes, and `nbgrader autograde` has nothing to warn about.

`check` reports drift between the committed notebooks and what would be generated.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from grader.authoring.jupyter import import_nbformat
from grader.case.define import collect
from grader.notebook import LAYOUT, Topic, in_scope, topics
from grader.scope import Scope
from grader.verdict.oracle import oracle_from

if TYPE_CHECKING:
    import nbformat

BEGIN = "### BEGIN SOLUTION"
COURSE = "assignments"
#: modules that are one cell each (nothing in them to write)
WHOLE = {"init"}
KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}

INTRO = {
    "micrograd": """# micrograd: a scalar autograd engine

You will write the backward half of a tiny automatic differentiation engine. A `Value`
holds one number; every arithmetic operation on Values builds a new Value that remembers
its inputs, so running an expression forward builds a graph. `backward()` walks that graph
from the output to the inputs and applies the chain rule one operation at a time.

Fill in every cell that says `YOUR CODE HERE`, run the notebook from the top, and read the
test cells at the end: each one runs the course's cases on your classes and on PyTorch and
prints what differs. The points a test cell prints are the points it is worth to you.""",
    "needle": """# needle: tensors and reverse-mode autodiff

needle is a small tensor library on NumPy. A `Tensor` is a node of a graph; each operation
is an `Op` with two methods: `compute` (the forward pass, on NumPy arrays) and `gradient`
(the backward pass, written with needle's own ops). You will write the gradients, the
topological sort and the backward pass.

Every cell shares one namespace: where the code says `ops.X` or `init.X` it means the
definitions of this notebook. Run the notebook from the top, then read the test cells.""",
}

SETUP = {
    "micrograd": "Imports the code below needs.",
    "needle": "Imports the code below needs. `ops` and `init` name this notebook's own namespace, "
    "as the package's modules would.",
}

#: the explanation above a code cell, by (module, first name the cell defines)
TEXT = {
    ("engine", "Value"): """## Value: one number and its gradient rule

Each operation (`__add__`, `__mul__`, ...) computes its result and then defines a small
function `_backward`. That function is a **closure**: it captures `self`, `other` and `out`,
so when `backward()` calls it much later it still knows which nodes it connects. It is the
operation's gradient rule: given `out.grad` (the derivative of the final output with
respect to `out`), add to each input's `grad` its share, by the chain rule.

Rules add with `+=`: a Value used twice (`a * a`, or `a` feeding two ops) receives one
contribution per use, and the chain rule sums them.

The **reflected operators** at the end (`__radd__`, `__rmul__`, ...) make `2 * x` work:
Python first asks `int.__mul__`, which does not know Value and returns `NotImplemented`;
then it tries `x.__rmul__(2)`. Being compositions of the primitives, they need no rule.

`backward()` has two tasks. First the order: the closures must run in reverse topological
order (a node's gradient is complete only once every node that uses it has passed its share
back). Use a loop, not recursion: a chain of 100 000 operations must work. Then the pass:
start every interior node's gradient from zero (unlike Karpathy's micrograd, so a second
`backward()` adds to the leaves without counting the first one's interior gradients again),
seed the output with 1 and run the closures.""",
    ("nn", "Module"): """## Neurons, layers, an MLP

`Module.zero_grad` resets every parameter's gradient. Why is it needed? Because every
rule adds into the leaves' `grad`: without a reset, each training step would use the sum
of all the gradients computed so far.""",
    ("nn", "Neuron"): """A `Neuron` defines `__call__`, so a neuron is called like a function:
`n(x)` computes `relu(w . x + b)`. Layers and the MLP are callables built from callables.""",
    ("autograd", "LAZY_MODE"): """## The graph

Two switches and a type. `LAZY_MODE`: in **eager** mode (the default) every op computes its
data at once; in **lazy** mode ops only build the graph, and data is computed when someone
asks for it (`realize_cached_data`). Gradients must be the same either way.
`TENSOR_COUNTER` counts live nodes: a cheap way to see graphs that are kept alive.""",
    ("autograd", "Op"): """An `Op` computes (`compute`, NumPy in and out) and differentiates
(`gradient`): given the adjoint of its output it returns one partial adjoint per input.""",
    ("autograd", "Value"): """`make_from_op` is where eager and lazy differ. In eager mode, a
result that needs no gradient is returned as a leaf, so its graph can be freed.""",
    ("autograd", "Tensor"): """## Tensor

**The detach memory trap.** Every Tensor keeps its inputs alive, and their inputs. Summing
losses over a training loop with `total = total + loss` keeps every step's graph in
memory. `detach()` (and `.data`) return a new leaf that shares the data and has no inputs:
`total = total + loss.detach()` keeps only numbers. Gradients never flow through a
detached tensor.""",
    ("autograd", "compute_gradient_of_variables"): """## Backward

Gradients are **Tensors built with needle ops**, not NumPy arrays: the backward pass is
itself a graph, so a gradient can be differentiated again (higher-order gradients: the
gradient of `x.grad` with respect to `x` is the second derivative).

A node used by several ops receives one partial adjoint from each; its gradient is their
sum. Visit nodes in reverse topological order so that the list is complete when you get to
a node.""",
    ("autograd", "find_topo_sort"): """Post-order depth-first search: a node comes after all
of its inputs, visited in order. Graphs may be far deeper than Python's recursion limit (a
chain of 10^5 ops), so keep your own stack.""",
    ("ops", "_keep_float_dtype"): """## The ops

Each op below has `compute` (given) and `gradient` (yours). Write gradients only with
needle ops on Tensors (`out_grad * node.inputs[0]`, `exp(x)`, `summation(...)`), never in
raw NumPy: that is what makes higher-order gradients work.""",
    ("ops", "Transpose"): """## Shapes

`Transpose` and `Reshape` move numbers around: their gradient moves them back.""",
    ("ops", "BroadcastTo"): """Broadcasting copies an element to many places; each copy
sends its gradient back to it, so the gradient of a broadcast is a **sum** over the axes that
broadcasting added or stretched (`_sum_to_shape`).""",
    ("ops", "Summation"): """Summation is broadcasting's mirror: its gradient broadcasts
`out_grad` back over the summed axes.""",
    ("ops", "MatMul"): """`MatMul` multiplies the last two axes; leading (batch) axes
broadcast, so its gradients are summed back to each input's shape.""",
    ("init", "rand"): """## Making tensors

Leaves that do not require gradients unless asked.""",
}

#: what the picture cell's backward() line says of itself
PICTURE_COMMENT = "# runs backward(), and stops it if it never returns"
DRAW = {
    "micrograd": (
        "## Look at a graph\n\nEach box is a Value: its data and its gradient after `backward()`. "
        "(Drawing needs Graphviz's `dot`.)",
        'a = Value(2.0, label="a")\nb = Value(-3.0, label="b")\nc = a * b + a\nc.label = "c"\n\n'
        "from grader.notebook import backward_for_picture\nfrom grader.report.draw import draw_dot\n\n"
        f"backward_for_picture(c)  {PICTURE_COMMENT}\ndraw_dot(c)",
    ),
    "needle": (
        "## Look at a graph\n\nEach box is a Tensor with its op. (Drawing needs Graphviz's `dot`.)",
        'x = Tensor(numpy.array([1.0, 2.0]), dtype="float64")\ny = summation(exp(x) * x)\n\n'
        "from grader.notebook import backward_for_picture\nfrom grader.report.draw import draw_dot\n\n"
        f"backward_for_picture(y)  {PICTURE_COMMENT}\ndraw_dot(y)",
    ),
}


@dataclass
class Chunk:
    module: str
    name: str  # the first name it defines
    source: str

    @property
    def has_solution(self) -> bool:
        return BEGIN in self.source


@dataclass
class Split:
    head: str  # docstring and imports
    chunks: list[Chunk]
    tail: str  # imports at the end (needle's `from . import init, ops`)


def _names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.ClassDef | ast.FunctionDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _is_helper(node: ast.stmt) -> bool:
    """`def add(a, b): return EWiseAdd()(a, b)`: a function of one return statement."""
    return isinstance(node, ast.FunctionDef) and len(node.body) == 1 and isinstance(node.body[0], ast.Return)


def split_module(text: str, module: str) -> Split:
    """A module's head (docstring, imports), its top-level definitions as cells, its tail."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    body = tree.body
    first = next(
        (i for i, n in enumerate(body) if not isinstance(n, ast.Import | ast.ImportFrom | ast.Expr)), 0
    )
    last = len(body)
    while last > first and isinstance(body[last - 1], ast.Import | ast.ImportFrom):
        last -= 1

    def start(node: ast.stmt, previous_end: int) -> int:
        """The node's first line, comments right above it included (0-based)."""
        line = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        while line > previous_end and lines[line - 1].lstrip().startswith("#"):
            line -= 1
        return line

    head_end = (
        start(body[first], body[first - 1].end_lineno if first else 0) if body[first:last] else len(lines)
    )
    groups: list[list[ast.stmt]] = []
    for node in body[first:last]:
        previous = groups[-1] if groups else None
        plain = not isinstance(node, ast.ClassDef | ast.FunctionDef)
        if previous and (
            # a class and the helper that applies it
            (_is_helper(node) and isinstance(previous[0], ast.ClassDef) and len(previous) == 1)
            # constants together
            or (plain and not isinstance(previous[-1], ast.ClassDef | ast.FunctionDef))
            # a module with nothing to write is one cell
            or module in WHOLE
        ):
            previous.append(node)
        else:
            groups.append([node])
    tail_start = start(body[last], body[last - 1].end_lineno) if last < len(body) else len(lines)
    starts = []
    for i, group in enumerate(groups):
        previous_end = groups[i - 1][-1].end_lineno if i else body[first - 1].end_lineno if first else 0
        starts.append(start(group[0], previous_end))
    # a chunk runs up to the next one, so the comments after its last statement come along
    ends = [*starts[1:], tail_start]
    chunks = [
        Chunk(module, _names(group[0])[0], "".join(lines[begin:end]).strip("\n"))
        for group, begin, end in zip(groups, starts, ends, strict=True)
    ]
    return Split("".join(lines[:head_end]), chunks, "".join(lines[tail_start:]))


def _move_hints(source: str) -> str:
    """Put each region's `# hint:` line above its BEGIN marker (nbgrader drops the region)."""
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if (
            line.strip().startswith(BEGIN)
            and i + 1 < len(lines)
            and lines[i + 1].strip().startswith("# hint:")
        ):
            out += [lines[i + 1], line]
            i += 2
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _imports(split: Split, package: str) -> list[str]:
    """The head's imports that still mean something in one namespace."""
    found = []
    for node in ast.parse(split.head).body:
        if isinstance(node, ast.Import):
            found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module.split(".")[0] != package:
            found.append(ast.unparse(node))
    return found


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_").lower()


def package_files(reference: Path, assignment: str) -> dict[str, Split]:
    return {
        module: split_module((reference / assignment / f"{module}.py").read_text(), module)
        for module in LAYOUT[assignment]
    }


def test_cell_source(assignment: str, topic: Topic, scale: float = 1.0, without: tuple[str, ...] = ()) -> str:
    """The cell's code; a scope that leaves ops out or scales the points is passed on."""
    extra = (f", scale={scale!r}" if scale != 1.0 else "") + (f", without={without!r}" if without else "")
    call = f"grade_cell({assignment!r}, {topic.name!r}, globals(){extra})"
    return f"from grader.notebook import grade_cell\n\n{call}"


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False, points: float = 0) -> dict:
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": 3,
        "solution": solution,
    }
    if grade:
        meta["points"] = points
    return meta


Scoped = tuple[Topic, float, tuple[str, ...]]


def scoped_topics(suites: Path, assignment: str, scope: Scope | None) -> list[Scoped]:
    """Each topic the scope grades, with only its cases in scope and their scaled points, and
    the scale and the left-out needs its test cell passes on to `grade_cell`."""
    if scope is None:
        return [(topic, 1.0, ()) for topic in topics(assignment, suites)]
    without = tuple(sorted(scope.excluded))
    oracle = oracle_from()
    prepared: set[str] = set()

    def needs(case) -> set[str]:
        if case.suite not in prepared:  # one oracle file per suite
            prepared.add(case.suite)
            oracle.prepare(collect(suites, [assignment], (case.suite,)), suites)
        return oracle.needs(case)

    chosen = []
    for topic in topics(assignment, suites):
        if topic.name in scope.topics:
            scale = scope.topics[topic.name]
            kept = in_scope(topic, needs, scale, without)
            if kept.public or kept.hidden:
                chosen.append((kept, scale, without))
    return chosen


def build(
    reference: Path, suites: Path, assignment: str, scope: Scope | None = None
) -> nbformat.NotebookNode:
    nbformat = import_nbformat()  # here: grading notebooks (`nbgrader_io`) never needs it

    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNEL, "language_info": {"name": "python"}}
    cells = nb.cells

    def markdown(text: str) -> None:
        cells.append(nbformat.v4.new_markdown_cell(text))

    def code(source: str, grade_id: str, module: str | None = None, **flags) -> None:
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata = {"nbgrader": _nbgrader(grade_id, **flags)}
        if module is not None:
            cell.metadata["grader"] = {"module": module}
        cells.append(cell)

    files = package_files(reference, assignment)
    markdown(INTRO[assignment])
    imports = list(dict.fromkeys(line for split in files.values() for line in _imports(split, assignment)))
    if assignment == "needle":
        imports += ["import sys", "", "ops = init = sys.modules[__name__]"]
    markdown(SETUP[assignment])
    code("\n".join(imports), "setup")
    for module, split in files.items():
        for chunk in split.chunks:
            if (module, chunk.name) in TEXT:
                markdown(TEXT[module, chunk.name])
            grade_id = f"{module}_{_slug(chunk.name)}"
            code(_move_hints(chunk.source), grade_id, module, solution=chunk.has_solution)
    text, source = DRAW[assignment]
    markdown(text)
    code(source, "draw_graph")
    markdown(
        "## Tests\n\nOne cell per topic. Each runs the topic's cases on your classes and on PyTorch, "
        "prints every case that differs with its diagnostic, and ends with the points earned. "
        "Hidden cases run when the assignment is graded."
    )
    for topic, scale, without in scoped_topics(suites, assignment, scope):
        markdown(
            f"### {topic.name}\n\n{len(topic.public)} public cases ({topic.points('public'):g} points), "
            f"{topic.points('hidden'):g} more points in hidden cases."
        )
        code(
            test_cell_source(assignment, topic, scale, without),
            f"test_{_slug(topic.name)}",
            grade=True,
            points=topic.points(),
        )
    for i, cell in enumerate(cells):
        cell["id"] = f"{assignment}-{i:03d}"
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def notebook_path(course: Path, assignment: str) -> Path:
    return course / "source" / assignment / f"{assignment}.ipynb"


def generate(
    reference: Path,
    suites: Path,
    course: Path,
    names: tuple[str, ...] = tuple(LAYOUT),
    scopes: Mapping[str, Scope] | None = None,
) -> list[Path]:
    """Write the notebooks; with `scopes`, each for its assignment's scope (`grader.scope`)."""
    written = []
    for assignment in names:
        path = notebook_path(course, assignment)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(build(reference, suites, assignment, (scopes or {}).get(assignment))))
        written.append(path)
    return written


def check(
    reference: Path,
    suites: Path,
    course: Path,
    names: tuple[str, ...] = tuple(LAYOUT),
    scopes: Mapping[str, Scope] | None = None,
) -> list[str]:
    problems = []
    for assignment in names:
        path = notebook_path(course, assignment)
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif path.read_text() != render(build(reference, suites, assignment, (scopes or {}).get(assignment))):
            problems.append(f"{path} differs from what reference/ and the suites generate")
    return problems
