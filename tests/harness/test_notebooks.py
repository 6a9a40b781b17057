"""The nbgrader course's source notebooks are generated: they must not drift."""

import json
import re
import shutil
from pathlib import Path

import pytest

from grader.authoring.notebooks import build, check, split_module
from grader.authoring.notebooks import test_cell_source as cell_source
from grader.case.limits import SHORT_TIMEOUT
from grader.notebook import (
    EXECUTION_ENV,
    SUITES_ENV,
    TIMEOUT_ENV,
    Runner,
    backward_for_picture,
    grade_cell,
    grade_topic,
    topics,
)
from grader.notebook import topic as find_topic
from grader.report.cell import HIDDEN_BEGIN, HIDDEN_END
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"


def test_committed_notebooks_match_reference_and_suites():
    assert check(REPO / "reference", REPO / "tests", REPO / "assignments") == []


def test_one_test_cell_per_topic_worth_its_points():
    for assignment in ("micrograd", "needle"):
        nb = build(REPO / "reference", REPO / "tests", assignment)
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        table = topics(assignment, REPO / "tests")
        assert [c.metadata.nbgrader.points for c in graded] == [t.points() for t in table]
        for cell, topic in zip(graded, table, strict=True):
            assert cell.source == cell_source(assignment, topic)
            assert cell.metadata.nbgrader.locked and not cell.metadata.nbgrader.solution
            # one call, the same in every copy of the notebook: nbgrader's checksum holds
            call = cell.source.splitlines()[-1]
            assert call.startswith("grade_cell(") and "HIDDEN" not in cell.source
            assert not any(case.name in cell.source for case in topic.hidden)


def test_every_solution_region_is_in_a_solution_cell():
    for assignment, files in (("micrograd", ("engine", "nn")), ("needle", ("autograd", "ops", "init"))):
        nb = build(REPO / "reference", REPO / "tests", assignment)
        regions = sum(
            (REPO / "reference" / assignment / f"{f}.py").read_text().count("### BEGIN SOLUTION")
            for f in files
        )
        cells = [c for c in nb.cells if "### BEGIN SOLUTION" in c.source]
        assert sum(c.source.count("### BEGIN SOLUTION") for c in cells) == regions
        assert all(c.metadata.nbgrader.solution for c in cells)


def test_split_keeps_every_line_of_code():
    text = (REPO / "reference" / "needle" / "ops.py").read_text()
    split = split_module(text, "ops")
    rebuilt = split.head + "\n\n\n".join(c.source for c in split.chunks) + "\n" + split.tail
    assert [line for line in rebuilt.splitlines() if line.strip()] == [
        line for line in text.splitlines() if line.strip()
    ]


def notebook_namespace(engine: str) -> dict:
    """What a notebook's cells leave behind: the engine's definitions in one namespace."""
    namespace = {"__name__": "__main__"}
    exec(compile(engine, str(REPO / "reference" / "micrograd" / "engine.py"), "exec"), namespace)
    return namespace


def test_test_cells_read_the_suites_that_grader_suites_names(monkeypatch, capsys):
    monkeypatch.setenv(SUITES_ENV, str(SMALL))
    engine = (REPO / "reference" / "micrograd" / "engine.py").read_text()
    ops = find_topic("micrograd", "ops", SMALL)
    assert [c.id for c in ops.public] != [c.id for c in find_topic("micrograd", "ops", REPO / "tests").public]
    assert grade_topic("micrograd", "ops", "public", notebook_namespace(engine)) == ops.points("public")
    assert f"{len(ops.public)}/{len(ops.public)} cases" in capsys.readouterr().out
    # tanh's rule wrong: the small suite's tanh cases fail, and say so
    broken = engine.replace("(1.0 - out.data**2) * out.grad", "(1.0 - out.data) * out.grad")
    earned = grade_topic("micrograd", "ops", "public", notebook_namespace(broken))
    printed = capsys.readouterr().out
    failed = re.findall(r"^FAILED (\S+)", printed, re.M)
    assert failed and all("tanh" in case_id for case_id in failed)
    assert earned == ops.points("public") - sum(c.points for c in ops.public if c.id in failed)


def test_a_test_cell_runs_the_hidden_cases_only_when_nbgrader_autogrades(monkeypatch, capsys):
    """The released notebook's cell runs the public cases; the same cell, run by `nbgrader
    autograde`, runs the hidden ones after them and frames their report for the feedback."""
    monkeypatch.setenv(SUITES_ENV, str(SMALL))
    namespace = notebook_namespace((REPO / "reference" / "micrograd" / "engine.py").read_text())
    name = "hidden ops"  # the small suites' topic with hidden cases
    topic = find_topic("micrograd", name, SMALL)
    assert topic.hidden
    for execution in (None, "validate"):
        if execution:
            monkeypatch.setenv(EXECUTION_ENV, execution)
        assert grade_cell("micrograd", name, namespace) == topic.points("public")
        printed = capsys.readouterr().out
        assert f"{name} (public)" in printed and HIDDEN_BEGIN not in printed
    monkeypatch.setenv(EXECUTION_ENV, "autograde")
    assert grade_cell("micrograd", name, namespace) == topic.points()
    public, hidden = capsys.readouterr().out.split(HIDDEN_BEGIN)
    assert f"{name} (public)" in public and f"{name} (hidden)" in hidden
    assert f"{HIDDEN_END} {topic.points('hidden'):g}/{topic.points('hidden'):g} points" in hidden


class Output:
    """What the picture cell draws: anything with a backward()."""

    def __init__(self, backward) -> None:
        self.backward = backward


def test_the_picture_cell_stops_or_reports_backward_and_never_fails(capsys):
    """The graph picture's cell runs backward() first: one that never returns is stopped (it
    would hold `nbgrader autograde` for its whole cell timeout), one not written yet is told
    in a line, and a working one runs; the picture is drawn after each."""

    def never_returns():
        while len(ran) >= 0:
            pass

    def not_written():
        raise NotImplementedError("hint: order the nodes topologically")

    def not_released():
        raise NotImplementedError()  # what nbgrader leaves in a solution cell

    ran: list[int] = []
    backward_for_picture(Output(never_returns), seconds=0.2)
    assert "did not return within 0.2 s" in capsys.readouterr().out
    backward_for_picture(Output(not_written), seconds=0.2)
    assert "raised NotImplementedError: hint: order the nodes topologically" in capsys.readouterr().out
    backward_for_picture(Output(not_released), seconds=0.2)
    assert "raised NotImplementedError; the picture" in capsys.readouterr().out
    backward_for_picture(Output(lambda: ran.append(1)), seconds=0.2)
    assert ran == [1]
    assert capsys.readouterr().out == ""


SORT = "        topo, visited = [], set()\n"
NEVER_RETURNS = "        while True:\n            pass\n"


def test_a_backward_that_never_returns_scores_in_a_test_cell_as_in_the_sandbox(tmp_path, capsys):
    """A test cell probes backward() before its cases, as the sandbox does: when it hangs,
    each case gets the sandbox's short CPU budget (not ten seconds of waiting), and the cell
    earns what `python -m grader grade` gives the same code, topic by topic."""
    engine = (REPO / "reference" / "micrograd" / "engine.py").read_text()
    assert engine.count(SORT) == 1
    hanging = engine.replace(SORT, NEVER_RETURNS)
    shutil.copytree(REPO / "reference" / "micrograd", tmp_path / "micrograd")
    (tmp_path / "micrograd" / "engine.py").write_text(hanging)
    report = grade(tmp_path, suite="public", only=["micrograd"])
    namespace = notebook_namespace(hanging)
    nn = REPO / "reference" / "micrograd" / "nn.py"  # the nn cells, which use the Value above
    cells = nn.read_text().replace("from micrograd.engine import Value\n", "")
    exec(compile(cells, str(nn), "exec"), namespace)
    for name in ("accumulation", "forward"):
        earned = grade_topic("micrograd", name, "public", namespace)
        printed = capsys.readouterr().out
        in_topic = [r for r in report.results if r.topic == name]
        assert earned == sum(r.points for r in in_topic if r.passed)
        timed_out = [r for r in in_topic if not r.passed]
        assert printed.count("s of CPU in Value.backward") == len(timed_out)
    assert any(r.topic == "accumulation" and not r.passed for r in report.results)
    assert all(r.passed for r in report.results if r.topic == "forward")


SEED = "        self.grad = 1.0\n"
#: gets through the probe's tiny graph, and loops for ever on any graph of over 500 nodes
HANGS_ON_DEEP_GRAPHS = "        while len(topo) > 500:\n            pass\n"


def test_a_fix_run_again_in_the_same_kernel_gets_full_time_limits_back(monkeypatch):
    """Once cases have hung twice in one function, a kernel cuts later cases to a second, as
    the sandbox does for one submission. A student who then fixes the engine and runs its
    cell again has a new class, and its cases get their full time limits again."""
    monkeypatch.setenv(TIMEOUT_ENV, "0.3")
    engine = (REPO / "reference" / "micrograd" / "engine.py").read_text()
    assert engine.count(SEED) == 1
    runner, deep = Runner(), find_topic("micrograd", "deep", REPO / "tests").public
    for case in deep:
        runner.needs(case, REPO / "tests")  # as grade_topic does: PyTorch's times are known
    results = runner.check(
        deep, notebook_namespace(engine.replace(SEED, HANGS_ON_DEEP_GRAPHS + SEED)), REPO / "tests"
    )
    assert sum("timed out" in r.message for r in results) >= 2
    longest = max(deep, key=runner.timeout)  # PyTorch took long enough for it to get over 0.3 s
    assert runner.timeout(longest) == SHORT_TIMEOUT
    # the fixed engine gets a limit no busy machine runs into; the cut-off, if it were still
    # on, would bring it down to SHORT_TIMEOUT all the same
    monkeypatch.setenv(TIMEOUT_ENV, "30")
    fixed = runner.check(deep[:1], notebook_namespace(engine), REPO / "tests")
    assert fixed[0].passed, fixed[0].message
    assert runner.timeout(longest) > SHORT_TIMEOUT


def test_the_fast_path_writes_a_test_cells_output_and_restores_locked_cells(tmp_path):
    """What `grade-class --nbgrader` leaves as the autograded notebook: the test cell's output
    as the kernel prints it, locked cells as released, other outputs cleared; a cell whose
    metadata has another form is left as handed in, and the notebook is still written."""
    from grader.authoring.nbgrader_io import CellOutput, autograded_notebook, extract, locked_sources

    def cell(source: str, metadata: dict, outputs: list | None = None) -> dict:
        return {"cell_type": "code", "source": source, "metadata": metadata, "outputs": outputs or [],
                "execution_count": 3}  # fmt: skip

    source = tmp_path / "source.ipynb"
    test = {"nbgrader": {"grade_id": "test_ops", "locked": True, "grade": True, "points": 2}}
    given = [
        cell("grade_cell('micrograd', 'ops', globals())", test),
        cell("x = 1", {"nbgrader": {"grade_id": "a"}}),
    ]
    source.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": given}))
    submitted = tmp_path / "submitted.ipynb"
    handed_in = [
        cell("print('edited')", test, [{"output_type": "stream", "name": "stdout", "text": "old"}]),
        cell(
            "x = 2",
            {"nbgrader": 5, "grader": ["engine"]},
            [{"output_type": "stream", "name": "stdout", "text": "1"}],
        ),
    ]
    submitted.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": handed_in}))
    made = autograded_notebook(
        submitted, locked_sources(source), {"test_ops": CellOutput(1.5, "ops (public)\n")}
    )
    first, second = made["cells"]
    assert first["source"] == given[0]["source"]
    assert first["outputs"][0] == {"output_type": "stream", "name": "stdout", "text": "ops (public)\n"}
    assert first["outputs"][1]["data"] == {"text/plain": "1.5"}
    assert second["source"] == "x = 2" and second["outputs"] == [] and second["execution_count"] is None
    assert extract(submitted, tmp_path / "out", "micrograd", source=source).is_dir()  # no crash either


def test_a_cells_ipython_commands_are_not_a_syntax_error_and_keep_their_lines():
    pytest.importorskip("IPython")
    from grader.authoring.nbgrader_io import NOT_RUN, as_python

    cell = (
        "%%time\n"
        "!pip install numpy\n"
        "%time w = [1, 2]\n"
        'DOC = """\n%not a command\n!nor this\n"""\n'
        "def f():\n"
        "    %timeit -n1 f\n"
        "    return w\n"
        "files = !ls\n"
        "f?\n"
    )
    made = as_python(cell)
    namespace: dict = {}
    exec(compile(made, "cell", "exec"), namespace)  # noqa: S102 - the test's own text
    assert namespace["f"]() == [1, 2] and namespace["DOC"] == "\n%not a command\n!nor this\n"
    assert len(made.splitlines()) == len(cell.splitlines())  # a message's line numbers hold
    assert made.count(NOT_RUN) == 4 and f"{NOT_RUN}!pip install numpy" in made
    assert as_python("class A:\n    pass\n") == "class A:\n    pass\n"
    assert as_python("x = = 1\n") == "x = = 1\n"  # not IPython either: its syntax error says where


def test_code_nested_deeper_than_the_parser_allows_stops_no_extraction(tmp_path):
    """Code nested deeper than Python's parser allows raises MemoryError or RecursionError
    (not a SyntaxError) when parsed. It stops neither the fast path's extraction nor the
    scan for autodiff imports: a graded cell is written as handed in (its import then fails
    in the sandbox, a zero that says why, as its kernel fails), and a cell of the student's
    own is left out, as any that is not Python. It once stopped the whole class's run."""
    import nbformat

    from grader.authoring.nbgrader_io import extract
    from grader.verdict.integrity import scan_source

    deep, wide = "-" * 100_000 + "1", "+".join(["1"] * 200_000)
    nb = build(REPO / "reference", REPO / "tests", "micrograd")
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    engine = nb.cells[ids.index("engine_value")]
    engine.source += f"\n\nDEEP = {deep}\n"
    nb.cells.insert(ids.index("engine_value") + 1, nbformat.v4.new_code_cell(f"WIDE = {wide}\n"))
    notebook = tmp_path / "micrograd.ipynb"
    nbformat.write(nb, notebook)
    text = (extract(notebook, tmp_path / "out", "micrograd") / "micrograd" / "engine.py").read_text()
    assert f"DEEP = {deep}" in text and "WIDE" not in text
    assert scan_source(text, "engine.py") == scan_source(f"import torch\nW = {wide}\n", "x.py") == []


def test_a_students_own_cell_gives_the_graded_code_its_definitions_and_runs_nothing():
    from grader.authoring.nbgrader_io import definitions

    cell = (
        "import numpy as np\n"
        "import a_module_the_sandbox_lacks\n"
        "EPS = 1e-8\n"
        "a = Value(2.0)\n"  # an experiment: not kept, so nothing that uses `a` is either
        "b = a * a\n"
        "def helper(x, eps=EPS):\n    return x + eps\n"
        "def uses_an_experiment(v=a):\n    return v\n"
        "Value.__radd__ = helper\n"
        "class Node(Value):\n    '''mine'''\n    def f(self):\n        return 1\n"
        "class Runs:\n    made = Value(1.0)\n"
        "for i in range(3):\n    print(i)\n"
        "%time SQUARED = EPS ** 2\n"
    )
    known = {"Value"}
    made = "\n\n\n".join(source for source, _ in definitions(cell, known))
    namespace = {"Value": type("Value", (), {})}
    exec(compile(made, "cell", "exec"), namespace)  # noqa: S102 - the test's own text
    assert namespace["helper"](1.0) == 1.0 + 1e-8 and namespace["SQUARED"] == 1e-8**2
    assert namespace["Value"].__radd__ is namespace["helper"] and issubclass(
        namespace["Node"], namespace["Value"]
    )
    assert not {"a", "b", "uses_an_experiment", "Runs", "i", "a_module_the_sandbox_lacks"} & set(namespace)
    assert {"EPS", "helper", "Node", "SQUARED"} <= known and "np" not in known  # an import may fail
    assert definitions("x = = 1\n", set()) == []


def test_what_an_own_cell_defines_reaches_the_graded_cells_below_it_in_other_modules(tmp_path, oracle):
    """A student's helper cell at the top of needle's ops section (below the last autograd
    cell), used by an op's gradient below it: in a kernel every cell sees it, and so does the
    package the fast path extracts (the helper joins autograd; ops imports it)."""
    import nbformat

    from grader.authoring.nbgrader_io import extract

    nb = build(REPO / "reference", REPO / "tests", "needle")
    first_op = next(i for i, c in enumerate(nb.cells) if c.metadata.get("grader", {}).get("module") == "ops")
    add = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ops_ewiseadd")
    assert "        return out_grad, out_grad\n" in add.source
    add.source = add.source.replace("return out_grad, out_grad", "return _same(out_grad), out_grad")
    nb.cells.insert(first_op, nbformat.v4.new_code_cell("def _same(g):\n    return g\n\n\nprint(_same(1))\n"))
    notebook = tmp_path / "needle.ipynb"
    nbformat.write(nb, notebook)
    package = extract(notebook, tmp_path / "out", "needle") / "needle"
    assert "def _same" in (package / "autograd.py").read_text()
    assert "from .autograd import _same" in (package / "ops.py").read_text()
    adds = lambda case: case.id.startswith("needle/test_ops::") and "add" in case.id  # noqa: E731
    report = grade(tmp_path / "out", "public", ("needle",), oracle=oracle, sandbox=False, keep=adds)
    assert report.results and all(r.passed for r in report.results), [r.message for r in report.results]


#: the product rule of the reference's micrograd, which the tests below edit
MUL_RULE = "            self.grad += other.data * out.grad\n"


def mul_graded(nb, folder: Path, oracle):
    """micrograd's backward[mul] case graded on the code the fast path extracts from `nb`."""
    import nbformat

    from grader.authoring.nbgrader_io import extract

    notebook = folder / "micrograd.ipynb"
    nbformat.write(nb, notebook)
    extract(notebook, folder / "out", "micrograd")
    report = grade(folder / "out", "public", ("micrograd",), oracle=oracle, sandbox=False, keep=only_mul)
    [result] = report.results
    return result


def only_mul(case) -> bool:
    return case.id == "micrograd/test_ops::backward[mul]"


def test_a_message_about_a_notebooks_code_names_its_cell_and_line(tmp_path, oracle):
    """The fast path grades the package it writes from the notebook; a student never saw its
    files, so an exception's place is given in the cell, as a kernel's traceback gives it."""
    from grader.report.places import PLACES

    nb = build(REPO / "reference", REPO / "tests", "micrograd")
    engine = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "engine_value")
    engine.source = engine.source.replace(MUL_RULE, MUL_RULE + "            1 / 0\n")
    line = engine.source.splitlines().index("            1 / 0") + 1
    result = mul_graded(nb, tmp_path, oracle)
    assert f'in Value.__mul__._backward (cell "class Value:", line {line})' in result.message, result.message
    # a file of that name among a student's own files, of another form, is not read
    (tmp_path / "out" / PLACES).write_text('{"engine.py": [[1, 999, "mine"]]}')
    report = grade(tmp_path / "out", "public", ("micrograd",), oracle=oracle, sandbox=False, keep=only_mul)
    assert "(engine.py, line" in report.results[0].message


def test_a_message_about_a_cell_the_student_added_names_that_cell_and_line(tmp_path, oracle):
    """A helper in a cell of the student's own, which a rule calls, raises: the message names
    that cell by its first line of code and the line in it, as for a graded cell (its
    definitions are kept one by one, the experiments between them are not)."""
    import nbformat

    nb = build(REPO / "reference", REPO / "tests", "micrograd")
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    at = ids.index("engine_value")
    engine = nb.cells[at]
    engine.source = engine.source.replace(MUL_RULE, MUL_RULE.replace("other.data", "_scaled(other.data)"))
    own = "# my helpers\nSCALE = 1.0\nprint(SCALE)\n\ndef _scaled(x):\n    return x * SCALE / 0\n"
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell(own))
    result = mul_graded(nb, tmp_path, oracle)
    assert 'in _scaled (cell "SCALE = 1.0", line 6)' in result.message, result.message
