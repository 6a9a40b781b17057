"""The API that needle cases are written against, shared by both tensor backends.

`NeedleBackend` maps it onto a submission's needle; `TorchTensorBackend` onto float64
PyTorch tensors, answering every question the way needle's semantics say it should be
answered. A case sees:

    lib.tensor(array, label="", dtype="float64", requires_grad=True)   a leaf (array or Node)
    Node operators and methods: + - * / ** @, unary -, .sum(axes), .reshape(shape),
        .broadcast_to(shape), .transpose(axes), .exp(), .log(), .relu(), .tanh(), .detach()
    lib.add(a, b), lib.add_scalar(a, s), ... lib.matmul(a, b): needle's helpers, each
        recorded on the tape under its own name
    lib.backward(y, out_grad=None)        needle's Tensor.backward: assigns every node's grad
    lib.grad(x), lib.numpy(x)             snapshots (Quantity) of x.grad and x's data
    lib.grad_node(x)                      x.grad as a Node, to differentiate it again
    lib.op_gradient("EWiseMul", [a, b], out_grad, **op_args)
                                          one op's `gradient_as_tuple` in isolation -> Nodes
    lib.topo_order(y)                     find_topo_sort([y]) as tape indices (a Quantity)
    lib.count_nodes(y)                    how many Tensors y reaches through `inputs`
    lib.has_op(x)                         does x remember an op (1.0), or is it a leaf (0.0)?
    with lib.lazy(): ...                  needle.autograd.LAZY_MODE on inside the block
    lib.computed(x), lib.realize(x)       is x's data computed (1.0 / 0.0)? compute it
    lib.differentiate(fn, leaves, out_grad=None)
                                          y = fn(*leaves) and backward; on the oracle the
                                          leaves' gradients come from finite differences

Results leave as `Quantity`s: plain numbers with the dtype the tensor holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from grader.assignments.needle import FEATURES, OP_CLASSES, REFLECTED
from grader.case.backend import Backend, UnknownOp
from grader.case.quantity import Quantity
from grader.case.trace import Node, NodeRef

#: what a tape's `differentiable` entry says of an op's gradient rule, its result differentiated
#: again (a case that differentiates a gradient needs it): fine; computed in NumPy and wrapped
#: in a Tensor (its result has no graph back to out_grad); built with a NumPy array among its
#: operands, and differentiating it fails; differentiating it fails otherwise
DIFFERENTIABLE, IN_NUMPY, NUMPY_OPERAND, NOT_DIFFERENTIABLE = 0.0, 1.0, 2.0, 3.0

#: needle's lowercase helpers that have no operator or method of their own, and the op
#: class each applies (add, matmul, transpose, reshape, ... go through Node's operators)
HELPERS = {
    "add_scalar": "AddScalar",
    "multiply": "EWiseMul",
    "mul_scalar": "MulScalar",
    "power_scalar": "PowerScalar",
    "power": "EWisePow",
    "divide": "EWiseDiv",
    "divide_scalar": "DivScalar",
    "negate": "Negate",
    "exp": "Exp",
    "log": "Log",
    "relu": "ReLU",
    "tanh": "Tanh",
    "summation": "Summation",
}

#: Node operations that build more than one needle Tensor (`a - b` is `a + (-b)`): the tape
#: cannot line them up with the submission's graph node for node, so structural questions
#: (topological order, reachable nodes) refuse them.
COMPOUND_OPS = {"sub": 2, "rsub": 2, "rtruediv": 2}


def compound_parts(op: str, args: list[Any]) -> list[tuple[str, list[Any]]] | None:
    """The ops a compound op is built from (`Tensor.__sub__`, given code: `a - b` is
    `a + (-b)`), each as (the backend's op, its inputs at the data it meets inside: an array
    is a leaf, anything else a constant), in the order hints.BUILT_FROM writes them; None for
    any other op. When the compound's gradient is wrong, the part whose rule, probed alone,
    is wrong is the rule to name (Negate's gradient, which the student wrote)."""
    node = [isinstance(x, np.ndarray) for x in args]
    if op == "sub" and node == [True, True]:
        a, b = args
        return [("negate", [b]), ("add", [a, np.asarray(-b)])]  # asarray: a 0-d array's is a number
    if op == "rsub" and node == [True, False]:
        a, s = args
        return [("negate", [a]), ("add_scalar", [np.asarray(-a), s])]
    if op == "rtruediv" and node == [True, False]:
        a, s = args
        with np.errstate(divide="ignore"):
            return [("power_scalar", [a, -1]), ("mul_scalar", [np.asarray(a**-1.0), s])]
    return None


def on_leaves(inputs: list[Any], leaf: Callable[[np.ndarray], Any]) -> tuple[list[Any], list[Any]]:
    """A part's inputs with each array made a leaf by `leaf` (its constants as they are):
    (the arguments, the leaves)."""
    args = [leaf(x) if isinstance(x, np.ndarray) else x for x in inputs]
    return args, [a for a, x in zip(args, inputs, strict=True) if isinstance(x, np.ndarray)]


def parts_quantity(rows: list[np.ndarray], dtype: str) -> Quantity:
    """Each part's probed gradients (its inputs' flattened, one after the other) as one row,
    rows padded with zeros to one length: the tape's `parts` entry."""
    width = max(row.size for row in rows)
    table = np.zeros((len(rows), width), dtype=np.float64)
    for k, row in enumerate(rows):
        table[k, : row.size] = row
    return quantity(table, dtype)


def fixed_out_grad(shape: tuple[int, ...]) -> np.ndarray:
    """The out_grad a rule is probed with where a node's own gradient is known on one side
    only: in a case that differentiates a gradient, PyTorch keeps no gradient of the first
    graph's interior nodes once backward has run through the gradient, and the submission's
    node holds whatever its second backward left there. Both sides then probe each rule with
    this instead (a tape's `rule_fixed`, on nodes of floating-point data). Not all ones: a
    rule that forgets to multiply by out_grad would pass those; and no zeros, which would hide
    a term."""
    size = int(np.prod(shape, dtype=np.int64))
    return (0.75 + 0.125 * (np.arange(size) % 5)).reshape(shape)


def as_float_array(array: Any, dtype: str) -> np.ndarray:
    return np.array(array, dtype=dtype)


def quantity(array: Any, dtype: str | None = None) -> Quantity:
    return Quantity.from_array(np.asarray(array), dtype)


def flag(value: bool) -> Quantity:
    return Quantity((1.0 if value else 0.0,), ())


def indices(values: Sequence[int]) -> Quantity:
    return Quantity(tuple(float(v) for v in values), (len(values),))


class TensorBackend(Backend):
    """What both tensor backends share: the case-facing helpers and the tape's structure."""

    vocabulary = OP_CLASSES + FEATURES
    needs_depend_on_arguments = True

    def probe_backward(self) -> None:
        """backward() on the smallest graph with a tensor used twice, `(a * 3 + a).sum()`: the
        grader runs it before the cases to learn, in a moment, whether backward() returns."""
        a = self.tensor(np.array([2.0, -1.0]), "a")
        self.backward((a * 3.0 + a).sum())

    def __init__(self, trace: bool = True) -> None:
        # The tape is always kept: topological order, reachable nodes and the oracle's
        # backward need its structure. `trace=False` only skips reading it out.
        super().__init__(trace=True)
        self.read_full_tape = trace

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        return super().read_tape() if self.read_full_tape else []

    def read_values(self) -> list[dict[str, Quantity | None]]:
        return super().read_values() if self.read_full_tape else []

    # ---- needle's helpers, each recorded under its own name ----

    def add(self, a, b):
        return self.apply("add", a, b)

    def add_scalar(self, a, scalar):
        return self.apply("add_scalar", a, scalar)

    def multiply(self, a, b):
        return self.apply("multiply", a, b)

    def mul_scalar(self, a, scalar):
        return self.apply("mul_scalar", a, scalar)

    def power_scalar(self, a, scalar):
        return self.apply("power_scalar", a, scalar)

    def power(self, a, b):
        return self.apply("power", a, b)

    def divide(self, a, b):
        return self.apply("divide", a, b)

    def divide_scalar(self, a, scalar):
        return self.apply("divide_scalar", a, scalar)

    def negate(self, a):
        return self.apply("negate", a)

    def exp(self, a):
        return self.apply("exp", a)

    def log(self, a):
        return self.apply("log", a)

    def relu(self, a):
        return self.apply("relu", a)

    def tanh(self, a):
        return self.apply("tanh", a)

    def transpose(self, a, axes=None):
        return self.apply("transpose", a, axes=axes)

    def reshape(self, a, shape):
        return self.apply("reshape", a, shape=tuple(shape))

    def broadcast_to(self, a, shape):
        return self.apply("broadcast_to", a, shape=tuple(shape))

    def summation(self, a, axes=None):
        return self.apply("summation", a, axes=axes)

    def matmul(self, a, b):
        return self.apply("matmul", a, b)

    # ---- composed from the backend's primitives ----

    def differentiate(self, fn, leaves: Sequence[Node], out_grad: Any = None) -> Node:
        """`y = fn(*leaves)`, then backward. The oracle overrides this to take the leaves'
        gradients from finite differences instead of autograd (a second oracle)."""
        y = fn(*leaves)
        self.backward(y, out_grad)
        return y

    @contextlib.contextmanager
    def lazy(self) -> Iterator[None]:
        previous = self.set_lazy(True)
        try:
            yield
        finally:
            self.set_lazy(previous)

    def set_lazy(self, on: bool) -> bool:
        raise NotImplementedError

    # ---- the tape's structure ----

    def input_indices(self, i: int) -> list[int]:
        return [r.index for r in self.tape.steps[i].inputs if isinstance(r, NodeRef)]

    def op_class(self, op_name: str, op_args: dict | None = None) -> str:
        """A needle op class a case tests in isolation (a typo is the case's bug); the case
        needs it, and `int-axes` too for a Summation over an int, as `needs_of` says."""
        if op_name not in OP_CLASSES:
            raise UnknownOp(f"needle has no op class {op_name!r}; the classes are {', '.join(OP_CLASSES)}")
        self.used.add(op_name)
        if op_name == "Summation" and isinstance((op_args or {}).get("axes"), int):
            self.used.add("int-axes")
        return op_name

    def needs_of(self, op: str, args: tuple, kwargs: dict) -> tuple[str, ...]:
        """The op classes a case-facing op builds (`a - b`: EWiseAdd and Negate; `a - 2`:
        AddScalar), and `int-axes` for a summation over an int."""
        pair = NEEDLE_CLASSES.get(op)
        if pair is None:
            return ()
        tensors = sum(isinstance(a, Node) for a in args)
        classes = pair[0] if tensors >= 2 or len(args) == 1 else pair[1]
        needs = tuple(classes.split(" and "))
        if f"__{op}__" in REFLECTED:
            needs += (f"__{op}__",)
        if op in ("sum", "summation") and isinstance(kwargs.get("axes"), int):
            needs += ("int-axes",)
        return needs

    def check_simple(self, i: int, question: str) -> None:
        op = self.tape.steps[i].op
        if op in COMPOUND_OPS or op == "grad" or op.endswith(".gradient"):
            raise ValueError(
                f"{question} needs ops that build one needle Tensor each; "
                f"'{op}' does not (write `a + (-b)` for `a - b`, `a * b**-1` for `a / b`)"
            )


#: the op a case-facing name builds in needle: (with a tensor operand, with a number)
NEEDLE_CLASSES = {
    "add": ("EWiseAdd", "AddScalar"),
    "radd": ("EWiseAdd", "AddScalar"),
    "sub": ("EWiseAdd and Negate", "AddScalar"),
    "rsub": ("AddScalar and Negate", "AddScalar and Negate"),
    "mul": ("EWiseMul", "MulScalar"),
    "rmul": ("EWiseMul", "MulScalar"),
    "multiply": ("EWiseMul", "EWiseMul"),
    "mul_scalar": ("MulScalar", "MulScalar"),
    "truediv": ("EWiseDiv", "DivScalar"),
    "rtruediv": ("PowerScalar and MulScalar", "PowerScalar and MulScalar"),
    "divide": ("EWiseDiv", "EWiseDiv"),
    "divide_scalar": ("DivScalar", "DivScalar"),
    "pow": ("EWisePow", "PowerScalar"),
    "power": ("EWisePow", "EWisePow"),
    "power_scalar": ("PowerScalar", "PowerScalar"),
    "add_scalar": ("AddScalar", "AddScalar"),
    "neg": ("Negate", "Negate"),
    "negate": ("Negate", "Negate"),
    "exp": ("Exp", "Exp"),
    "log": ("Log", "Log"),
    "relu": ("ReLU", "ReLU"),
    "tanh": ("Tanh", "Tanh"),
    "matmul": ("MatMul", "MatMul"),
    "sum": ("Summation", "Summation"),
    "summation": ("Summation", "Summation"),
    "reshape": ("Reshape", "Reshape"),
    "broadcast_to": ("BroadcastTo", "BroadcastTo"),
    "transpose": ("Transpose", "Transpose"),
}
