"""Draw an expression graph as a Graphviz picture, in the style of micrograd's `draw_dot`.

Every value is a record node `label | data | grad`; every operation is a small oval between
its inputs and its output, so edges read inputs -> op -> output. Works on a micrograd `Value`
(`_prev`, `_op`, `data`, `grad`, `label`) and on a needle `Tensor` (`inputs`, `op`, `grad`,
`cached_data` / `realize_cached_data()` / `numpy()`), for which it shows the shape and a short
summary of the array instead of a number.

The graph is built with the `graphviz` package, so `Graph.source` (DOT text) needs nothing
else installed; only rendering runs Graphviz's `dot` executable. The walk is iterative
(graphs may be far deeper than Python's recursion limit) and breadth-first from the output,
so when a graph has more than `max_nodes` values the ones kept are those nearest the
output, and the picture says so.
"""

from __future__ import annotations

import math
import shutil
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import graphviz

MAX_NODES = 500
HIGHLIGHT_COLOR = "#d62728"  # the outline of a highlighted node
HIGHLIGHT_FILL = "#ffd6d6"  # and its fill
FORMATS = ("svg", "png", "pdf")
RANKDIRS = ("LR", "RL", "TB", "BT")

INSTALL_HINT = (
    "Graphviz's `dot` program was not found on PATH, so the graph cannot be rendered.\n"
    "Install Graphviz (the program, not only the Python package):\n"
    "  Debian/Ubuntu:  sudo apt-get install graphviz\n"
    "  macOS:          brew install graphviz\n"
    "  conda:          conda install graphviz\n"
    "Without it, `Graph.source` still gives the DOT text, which any Graphviz viewer "
    "(or https://dreampuf.github.io/GraphvizOnline) can draw."
)


class GraphvizNotFound(RuntimeError):
    """Rendering needs Graphviz's `dot` executable, and it is not installed."""

    def __init__(self, message: str = INSTALL_HINT) -> None:
        super().__init__(message)


class Graph:
    """A drawn graph: its DOT source, and ways to render it with Graphviz."""

    def __init__(self, dot: graphviz.Digraph, nodes: int, total: int) -> None:
        self.dot = dot
        self.nodes = nodes  # values drawn
        self.total = total  # values in the graph
        self.truncated = total > nodes

    @property
    def source(self) -> str:
        return self.dot.source

    def pipe(self, format: str = "svg") -> bytes:
        """The rendered picture as bytes; raises GraphvizNotFound when `dot` is missing."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
        if shutil.which("dot") is None:
            raise GraphvizNotFound()
        try:
            return self.dot.pipe(format=format)
        except graphviz.ExecutableNotFound:
            raise GraphvizNotFound() from None
        except graphviz.CalledProcessError as exc:
            err = (exc.stderr or b"").decode("utf-8", "replace").strip()
            raise RuntimeError(f"dot failed (exit code {exc.returncode}): {err}") from None

    def render(self, path: str | Path, format: str = "svg") -> Path:
        """Write the picture to `path` (exactly that name) and return it."""
        path = Path(path)
        path.write_bytes(self.pipe(format))
        return path

    def _repr_svg_(self) -> str | None:
        # Jupyter falls back to the text repr when this returns None.
        if shutil.which("dot") is None:
            return None
        return self.pipe("svg").decode("utf-8")

    def __str__(self) -> str:
        return self.source

    def __repr__(self) -> str:
        drawn = f"{self.nodes} of {self.total} values" if self.truncated else f"{self.nodes} values"
        note = "" if shutil.which("dot") else "; Graphviz `dot` not found: .source works, rendering does not"
        return f"<Graph: {drawn}{note}>"


# ---- reading a node, whichever engine made it ----


def _children(node: object) -> list:
    if hasattr(node, "_prev"):
        return list(node._prev or ())
    return list(getattr(node, "inputs", None) or ())


def _op_name(node: object) -> str:
    if hasattr(node, "_prev"):  # micrograd
        return str(getattr(node, "_op", "") or "")
    op = getattr(node, "op", None)
    if op is None:
        return ""
    params = []
    for key, value in getattr(op, "__dict__", {}).items():
        if value is not None and isinstance(value, (int, float, str, tuple, list)):
            params.append(f"{key}={value}" if not isinstance(value, (int, float)) else f"{value:g}")
    name = type(op).__name__
    return f"{name}({', '.join(params)})" if params else name


def _number(x: object) -> str:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return _short(repr(x))
    if math.isnan(f) or math.isinf(f):
        return str(f)
    if f == 0 or 1e-3 <= abs(f) < 1e5:
        return f"{f:.4f}"
    return f"{f:.3e}"


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _array(node: object):
    """The node's data as a NumPy array, or None when it is not computed (lazy) or unreadable."""
    import numpy as np

    if hasattr(node, "cached_data"):
        data = node.cached_data
        if data is None:
            return None  # lazy: drawing must not compute it
    elif hasattr(node, "realize_cached_data"):
        data = node.realize_cached_data()
    elif hasattr(node, "numpy"):
        data = node.numpy()
    else:
        data = getattr(node, "data", None)
    try:
        return np.asarray(data)
    except Exception:
        return None


def _summary(arr) -> str:
    if arr is None:
        return "not computed"
    if arr.size == 1:
        return _number(arr.reshape(()).item())
    if arr.size <= 4:
        return "[" + ", ".join(_number(v) for v in arr.reshape(-1).tolist()) + "]"
    try:
        return f"mean {_number(arr.mean())}, range [{_number(arr.min())}, {_number(arr.max())}]"
    except Exception:
        return f"{arr.size} elements"


def _fields(node: object) -> tuple[str, str, str]:
    """(label, data, grad) as plain text."""
    given = getattr(node, "draw_fields", None)
    if given is not None:  # a recorded node (`draw_graph`) already knows what to say
        return given
    label = str(getattr(node, "label", "") or "")
    if hasattr(node, "_prev"):  # micrograd: scalars
        return (
            label,
            f"data {_number(getattr(node, 'data', None))}",
            f"grad {_number(getattr(node, 'grad', None))}",
        )
    arr = _array(node)
    shape = "shape ?" if arr is None else f"shape {tuple(arr.shape)} {arr.dtype}"
    label = f"{label}\n{shape}" if label else shape
    try:
        grad = getattr(node, "grad", None)
    except Exception:
        grad = None
    grad_text = "grad None" if grad is None else f"grad {_summary(_array(grad))}"
    return label, f"data {_summary(arr)}", grad_text


# ---- labels ----


def _escape_record(text: str) -> str:
    """One field of a record label: the record syntax characters are escaped (the graphviz
    package quotes the label as a whole, but `|{}<>` inside it would start new fields)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch in '{}|<>"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch != "\r":
            out.append(ch)
    return "".join(out)


def _is_node(obj: object) -> bool:
    return any(hasattr(obj, a) for a in ("_prev", "inputs", "_op", "op"))


def _highlight_ids(highlight: object) -> set[int]:
    if highlight is None:
        return set()
    if _is_node(highlight) or not isinstance(highlight, Iterable):
        return {id(highlight)}
    return {id(h) for h in highlight}


def draw_dot(
    root: object, highlight: object = None, rankdir: str = "LR", max_nodes: int = MAX_NODES
) -> Graph:
    """The graph that `root` was computed from, as a `Graph` (DOT source, render, Jupyter SVG).

    `root` may also be a list of outputs (a case that returns several), drawn as one graph.
    `highlight`: a node, or a collection of nodes, drawn in red (diagnostics use it to point
    at the wrong node). At most `max_nodes` values are drawn, those nearest the output.
    """
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, not {rankdir!r}")
    if max_nodes < 1:
        raise ValueError("max_nodes must be at least 1")
    marked = _highlight_ids(highlight)

    # Breadth-first from the output; every value is counted, the first max_nodes are drawn.
    roots = list(root) if isinstance(root, list) else [root]
    if not roots:
        raise ValueError("nothing to draw: no root")
    drawn = list({id(r): r for r in roots}.values())[:max_nodes]
    ids: dict[int, str] = {id(node): f"n{k}" for k, node in enumerate(drawn)}
    seen = set(ids)
    queue = deque(drawn)
    total = len(drawn)
    while queue:
        node = queue.popleft()
        for child in _children(node):
            if id(child) in seen:
                continue
            seen.add(id(child))
            total += 1
            if len(drawn) < max_nodes:
                ids[id(child)] = f"n{len(drawn)}"
                drawn.append(child)
            queue.append(child)

    dot = graphviz.Digraph("G", graph_attr={"rankdir": rankdir})
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", color="#555555", arrowsize="0.7")
    for node in drawn:
        name = ids[id(node)]
        label = " | ".join(_escape_record(f) for f in _fields(node))
        style = {"shape": "record"}
        if id(node) in marked:
            style |= {
                "style": "filled,bold",
                "color": HIGHLIGHT_COLOR,
                "fillcolor": HIGHLIGHT_FILL,
                "penwidth": "2",
            }
        dot.node(name, f"{{ {label} }}", **style)
        children = _children(node)
        op = _op_name(node)
        if not children and not op:
            continue
        op_name = f"{name}_op"
        dot.node(
            op_name,
            _short(op or "?", 30),
            shape="ellipse",
            fontsize="10",
            style="filled",
            fillcolor="#eeeeee",
            height="0.3",
            margin="0.05,0.02",
        )
        missing = 0
        for child in children:
            if id(child) in ids:
                dot.edge(ids[id(child)], op_name)
            else:
                missing += 1
        if missing:
            what = f"… {missing} input{'s' if missing > 1 else ''} not drawn"
            dot.node(f"{name}_more", what, shape="plaintext", fontsize="9", fontcolor="#777777")
            dot.edge(f"{name}_more", op_name, style="dashed")
        dot.edge(op_name, name)
    if total > len(drawn):
        note = (
            f"graph truncated: drew {len(drawn)} of {total} values (max_nodes={max_nodes});\n"
            "shown are the values nearest the output"
        )
        dot.node("truncated", note, shape="note", style="filled", fillcolor="#fff3c4", fontsize="10")
    return Graph(dot, nodes=len(drawn), total=total)


# ---- a graph recorded as plain data (a report's `CaseResult.graph`) ----


class _Recorded:
    """A node of a recorded graph, shaped like a micrograd Value for `draw_dot`."""

    def __init__(self, label: str, op: str, fields: tuple[str, str, str]) -> None:
        self.label = label
        self._op = op
        self._prev: list[_Recorded] = []
        self.draw_fields = fields


def _recorded_fields(node: dict) -> tuple[str, str, str]:
    value = f"value {node['value']}"
    if "got_value" in node:
        value += f" (got {node['got_value']})"
    grad = f"grad {node['grad']}"
    if "got_grad" in node:
        grad += f" (got {node['got_grad']})"
    return str(node["name"]), _short(value, 100), _short(grad, 100)


def draw_graph(graph: dict, rankdir: str = "TB") -> Graph:
    """Draw a report's recorded graph (`grader.verdict.graph.case_graph`): PyTorch's value
    and gradient on each node, the submission's where they differ, the wrong node in red."""
    nodes = {n["id"]: _Recorded(str(n["name"]), str(n["op"]), _recorded_fields(n)) for n in graph["nodes"]}
    used: set[int] = set()
    for n in graph["nodes"]:
        node = nodes[n["id"]]
        node._prev = [nodes[i] for i in n["inputs"] if i in nodes]
        used.update(n["inputs"])
        node._prev += [_Recorded(c, "", (c, "constant", "")) for c in n["constants"]]
        if n["not_drawn"]:
            label = f"… {n['not_drawn']} more"
            node._prev.append(_Recorded(label, "", (label, "not drawn", "")))
    roots = [nodes[i] for i in nodes if i not in used]
    shown = draw_dot(
        roots, highlight=nodes.get(graph["wrong"]), rankdir=rankdir, max_nodes=10 * len(nodes) + 1
    )
    if graph["total"] > len(nodes):
        note = f"drew {len(nodes)} of the case's {graph['total']} nodes: those nearest the wrong one"
        shown.dot.node("excerpt", note, shape="note", style="filled", fillcolor="#fff3c4", fontsize="10")
    return shown
