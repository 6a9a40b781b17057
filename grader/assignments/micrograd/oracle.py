"""The oracle for micrograd cases: PyTorch autograd on float64 scalars."""

from __future__ import annotations

from typing import Any

import torch

from grader.assignments.micrograd.backend import Model, ScalarBackend, mlp_weights
from grader.case.backend import OPERATORS
from grader.case.quantity import Quantity
from grader.case.trace import Node


def _leaf(x: float) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


class TorchScalarBackend(ScalarBackend):
    name = "pytorch"

    ops = {
        **OPERATORS,
        "relu": torch.relu,
        "exp": torch.exp,
        "log": torch.log,
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        # micrograd's detach makes a new leaf that still collects its own gradient
        "detach": lambda a: a.detach().requires_grad_(),
    }

    def make_value(self, x: float) -> torch.Tensor:
        return _leaf(x)

    def after_op(self, node: Node) -> None:
        # `is_leaf`, not `grad_fn is not None`: touching grad_fn gives the graph node a Python
        # wrapper, and freeing a very deep chain of those segfaults (torch 2.x).
        # Without a tape (trace=False: a 10**5-op chain) interior gradients are not kept:
        # retaining them costs more than the ops; backward keeps its output's (see grad_of).
        if self.tape.enabled and node.raw.requires_grad and not node.raw.is_leaf:
            node.raw.retain_grad()

    def backward(self, node: Node) -> None:
        self.tape.mark_output(node)
        # micrograd recomputes interior gradients on every backward (leaves accumulate);
        # torch would accumulate the retained interior ones, so clear them first.
        for i in self._ancestors(node):
            raw = self.tape.nodes[i].raw
            if not raw.is_leaf:
                raw.grad = None
        if not node.raw.is_leaf:
            node.raw.retain_grad()
            node.raw.grad = None
        node.raw.backward(retain_graph=True)
        self.snapshot()

    def local_backward(self, out: Node, out_grad: float = 1.0) -> None:
        self.tape.mark_output(out)
        out.raw.backward(torch.tensor(out_grad, dtype=torch.float64), retain_graph=True)
        out.raw.grad = torch.tensor(out_grad, dtype=torch.float64)

    def set_grad(self, raw: torch.Tensor, grad: float) -> None:
        raw.grad = torch.tensor(grad, dtype=torch.float64)

    def run_rule(self, out: torch.Tensor, out_grad: float, inputs: list[Any]) -> None:
        out.backward(torch.tensor(out_grad, dtype=torch.float64))

    def _ancestors(self, node: Node) -> set[int]:
        if node.index is None:
            return set()
        seen, stack = set(), [node.index]
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            stack.extend(ref.index for ref in self.tape.steps[i].inputs if hasattr(ref, "index"))
        return seen

    def value_of(self, raw: Any) -> Quantity:
        return Quantity((float(raw.detach()),), ())

    def grad_of(self, raw: Any) -> Quantity | None:
        if not raw.is_leaf and not raw.retains_grad:
            return None  # an interior gradient torch did not keep (trace=False): not compared
        return Quantity((0.0 if raw.grad is None else float(raw.grad),), ())

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        layers = [
            [([_leaf(w) for w in ws], _leaf(b)) for ws, b in layer] for layer in mlp_weights(nin, nouts, seed)
        ]
        params = [p for layer in layers for ws, b in layer for p in (*ws, b)]

        def call(xs: list[Any]) -> Any:
            for i, layer in enumerate(layers):
                outs = [sum((w * x for w, x in zip(ws, xs, strict=True)), b) for ws, b in layer]
                xs = outs if i == len(layers) - 1 else [torch.relu(o) for o in outs]
            for x in xs:
                if not x.is_leaf:
                    x.retain_grad()
            return xs[0] if len(xs) == 1 else xs

        def zero_grad() -> None:
            for p in params:
                p.grad = None

        nodes = self.parameter_nodes(params, nin, nouts)
        return Model(self, layers, nodes, call, zero_grad)


ORACLE = TorchScalarBackend
