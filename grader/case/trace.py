"""Expressions that remember how they were built.

A case builds its expression out of `Node`s. A node wraps the backend's own object (a
micrograd `Value`, a needle `Tensor`, a torch tensor) and forwards every operator to it, so
the submission's code does all the work; on the way, the `Tape` writes down each operation
and its inputs. Both engines run the same case, so both tapes have the same shape, node for
node: that is what lets a diagnostic say which operation's gradient went wrong and where it
sits in the expression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How each recorded op is shown in a message; {0}, {1} are the inputs.
FORMATS = {
    "add": "{0} + {1}",
    "radd": "{1} + {0}",
    "sub": "{0} - {1}",
    "rsub": "{1} - {0}",
    "mul": "{0} * {1}",
    "rmul": "{1} * {0}",
    "truediv": "{0} / {1}",
    "rtruediv": "{1} / {0}",
    "pow": "{0}**{1}",
    "rpow": "{1}**{0}",
    "matmul": "{0} @ {1}",
    "neg": "-{0}",
}


@dataclass
class Step:
    """One recorded operation: `op` applied to `inputs` (node indices or constants)."""

    op: str
    inputs: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def to_plain(self) -> dict[str, Any]:
        return {"op": self.op, "inputs": self.inputs, "kwargs": self.kwargs, "label": self.label}


class NodeRef:
    """How a step names another node among its inputs (plain data, unlike the node)."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"#{self.index}"


class Tape:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.nodes: list[Node] = []
        #: each op as `record` was given it: (op, inputs, kwargs, label), made a `Step` when
        #: `steps` is first read
        self._records: list[tuple[str, tuple, dict, str]] = []
        self._steps: list[Step] = []
        #: the node of each backward call, in order
        self.outputs: list[int] = []
        #: without a tape, the nodes backward was called on (what `is_output` asks)
        self.untraced_outputs: list[Node] = []

    def mark_output(self, node: Node) -> None:
        """Remember that backward was called on `node` (its gradient is the seed), once per
        call: a diagnostic needs to know when backward ran more than once. Without a tape
        the node itself is kept, so that its gradient is still known as the seed."""
        if self.enabled and node.index is not None:
            self.outputs.append(node.index)
        elif not self.enabled:
            self.untraced_outputs.append(node)

    def is_output(self, node: Node) -> bool:
        """Was backward called on `node`, with or without a tape?"""
        if node.index is not None:
            return node.index in self.outputs
        return any(node is out for out in self.untraced_outputs)

    def record(self, node: Node, op: str, inputs: tuple, kwargs: dict, label: str = "") -> None:
        if not self.enabled:
            return
        node.index = len(self.nodes)
        self.nodes.append(node)
        self._records.append((op, inputs, kwargs, label))

    @property
    def steps(self) -> list[Step]:
        """Every recorded op as a `Step`, each made when first read: the structure of a
        10**5-op chain that no diagnosis reads costs a list of tuples, not 10**5 steps."""
        for op, inputs, kwargs, label in self._records[len(self._steps) :]:
            refs = [
                NodeRef(x.index) if isinstance(x, Node) and x.index is not None else _plain(x) for x in inputs
            ]
            self._steps.append(Step(op, refs, {k: _plain(v) for k, v in kwargs.items()}, label))
        return self._steps


def _plain(value: Any) -> Any:
    """Constants as plain data (tuples and numbers), for messages and for the cache key."""
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, Node):
        return "<node>"
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


class Node:
    """A backend object, plus where it sits on the tape. Operators go to the backend."""

    __slots__ = ("raw", "lib", "index")

    def __init__(self, raw: Any, lib: Any) -> None:
        self.raw = raw
        self.lib = lib
        self.index: int | None = None

    # arithmetic, including the reflected forms a number on the left needs
    def __add__(self, other):
        return self.lib.apply("add", self, other)

    def __radd__(self, other):
        return self.lib.apply("radd", self, other)

    def __sub__(self, other):
        return self.lib.apply("sub", self, other)

    def __rsub__(self, other):
        return self.lib.apply("rsub", self, other)

    def __mul__(self, other):
        return self.lib.apply("mul", self, other)

    def __rmul__(self, other):
        return self.lib.apply("rmul", self, other)

    def __truediv__(self, other):
        return self.lib.apply("truediv", self, other)

    def __rtruediv__(self, other):
        return self.lib.apply("rtruediv", self, other)

    def __pow__(self, other):
        return self.lib.apply("pow", self, other)

    def __matmul__(self, other):
        return self.lib.apply("matmul", self, other)

    def __neg__(self):
        return self.lib.apply("neg", self)

    # named operations; a backend that lacks one says so when it is used
    def relu(self):
        return self.lib.apply("relu", self)

    def exp(self):
        return self.lib.apply("exp", self)

    def log(self):
        return self.lib.apply("log", self)

    def tanh(self):
        return self.lib.apply("tanh", self)

    def sigmoid(self):
        return self.lib.apply("sigmoid", self)

    def detach(self):
        return self.lib.apply("detach", self)

    def sum(self, axes=None):
        return self.lib.apply("sum", self, axes=axes)

    def reshape(self, shape):
        return self.lib.apply("reshape", self, shape=tuple(shape))

    def broadcast_to(self, shape):
        return self.lib.apply("broadcast_to", self, shape=tuple(shape))

    def transpose(self, axes=None):
        return self.lib.apply("transpose", self, axes=axes)

    def __repr__(self) -> str:
        return f"Node(#{self.index}, {self.raw!r})"
