"""The oracle for needle cases: PyTorch autograd on float64 tensors, with needle's semantics.

Values and gradients come from PyTorch. What PyTorch has no notion of is computed here from
the tape, by needle's rules: the topological order (post-order depth-first over each op's
inputs), the nodes a graph reaches (a detached Tensor, and in eager mode any result that
needs no gradient, is a leaf), and whether lazy mode has computed a node yet.

backward follows needle: every node of the output's graph gets its gradient *assigned* for
this output (earlier ones are replaced, not added to), with `create_graph=True` so that a
gradient can be differentiated again. After such a second-order backward, the gradient of
an interior node of the first graph depends on how the submission wrote its gradient rules
(it is a node of their graph too), so it is not known and not compared; leaves are.

`differentiate` is the second oracle: the leaves' gradients come from central finite
differences of the float64 forward pass, and must agree with autograd's before they are used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from grader.assignments.needle.backend import (
    COMPOUND_OPS,
    HELPERS,
    TensorBackend,
    as_float_array,
    compound_parts,
    fixed_out_grad,
    flag,
    indices,
    on_leaves,
    parts_quantity,
    quantity,
)
from grader.case.backend import OPERATORS
from grader.case.quantity import Quantity
from grader.case.trace import Node, NodeRef
from grader.verdict.compare import TOLERANCES

PRECISION = ["float64", "float32", "float16"]


def _sum(a: torch.Tensor, axes: Any = None) -> torch.Tensor:
    if axes is None:
        return a.sum()
    if isinstance(axes, int):
        return a.sum(dim=axes)
    if len(axes) == 0:  # numpy sums over no axis; torch would sum over all of them
        return a * 1.0
    return a.sum(dim=tuple(axes))


def _transpose(a: torch.Tensor, axes: Any = None) -> torch.Tensor:
    return a.transpose(-1, -2) if axes is None else a.transpose(*axes)


#: the op classes of needle, for `op_gradient`: inputs, then the op's constructor arguments
OP_FUNCTIONS = {
    "EWiseAdd": lambda a, b: a + b,
    "AddScalar": lambda a, s: a + s,
    "EWiseMul": lambda a, b: a * b,
    "MulScalar": lambda a, s: a * s,
    "PowerScalar": lambda a, s: a**s,
    "EWisePow": lambda a, b: a**b,
    "EWiseDiv": lambda a, b: a / b,
    "DivScalar": lambda a, s: a / s,
    "Negate": lambda a: -a,
    "Exp": torch.exp,
    "Log": torch.log,
    "ReLU": torch.relu,
    "Tanh": torch.tanh,
    "Transpose": _transpose,
    "Reshape": lambda a, shape: a.reshape(tuple(shape)),
    "BroadcastTo": lambda a, shape: torch.broadcast_to(a, tuple(shape)),
    "Summation": _sum,
    "MatMul": lambda a, b: a @ b,
}


class OracleDisagreement(AssertionError):
    """Finite differences and autograd disagree: the expected values cannot be trusted."""


class TorchTensorBackend(TensorBackend):
    name = "pytorch"

    ops = {
        **OPERATORS,
        "sum": _sum,
        "reshape": lambda a, shape: a.reshape(shape),
        "broadcast_to": lambda a, shape: torch.broadcast_to(a, shape),
        "transpose": _transpose,
        # needle's detach: a new leaf that needs no gradient
        "detach": lambda a: a.detach(),
        **{helper: OP_FUNCTIONS[op_class] for helper, op_class in HELPERS.items()},
    }

    def __init__(self, trace: bool = True) -> None:
        super().__init__(trace)
        #: the dtype the case asked for (the coarsest of its leaves'): what needle would hold
        self.dtype = "float64"
        #: id(raw) -> its gradient after the last backward that reached it (None: unknown)
        self.grads: dict[int, torch.Tensor | None] = {}
        #: tape indices of nodes that are leaves in needle's graph although made by an op
        self.cut: set[int] = set()
        #: tape index of a `grad` node -> the output whose backward made that gradient
        self.grad_sources: dict[int, int] = {}
        #: id(raw) -> the output of the backward that gave it its gradient
        self.source_of: dict[int, int] = {}
        self.lazy_on = False
        #: tape indices made in lazy mode whose data needle has not computed yet
        self.pending: set[int] = set()

    # ---- leaves and ops ----

    def tensor(self, array: Any, label: str = "", dtype: str = "float64", requires_grad: bool = True) -> Node:
        if PRECISION.index(dtype) > PRECISION.index(self.dtype):
            self.dtype = dtype
        if isinstance(array, Node):
            array = array.raw.detach().numpy()
        # float32 cases: torch computes in float64 from the float32-rounded inputs
        data = torch.tensor(as_float_array(array, dtype).astype(np.float64), dtype=torch.float64)
        return self.wrap(data.requires_grad_(requires_grad), "leaf", (), {}, label)

    def after_op(self, node: Node) -> None:
        i = node.index
        if i is None:
            return
        step = self.tape.steps[i]
        if step.op == "detach":
            self.cut.add(i)  # needle's detach realizes its input: it copies the data
            self._realize(self.input_indices(i))
        elif self.lazy_on:
            self.pending.add(i)
        elif not node.raw.requires_grad:
            self.cut.add(i)  # eager needle makes a result that needs no gradient a leaf

    # ---- the graph needle would build ----

    def _graph(self, roots: Sequence[int], question: str = "") -> list[int]:
        """The nodes `roots` depend on, in the order needle's find_topo_sort lists them.

        needle's order is a post-order depth-first one: a node is placed once each of its
        inputs is, and the inputs are taken in the order the op names them. The walk here
        keeps no stack: it goes down to the first input not yet placed, remembering where
        it came from, and once every input of a node is placed it places the node and
        climbs back to the node it came from, which looks again for an input still to
        place. Chains deeper than Python's recursion limit need nothing more.
        """
        placed: dict[int, None] = {}  # the order, kept by the dict's insertion order
        came_from: dict[int, int | None] = {}
        inputs: dict[int, list[int]] = {}
        for root in roots:
            came_from[root] = None
            current: int | None = None if root in placed else root
            while current is not None:
                if current not in inputs:
                    inputs[current] = self._inputs(current, question)
                below = next((j for j in inputs[current] if j not in placed), None)
                if below is None:
                    placed[current] = None
                    current = came_from[current]
                else:
                    came_from[below] = current
                    current = below
        return list(placed)

    def _inputs(self, i: int, question: str) -> list[int]:
        if i in self.cut:
            return []
        if question:
            self.check_simple(i, question)
        if self.tape.steps[i].op == "grad":
            return []  # a gradient's inputs are the nodes its rule built, not on the tape
        return self.input_indices(i)

    def topo_order(self, ys: Node | list[Node]) -> Quantity:
        ys = ys if isinstance(ys, list) else [ys]
        return indices(self._graph([y.index for y in ys], "topo_order"))

    def has_op(self, x: Node) -> Quantity:
        return flag(self.tape.steps[x.index].op != "leaf" and x.index not in self.cut)

    def count_nodes(self, y: Node) -> Quantity:
        return Quantity((float(len(self._graph([y.index], "count_nodes"))),), ())

    # ---- lazy mode ----

    def set_lazy(self, on: bool) -> bool:
        previous, self.lazy_on = self.lazy_on, on
        return previous

    def _realize(self, roots: Sequence[int]) -> None:
        """needle's realize_cached_data: compute a node after its inputs, recursively."""
        stack = [i for i in roots if i in self.pending]
        while stack:
            i = stack.pop()
            if i in self.pending:
                self.pending.discard(i)
                stack.extend(self.input_indices(i))

    def computed(self, x: Node) -> Quantity:
        return flag(x.index not in self.pending)

    def realize(self, x: Node) -> None:
        self._realize([x.index])

    # ---- backward ----

    def _seed(self, y: Node, out_grad: Any) -> torch.Tensor:
        if out_grad is None:
            return torch.ones_like(y.raw)
        if isinstance(out_grad, Node):
            return out_grad.raw.detach()
        return torch.tensor(as_float_array(out_grad, self.dtype).astype(np.float64), dtype=torch.float64)

    def _reach(self, y: int) -> tuple[list[int], set[int], set[int]]:
        """The nodes needle's backward from `y` assigns a gradient to.

        A `grad` node's own graph (the ops its gradient rule built) is not on the tape; it
        may reach any node of the graph whose backward made it. Of those nodes, the
        interior ones get a gradient that depends on how the submission wrote its rules
        (`unknown`), and leaves only reached that way get one only if the math says they
        depend on it (`optional`: no gradient from autograd means none is known).
        """
        direct = self._graph([y])
        indirect: list[int] = []
        done: set[int] = set()
        sources = [i for i in direct if i in self.grad_sources]
        while sources:
            src = self.grad_sources[sources.pop()]
            if src in done:
                continue
            done.add(src)
            found = self._graph([src])
            indirect += found
            sources += [i for i in found if i in self.grad_sources]
        unknown = {i for i in indirect if self.tape.steps[i].op != "leaf"}
        optional = set(indirect) - set(direct)
        return list(dict.fromkeys(direct + indirect)), unknown, optional

    def backward(self, y: Node, out_grad: Any = None) -> None:
        self.tape.mark_output(y)
        seed = self._seed(y, out_grad)
        self._realize([y.index])  # needle's backward reads y's shape
        reached, unknown, optional = self._reach(y.index)
        targets = [i for i in reached if i not in unknown and self.tape.nodes[i].raw.requires_grad]
        for i in reached:
            self.grads[id(self.tape.nodes[i].raw)] = None
        if not targets or not y.raw.requires_grad:
            return
        raws = [self.tape.nodes[i].raw for i in targets]
        grads = torch.autograd.grad(y.raw, raws, seed, create_graph=True, allow_unused=True)
        for i, raw, g in zip(targets, raws, grads, strict=True):
            if g is None and i in optional:
                continue
            self.grads[id(raw)] = torch.zeros_like(raw) if g is None else g
            self.source_of[id(raw)] = y.index

    def grad(self, x: Node) -> Quantity | None:
        return self.grad_of(x.raw)

    def numpy(self, x: Node) -> Quantity:
        self._realize([x.index])
        return self.value_of(x.raw)

    def grad_node(self, x: Node) -> Node:
        grad = self.grads.get(id(x.raw))
        if grad is None:
            raise ValueError("the oracle has no gradient for this node: backward did not reach it")
        node = self.wrap(grad, "grad", (x,))
        self.grad_sources[node.index] = self.source_of[id(x.raw)]
        return node

    def op_gradient(
        self, op_name: str, inputs: list[Node], out_grad: Node, **op_args: Any
    ) -> tuple[Node, ...]:
        raws = [x.raw for x in inputs]
        forward = OP_FUNCTIONS[self.op_class(op_name, op_args)]
        out = self.wrap(forward(*raws, *op_args.values()), op_name, tuple(inputs), op_args)
        grads = torch.autograd.grad(
            out.raw, raws, out_grad.raw.detach(), create_graph=True, allow_unused=True
        )
        return tuple(
            self.wrap(
                torch.zeros_like(r) if g is None else g, f"{op_name}.gradient", (out, out_grad), {"input": i}
            )
            for i, (r, g) in enumerate(zip(raws, grads, strict=True))
        )

    # ---- the second oracle: finite differences ----

    def differentiate(self, fn, leaves: Sequence[Node], out_grad: Any = None, step: float = 1e-3) -> Node:
        y = fn(*leaves)
        self.backward(y, out_grad)
        seed = self._seed(y, out_grad)
        rtol, atol = TOLERANCES["float64"]
        for leaf in leaves:
            if not leaf.raw.requires_grad:
                continue
            numeric = self._finite_difference(fn, leaves, leaf, seed, step)
            autograd = self.grads.get(id(leaf.raw))
            if autograd is None or not np.allclose(autograd.detach().numpy(), numeric, rtol=rtol, atol=atol):
                raise OracleDisagreement(
                    f"finite differences {numeric.tolist()} and autograd "
                    f"{None if autograd is None else autograd.detach().numpy().tolist()} disagree "
                    f"for leaf {leaf.index}"
                )
            self.grads[id(leaf.raw)] = torch.from_numpy(numeric)
        return y

    def _finite_difference(self, fn, leaves, leaf: Node, seed: torch.Tensor, h: float) -> np.ndarray:
        """d sum(seed * fn(leaves)) / d leaf by the five-point stencil (error O(h^4)),
        evaluated off the tape, without autograd."""
        base = leaf.raw.detach()
        grad = np.zeros(base.numel())
        enabled, self.tape.enabled = self.tape.enabled, False
        try:
            with torch.no_grad():
                for k in range(base.numel()):

                    def at(delta: float, k: int = k) -> float:
                        moved = base.clone().reshape(-1)
                        moved[k] += delta
                        args = [Node(moved.reshape(base.shape), self) if x is leaf else x for x in leaves]
                        return float((fn(*args).raw * seed).sum())

                    grad[k] = (8 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12 * h)
        finally:
            self.tape.enabled = enabled
        return grad.reshape(tuple(base.shape))

    # ---- each op's gradient rule, alone ----

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        """Each op node's `rule`: what its op sends each input, given the node's own
        gradient as out_grad; in a case that differentiates a gradient, `rule_fixed` too, given
        `fixed_out_grad` (see `NeedleBackend.read_tape`)."""
        tape = super().read_tape()
        twice = any(step.op == "grad" for step in self.tape.steps)  # a gradient differentiated
        for i, entry in enumerate(tape):
            step = self.tape.steps[i]
            if step.op == "leaf":
                entry["requires_grad"] = flag(self.tape.nodes[i].raw.requires_grad)
            elif step.op in self.ops:
                entry["rule"] = self._probe(i)
                if step.op in COMPOUND_OPS:
                    entry["parts"] = self._parts(i)
                raw = self.tape.nodes[i].raw
                if twice and step.op != "detach" and raw.dtype.is_floating_point:
                    fixed = torch.tensor(fixed_out_grad(tuple(raw.shape)), dtype=raw.dtype)
                    entry["rule_fixed"] = self._probe(i, fixed)
        return tape

    def _probe(self, i: int, out_grad: torch.Tensor | None = None) -> Quantity | None:
        step = self.tape.steps[i]
        raw = self.tape.nodes[i].raw
        grad = torch.ones_like(raw) if step.op == "detach" else self.grads.get(id(raw))
        grad = grad if out_grad is None else out_grad
        if grad is None:
            return None
        leaves, args = [], []
        for ref in step.inputs:
            if isinstance(ref, NodeRef):
                leaves.append(self.tape.nodes[ref.index].raw.detach().clone().requires_grad_(True))
                args.append(leaves[-1])
            else:
                args.append(ref)
        if not leaves:
            return None
        with torch.enable_grad():
            out = self.ops[step.op](*args, **step.kwargs)
            if out.requires_grad:
                found = torch.autograd.grad(out, leaves, grad.detach(), allow_unused=True)
            else:  # detach: nothing flows back
                found = [None] * len(leaves)
        pairs = zip(leaves, found, strict=True)
        flat = [(torch.zeros_like(x) if g is None else g).detach().reshape(-1) for x, g in pairs]
        return quantity(torch.cat(flat).numpy(), self.dtype)

    def _parts(self, i: int) -> Quantity | None:
        """A compound op's parts, each one's gradient given `fixed_out_grad` (see
        `NeedleBackend._parts`)."""
        step = self.tape.steps[i]
        nodes = self.tape.nodes
        args = [nodes[r.index].raw.detach().numpy() if isinstance(r, NodeRef) else r for r in step.inputs]
        parts = compound_parts(step.op, args)
        if parts is None:
            return None
        rows = []
        for op, inputs in parts:
            args, leaves = on_leaves(inputs, lambda x: torch.tensor(x, requires_grad=True))
            with torch.enable_grad():
                out = self.ops[op](*args)
                grad = torch.tensor(fixed_out_grad(tuple(out.shape)), dtype=out.dtype)
                found = torch.autograd.grad(out, leaves, grad, allow_unused=True)
            pairs = zip(leaves, found, strict=True)
            flat = [(torch.zeros_like(x) if g is None else g).detach().reshape(-1) for x, g in pairs]
            rows.append(torch.cat(flat).numpy())
        return parts_quantity(rows, self.dtype)

    # ---- reading results ----

    def value_of(self, raw: Any) -> Quantity:
        return quantity(raw.detach().numpy(), self.dtype)

    def grad_of(self, raw: Any) -> Quantity | None:
        grad = self.grads.get(id(raw))
        return None if grad is None else quantity(grad.detach().numpy(), self.dtype)


ORACLE = TorchTensorBackend
