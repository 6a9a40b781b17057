"""The nbgrader course's submissions, without running a kernel: the fast path's parts.

- `extract` turns a submitted notebook back into a submission directory with the package
  layout (`micrograd/engine.py`, ...): each code cell that came from a module (its
  `metadata.grader.module`, set by the generator) goes to that module, after the head
  (docstring, imports) and before the tail of reference/'s file. Locked cells take the source
  notebook's text when it is given, as `nbgrader autograde` restores them. A cell's IPython
  commands (`%time ...`, `!pip ...`), which a kernel runs and a module cannot hold, become
  `pass` (`as_python`); what a cell the student added defines (a helper, an import, a
  constant) joins the module of the graded cell above it, and what it runs does not
  (`definitions`).
- `cell_scores` sums a report's case scores per test cell (one per topic); `cell_outputs`
  adds what each test cell prints when nbgrader autogrades it (`grader.report.cell.printed`).
- `write_grades` stores those scores in nbgrader's gradebook.db through nbgrader's own
  `Gradebook` (one Grade per grade cell, as `auto_score`) and makes
  `autograded/<student>/<assignment>/` with the submitted timestamp: its notebook has the
  locked cells restored, no output but the test cells', and each test cell's output as the
  kernel would print it, so that `nbgrader export`, `generate_feedback` and formgrader show
  the submission as autograded, with the same diagnostics.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import json
import re
import shutil
import textwrap
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.authoring.jupyter import import_nbgrader
from grader.authoring.notebooks import _slug, package_files
from grader.case.loading import UNPARSABLE
from grader.notebook import LAYOUT
from grader.pipeline import REPO
from grader.report import places
from grader.report.cell import printed
from grader.report.model import CaseResult


class NotebookError(ValueError):
    """A submitted notebook that cannot be read: the student's zero, with this reason."""


@dataclass
class Cell:
    """What the fast path reads of a notebook cell."""

    cell_type: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)


def read_cells(path: str | Path) -> list[Cell]:
    """A notebook's cells, read as the JSON it is (format 4, as Jupyter saves it). A class
    means many notebooks, of which three fields a cell matter: nbformat's validation would
    cost more than the grading of some of them (its imports alone take a second)."""
    try:
        with open(path, encoding="utf-8") as fh:
            nb = json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # (JSON nested too deep)
        raise NotebookError(f"{Path(path).name} cannot be read as a notebook: {exc}"[:300]) from None
    cells = nb.get("cells") if type(nb) is dict else None
    if type(cells) is not list or nb.get("nbformat") != 4:
        raise NotebookError(f"{Path(path).name} is not a Jupyter notebook of format 4")
    found = []
    for cell in cells:
        if type(cell) is not dict:
            raise NotebookError(f"{Path(path).name} has a cell that is not an object")
        source = cell.get("source", "")
        text = "".join(source) if type(source) is list and all(type(s) is str for s in source) else source
        metadata = cell.get("metadata")
        if type(text) is not str or type(metadata or {}) is not dict:
            raise NotebookError(f"{Path(path).name} has a malformed cell")
        # what the fast path reads of the metadata is kept only where it has its form
        kept = {key: value for key, value in (metadata or {}).items() if type(value) is dict}
        found.append(Cell(str(cell.get("cell_type", "")), text, kept))
    return found


def grade_id(cell: Cell) -> str | None:
    """The cell's nbgrader id, if it has one that is a string."""
    found = cell.metadata.get("nbgrader", {}).get("grade_id")
    return found if type(found) is str and found else None


def _cells_by_id(cells: list[Cell]) -> dict[str, Cell]:
    return {grade_id(c): c for c in cells if grade_id(c)}


def locked_sources(source: Path) -> dict[str, str]:
    """Grade cell id -> text of each locked cell of the source notebook (what autograding
    restores); nothing if there is no source notebook."""
    if not source.is_file():
        return {}
    cells = _cells_by_id(read_cells(source))
    return {
        key: cell.source for key, cell in cells.items() if cell.metadata.get("nbgrader", {}).get("locked")
    }


def extract(
    notebook: str | Path,
    directory: str | Path,
    assignment: str,
    source: str | Path | None = None,
    reference: Path = REPO / "reference",
) -> Path:
    """Write the notebook's code as `directory/<assignment>/...`; returns `directory`.
    Beside it, where each module's lines came from (`grader.report.places`), so that
    messages name the cells. `NotebookError` if the notebook cannot be read."""
    cells = read_cells(notebook)
    originals = _cells_by_id(read_cells(source)) if source else {}
    order = LAYOUT[assignment]
    #: module -> its chunks of code: (text, the cell it came from as `places.cell_label` names
    #: it, None for the kit's; the cell's lines before the chunk's first)
    bodies: dict[str, list[tuple[str, str | None, int]]] = {module: [] for module in order}
    files = package_files(reference, assignment)
    above = order[0]  # the module of the last graded cell above: a student's own cell joins it
    #: module -> the names students' own cells defined in it, and those each module imported
    shared: dict[str, set[str]] = {module: set() for module in order}
    imported: dict[str, set[str]] = {module: set() for module in order}
    for cell in cells:
        module = cell.metadata.get("grader", {}).get("module")
        if cell.cell_type != "code":
            continue
        if type(module) is str and module in bodies:
            # in a kernel, a later module's cells see what an own cell above defined in another
            for earlier in order[: order.index(module)]:
                if names := sorted(shared[earlier] - imported[module]):
                    bodies[module].append((f"from .{earlier} import {', '.join(names)}", None, 0))
                    imported[module].update(names)
            text = cell.source
            if cell.metadata.get("nbgrader", {}).get("locked") and grade_id(cell) in originals:
                text = originals[grade_id(cell)].source
            code = as_python(text)
            lead = len(code) - len(code.lstrip("\n"))  # blank lines the chunk drops
            bodies[module].append((code.strip("\n"), places.cell_label(text), lead))
            above = module
        elif not cell.metadata.get("nbgrader"):  # a cell the student added: what it defines
            known = bound_names("\n".join([files[above].head, *(c for c, _, _ in bodies[above])]))
            label = places.cell_label(cell.source)
            for defined, offset in definitions(cell.source, known):
                bodies[above].append((defined, label, offset))
                shared[above].update(bound_names(defined))
    package = Path(directory) / assignment
    if package.exists():
        shutil.rmtree(package)
    package.mkdir(parents=True)
    shutil.copy(reference / assignment / "__init__.py", package / "__init__.py")
    where = places.load(Path(directory)) or {}  # (the other assignment's, if extracted here too)
    for module, split in files.items():
        text, where[f"{module}.py"] = split.head, []
        for k, (code, label, lead) in enumerate(bodies[module]):
            text += "\n\n\n" if k else ""
            if label is not None:
                where[f"{module}.py"].append([text.count("\n") + 1, code.count("\n") + 1, label, lead])
            text += code
        text += "\n"
        if split.tail:
            text += "\n\n" + split.tail
        (package / f"{module}.py").write_text(text)
    places.write(Path(directory), where)
    return Path(directory)


def bound_names(code: str) -> set[str]:
    """The names a module's code binds at its top level (its imports, functions, classes and
    assignments): what a student's own cell below it may use as it is defined."""
    try:
        tree = ast.parse(code)
    except UNPARSABLE:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _defines_only(node: ast.stmt, known: set[str]) -> bool:
    """Does defining `node` run nothing but what it defines, and use only `known` names? A
    function's decorators and defaults, a class's bases and body, an assignment's value: no
    call in them, and no name the module has not bound (the student's experiments are not
    kept, so a name they made is not there)."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        parts: list[ast.AST] = [*node.decorator_list, *node.args.defaults]
        parts += [d for d in node.args.kw_defaults if d is not None]
    elif isinstance(node, ast.ClassDef):
        parts = [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        for inner in node.body:
            if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Constant):
                continue  # its docstring
            if not isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign | ast.Pass):
                return False
            if isinstance(inner, ast.Assign):
                parts.append(inner.value)
            else:
                parts += [*inner.decorator_list, *inner.args.defaults]
    elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        parts = [node.value, *(t.value for t in targets if isinstance(t, ast.Attribute | ast.Subscript))]
    else:
        return False
    allowed = known | BUILTINS
    used = [n for part in parts for n in ast.walk(part)]
    return not any(isinstance(n, RUNS) or (isinstance(n, ast.Name) and n.id not in allowed) for n in used)


#: what defining a statement must not do to be kept from a student's own cell (see `definitions`)
RUNS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.Lambda)
BUILTINS = frozenset(dir(builtins))


def definitions(text: str, known: set[str]) -> list[tuple[str, int]]:
    """What a code cell the student added defines, one statement at a time, each with the
    cell's line before its first (a message about it names the cell and the line, as a
    kernel's traceback does). A kernel runs every cell, so graded code may use a helper, an
    import or a constant from a cell of the student's own (`nbgrader autograde` gave full
    marks; the fast path, reading the graded cells alone, a NameError). Its functions,
    classes, imports and constants are kept, in the module of the last graded cell above it
    (the first module's, for a cell above them all; a later definition replaces an earlier
    one there, as in the kernel), where defining them runs nothing and uses only names the
    module has (`known`, which grows with what is kept). What the cell runs (a call, a loop,
    a print: the student's experiments) is not kept: where the kernel goes on to the next
    cell, it would stop the module's import. An import of what the grading sandbox lacks
    (torch) is passed over; a cell that is not Python is left out."""
    code = as_python(text)
    try:
        tree = ast.parse(code)
    except UNPARSABLE:
        return []
    lines, kept = code.split("\n"), []
    for node in tree.body:
        if not _defines_only(node, known):
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        whole = "\n".join(lines[first - 1 : node.end_lineno]) if first < node.lineno else None
        source = whole or ast.get_source_segment(code, node) or ""
        offset = first - 1
        if isinstance(node, ast.Import | ast.ImportFrom):
            source = "try:\n" + textwrap.indent(source, "    ") + "\nexcept ImportError:\n    pass"
            offset -= 1  # the statement is the chunk's second line
        kept.append((source, offset))
        known |= bound_names(source)  # not an import's names: it may fail in the sandbox
    return kept


#: what an IPython command in a graded cell becomes (its own text after it, in a comment)
NOT_RUN = "pass  # IPython, not run when graded: "


def as_python(text: str) -> str:
    """A code cell as Python. A kernel also runs IPython's own syntax (`%time y = f(x)`,
    `!pip install ...`, `x = !ls`, `Value?`, a `%%time` over the cell), and so does `nbgrader
    autograde`; a module cannot hold it, and one such line left in a graded cell made the
    whole assignment a syntax error, where autograde gave full marks. Each such line becomes
    `pass` in place (its command does not run: none of these changes what the cell defines;
    the lines keep their numbers), but for `%time`'s statement, which runs (`_statement`);
    a cell magic's first line is blanked (the cell's own code runs). Lines are read as
    IPython reads them, strings and all; a cell that compiles is left alone, and so is one
    IPython cannot make Python of: its syntax error says where."""
    try:
        compile(text, "<cell>", "exec")
        return text
    except UNPARSABLE:
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # no IPython: no kernel ran it either
        return text
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))  # IPython drops blank ones
    if first < len(lines) and lines[first].lstrip().startswith("%%"):
        lines[first] = ""
        first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    try:
        made = TransformerManager().transform_cell("\n".join(lines[first:])).split("\n")
    except Exception:  # IPython's own parse failed: the syntax error is the cell's
        return text
    count = len(lines) - first
    if len(made) < count or any(extra.strip() for extra in made[count:]):
        return "\n".join(lines)  # not line for line: left as it is, but for a cell magic's line
    return "\n".join(
        lines[:first] + [_statement(line, new) for line, new in zip(lines[first:], made, strict=False)]
    )


def _statement(line: str, made: str) -> str:
    """One line of a cell as Python, from what IPython `made` of it: its own text unless that
    is an IPython command; `%time` runs its statement in the cell's namespace, so the statement
    stays (`%time w = init()` defines `w`); any other command becomes NOT_RUN."""
    if made == line or "get_ipython()" not in made:
        return line
    indent, command = line[: len(line) - len(line.lstrip())], line.strip()
    timed = re.fullmatch(r"%time\s+(\S.*)", command)
    return f"{indent}{timed.group(1)}" if timed else f"{indent}{NOT_RUN}{command}"


def _cell_id(topic: str) -> str:
    return f"test_{_slug(topic)}"


def cell_scores(results: Iterable[CaseResult], assignment: str) -> dict[str, float]:
    """Points per test cell (`test_<topic>`) of the assignment's notebook."""
    scores: dict[str, float] = {}
    for r in results:
        if r.assignment == assignment:
            key = _cell_id(r.topic)
            scores[key] = scores.get(key, 0.0) + r.points
    return scores


@dataclass
class CellOutput:
    """A test cell as `nbgrader autograde` leaves it: what it printed, and its value."""

    points: float
    text: str


def cell_outputs(results: Iterable[CaseResult], assignment: str) -> dict[str, CellOutput]:
    """Each test cell's output, as `grader.notebook.grade_cell` prints and returns it when
    autograding: the public cases' report, then the hidden cases' (framed), then the points."""
    topics: dict[str, dict[str, list[CaseResult]]] = {}
    for r in results:
        if r.assignment == assignment:
            topics.setdefault(r.topic, {"public": [], "hidden": []})[r.suite].append(r)
    outputs = {}
    for topic, suites in topics.items():
        earned = sum(r.points for r in suites["public"])
        text = printed(suites["public"], topic, "public") + "\n"
        if suites["hidden"]:
            earned += sum(r.points for r in suites["hidden"])
            text += printed(suites["hidden"], topic, "hidden") + "\n"
        outputs[_cell_id(topic)] = CellOutput(float(earned), text)
    return outputs


def autograded_notebook(submitted: Path, locked: dict[str, str], outputs: dict[str, CellOutput]) -> dict:
    """The submitted notebook as `nbgrader autograde` leaves it, without running a kernel:
    locked cells as the source notebook has them (`locked_sources`), every output cleared,
    and each test cell's output written in (`outputs`: grade cell id -> output). Raises
    `NotebookError` for a notebook the fast path cannot read."""
    cells = read_cells(submitted)
    nb = json.loads(submitted.read_text(encoding="utf-8"))
    for raw, cell in zip(nb["cells"], cells, strict=True):
        key = grade_id(cell)
        if key in locked:
            raw["source"] = locked[key]
        if cell.cell_type != "code":
            continue
        raw["outputs"], raw["execution_count"] = [], None
        if key in outputs:
            out = outputs[key]
            raw["outputs"] = [
                {"output_type": "stream", "name": "stdout", "text": out.text},
                {
                    "output_type": "execute_result",
                    "execution_count": None,
                    "data": {"text/plain": repr(out.points)},
                    "metadata": {},
                },
            ]
    return nb


def write_grades(course: str | Path, assignment: str, student: str, results: Iterable[CaseResult]) -> None:
    """Store the results' points per grade cell for the student's submission of the
    assignment, and their output in its autograded notebook, as `nbgrader autograde` would;
    the notebook is named after the assignment. A test cell the student deleted scores
    zero, as it does when autograding."""
    with GradeWriter(course, assignment) as writer:
        writer.add(student, results)
        writer.commit()


def import_nbgrader_meanwhile() -> None:
    """`import_nbgrader` in a thread, begun while a class is graded: the grading is in other
    processes, so the import is done by the time the grades are written. An import error
    shows when `GradeWriter` imports again."""

    def quietly() -> None:
        with contextlib.suppress(Exception):  # raised again, where it is used
            import_nbgrader()

    threading.Thread(target=quietly, name="import nbgrader", daemon=True).start()


def submitted_at(folder: Path) -> tuple[datetime | None, str | None]:
    """When the submission in `folder` was handed in, as nbgrader reads its `timestamp.txt`
    (None: no file), and what is wrong with the file, if anything. nbgrader's `autograde`
    stops on a timestamp it cannot read; here that one student is graded as if handed in
    with no timestamp (never late), and the reason is given to print."""
    from nbgrader.utils import parse_utc

    path = folder / "timestamp.txt"
    if not path.is_file():
        return None, None
    text = path.read_text(errors="replace").strip()
    try:
        return parse_utc(text), None
    except (ValueError, OverflowError):  # dateutil's ParserError is a ValueError
        shown = text if len(text) <= 40 else text[:40] + "..."
        return None, f"{path}: {shown!r} is not a date: graded with no submission time"


class GradeWriter:
    """Writes students' grades into an nbgrader course, one student at a time, in one session
    of nbgrader's `Gradebook` (opened once: it checks the database's schema): `add` a
    student's results (their points per grade cell, and `autograded/<student>/<assignment>/`
    with its notebook's outputs), `commit` what was added. A class run adds and commits each
    student as its report comes, so that this work overlaps the grading of the others (it
    used to follow the whole class, on one core: a second of 30 students' class run) and the
    course's gradebook holds every student graded so far. Closed without a commit, it leaves
    what was not committed out of gradebook.db (its `autograded/` folders are written again
    by the next run)."""

    def __init__(self, course: str | Path, assignment: str) -> None:
        import_nbgrader()
        from nbgrader.api import Gradebook

        self.course, self.assignment = Path(course), assignment
        #: student -> what was wrong with their submission's timestamp (see `submitted_at`)
        self.problems: dict[str, str] = {}
        try:
            source = self.course / "source" / assignment / f"{assignment}.ipynb"
            self.locked = locked_sources(source)
        except NotebookError:
            self.locked = {}  # the submitted text stays, as the gradebook keeps the released one
        self.gradebook = Gradebook(f"sqlite:///{self.course / 'gradebook.db'}")

    def __enter__(self) -> GradeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.gradebook.close()

    def commit(self) -> None:
        self.gradebook.db.commit()

    def add(self, student: str, results: Iterable[CaseResult]) -> None:
        """The student's points per grade cell (a test cell the student deleted scores zero,
        as it does when autograding), and their autograded folder and notebook."""
        assignment, gb = self.assignment, self.gradebook
        cells = cell_outputs(results, assignment)
        submitted = self.course / "submitted" / student / assignment
        timestamp, problem = submitted_at(submitted)
        if problem:
            self.problems[student] = problem
        try:
            present = set(_cells_by_id(read_cells(submitted / f"{assignment}.ipynb")))
        except NotebookError:
            present = set()  # an unreadable notebook has no test cell left: every cell scores zero
        gb.update_or_create_student(student)
        # nbgrader builds a new submission's notebooks and grades while its queries run;
        # with autoflush on, SQLAlchemy flushes the half-built objects and warns (SAWarning)
        with gb.db.no_autoflush:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
            # the notebook's grades at once: a query (and a flush) per cell was a third of this
            notebook = gb.find_submission_notebook(assignment, assignment, student)
            grades = {grade.name: grade for grade in notebook.grades}
        for grade_id, output in cells.items():
            grade = grades.get(grade_id) or gb.find_grade(grade_id, assignment, assignment, student)
            grade.auto_score = output.points if grade_id in present else 0.0
            grade.needs_manual_grade = False
        autograded = self.course / "autograded" / student / assignment
        autograded.mkdir(parents=True, exist_ok=True)
        for path in submitted.iterdir():
            # a timestamp nbgrader cannot read stays behind: its other commands would stop on it
            if path.is_file() and not (path.name == "timestamp.txt" and problem):
                shutil.copy2(path, autograded / path.name)
        notebook = autograded / f"{assignment}.ipynb"
        with contextlib.suppress(NotebookError, OSError):  # unreadable: left as handed in
            made = autograded_notebook(submitted / notebook.name, self.locked, cells)
            notebook.write_text(json.dumps(made, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
