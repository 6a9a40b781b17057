"""The graph picture: DOT source for micrograd and needle graphs, rendering, missing dot."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.case.loading import load_package
from grader.report import draw
from grader.report.draw import GraphvizNotFound, draw_dot

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def Value():
    return load_package(REPO / "reference", "micrograd", ("engine",))["engine"].Value


@pytest.fixture(scope="module")
def ndl():
    return load_package(REPO / "reference", "needle", ("autograd", "ops"))["needle"]


def expression(Value):
    a, b, c = Value(2.0, label="a"), Value(-3.0, label="b"), Value(10.0, label="c")
    out = (a * b + c).tanh()
    out.label = "out"
    out.backward()
    return a, out


def records(source):
    return re.findall(r'^\s*(n\d+) \[label="\{ (.*?) \}".* shape=record', source, re.M)


def op_labels(source):
    return [m[1] for m in re.findall(r'_op \[label=("?)(.*?)\1 ', source)]


def test_every_value_and_operation_is_drawn(Value):
    _, out = expression(Value)
    graph = draw_dot(out)
    nodes = records(graph.source)
    assert len(nodes) == 6 == graph.nodes == graph.total
    assert {label.split(" | ")[0] for _, label in nodes} >= {"a", "b", "c", "out"}
    ops = op_labels(graph.source)
    assert sorted(ops) == ["*", "+", "tanh"]
    # inputs -> op -> output: each op node has its inputs in and its output out
    assert len(re.findall(r"-> n\d+_op$", graph.source, re.M)) == 5
    assert len(re.findall(r"_op -> n\d+$", graph.source, re.M)) == 3
    assert "data 2.0000" in graph.source and "grad 1.0000" in graph.source


def test_highlighted_node_stands_out(Value):
    a, out = expression(Value)
    source = draw_dot(out, highlight=a).source
    marked = [line for line in source.splitlines() if draw.HIGHLIGHT_COLOR in line]
    assert len(marked) == 1 and "a | data 2.0000" in marked[0]


def test_labels_are_escaped_for_records(Value):
    x = Value(1.0, label='x|{y}<z>"')
    source = draw_dot(x * 2).source
    assert r"x\|\{y\}\<z\>\"" in source


def test_deep_graph_is_walked_without_recursion_and_truncated(Value):
    x = Value(0.5, label="x")
    y = x
    for _ in range(5000):
        y = y * 1.0
    graph = draw_dot(y, max_nodes=50)
    assert graph.truncated and graph.nodes == 50 and graph.total == 10001
    assert "graph truncated: drew 50 of 10001 values" in graph.source


def test_needle_tensors_show_shape(ndl):
    x = ndl.Tensor(np.ones((2, 3)))
    y = ndl.summation(x * x)
    y.backward()
    source = draw_dot(y).source
    assert "(2, 3)" in source
    assert any("Summation" in label for label in op_labels(source))


def test_missing_dot_says_how_to_install(Value, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    _, out = expression(Value)
    graph = draw_dot(out)
    assert graph.source.startswith("digraph")  # the source needs nothing installed
    with pytest.raises(GraphvizNotFound, match="apt-get install graphviz") as info:
        graph.render("never.svg")
    assert "brew install graphviz" in str(info.value)


@pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (scripts/setup.sh, or apt-get install -y graphviz)",
)
def test_renders_svg(Value, tmp_path):
    _, out = expression(Value)
    path = draw_dot(out).render(tmp_path / "graph.svg")
    text = Path(path).read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "tanh" in text


def test_highlight_accepts_a_collection(Value):
    a, b = Value(1.0, label="a"), Value(2.0, label="b")
    out = a * b + a
    source = draw_dot(out, highlight={a, b}).source
    marked = [line for line in source.splitlines() if draw.HIGHLIGHT_COLOR in line]
    assert len(marked) == 2


def test_truncated_ops_point_at_the_inputs_left_out(Value):
    y = Value(1.0)
    for _ in range(10):
        y = y + 1
    source = draw_dot(y, max_nodes=5).source
    assert len(records(source)) == 5
    assert "not drawn" in source and "[style=dashed]" in source
    assert "truncated [label=" in source


def test_lazy_needle_nodes_are_not_computed_by_the_picture(ndl):
    autograd = ndl.autograd
    x = autograd.Tensor(np.ones((2, 2)))
    autograd.LAZY_MODE = True
    try:
        y = x * x
        source = draw_dot(y).source
    finally:
        autograd.LAZY_MODE = False
    assert y.cached_data is None
    assert "not computed" in source


def test_bad_arguments_are_refused(Value):
    x = Value(1.0)
    with pytest.raises(ValueError, match="rankdir"):
        draw_dot(x, rankdir="XY")
    with pytest.raises(ValueError, match="format"):
        draw_dot(x).render("x.gif", format="gif")


def test_missing_dot_on_path(Value, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `dot` anywhere
    graph = draw_dot(expression(Value)[1])
    with pytest.raises(RuntimeError) as info:  # GraphvizNotFound is a RuntimeError
        graph.render(tmp_path / "graph.png", format="png")
    assert isinstance(info.value, GraphvizNotFound)
    message = str(info.value)
    for hint in ("apt-get install graphviz", "brew install graphviz", "conda install graphviz", ".source"):
        assert hint in message
    assert graph._repr_svg_() is None  # Jupyter falls back to the text repr
    assert "not found" in repr(graph)
    assert not (tmp_path / "graph.png").exists()


needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz's dot is not installed (apt-get update && apt-get install -y graphviz)",
)


@needs_dot
def test_escaped_labels_render_literally(Value, tmp_path):
    x = Value(1.0, label='x|{y}<z>"w"\\')
    svg = draw_dot(x * 2).render(tmp_path / "escaped.svg").read_text()
    assert "x|{y}&lt;z&gt;&quot;w&quot;\\" in svg


@needs_dot
def test_renders_png_pdf_and_jupyter_svg(Value, tmp_path):
    graph = draw_dot(expression(Value)[1])
    assert graph.render(tmp_path / "g.png", format="png").read_bytes().startswith(b"\x89PNG")
    assert graph.render(tmp_path / "g.pdf", format="pdf").read_bytes().startswith(b"%PDF")
    assert "<svg" in graph._repr_svg_()
