"""The nbgrader course's source notebooks are generated: they must not drift."""

from pathlib import Path

from grader.authoring.notebooks import build, check, split_module
from grader.authoring.notebooks import test_cell_source as cell_source
from grader.notebook import topics

REPO = Path(__file__).resolve().parents[2]


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
            if topic.hidden:
                assert "### BEGIN HIDDEN TESTS" in cell.source


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
