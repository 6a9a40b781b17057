"""The graph picture: DOT source for micrograd and needle graphs, rendering, missing dot."""

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from grader import draw
from grader.draw import GraphvizNotFound, draw_dot
from grader.loading import load_package

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
    return re.findall(r'^\s*(n\d+) \[label="\{ (.*?) \}", shape=record', source, re.M)


def test_every_value_and_operation_is_drawn(Value):
    _, out = expression(Value)
    graph = draw_dot(out)
    nodes = records(graph.source)
    assert len(nodes) == 6 == graph.nodes == graph.total
    assert {label.split(" | ")[0] for _, label in nodes} >= {"a", "b", "c", "out"}
    ops = re.findall(r'_op \[label="([^"]*)"', graph.source)
    assert sorted(ops) == ["*", "+", "tanh"]
    # inputs -> op -> output: each op node has its inputs in and its output out
    assert len(re.findall(r"-> n\d+_op;", graph.source)) == 5
    assert len(re.findall(r"_op -> n\d+;", graph.source)) == 3
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
    assert re.search(r'_op \[label="[^"]*Summation', source) or "summation" in source.lower()


def test_missing_dot_says_how_to_install(Value, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    _, out = expression(Value)
    graph = draw_dot(out)
    assert graph.source.startswith("digraph")  # the source needs nothing installed
    with pytest.raises(GraphvizNotFound, match="apt-get install graphviz") as info:
        graph.render("never.svg")
    assert "brew install graphviz" in str(info.value)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed (scripts/setup.sh)")
def test_renders_svg(Value, tmp_path):
    _, out = expression(Value)
    path = draw_dot(out).render(tmp_path / "graph.svg")
    text = Path(path).read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "tanh" in text
