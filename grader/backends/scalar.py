"""The API that micrograd cases are written against, shared by both scalar backends.

A case sees `lib.value(x)`, Python operators and the methods of `Node`, `lib.backward(y)`,
`lib.grad(x)` and `lib.mlp(...)`. `MicrogradBackend` maps them onto a submission's `Value`;
`TorchScalarBackend` maps them onto float64 PyTorch tensors.
"""

from __future__ import annotations

import random
from typing import Any

from grader.backends.base import Backend
from grader.quantity import Quantity
from grader.trace import Node


def mlp_weights(nin: int, nouts: list[int], seed: int) -> list[list[tuple[list[float], float]]]:
    """Weights for an MLP, the same on both engines: per layer, per neuron, (w, b)."""
    rng = random.Random(seed)
    sizes = [nin, *nouts]
    return [
        [([rng.uniform(-1, 1) for _ in range(sizes[i])], rng.uniform(-0.5, 0.5)) for _ in range(sizes[i + 1])]
        for i in range(len(nouts))
    ]


class Model:
    """An MLP as a case sees it: call it on a list of inputs, list its parameters."""

    def __init__(self, lib: ScalarBackend, raw: Any, params: list[Node], call, zero_grad) -> None:
        self.lib, self.raw, self._params = lib, raw, params
        self._call, self._zero_grad = call, zero_grad

    def __call__(self, xs: list[Any]) -> Node | list[Node]:
        out = self._call([self.lib.unwrap(x) for x in xs])
        if isinstance(out, list):
            return [self.lib.wrap(o, "mlp", tuple(xs)) for o in out]
        return self.lib.wrap(out, "mlp", tuple(xs))

    def parameters(self) -> list[Node]:
        return self._params

    def zero_grad(self) -> None:
        self._zero_grad()


class ScalarBackend(Backend):
    def value(self, x: float, label: str = "") -> Node:
        return self.wrap(self.make_value(float(x)), "leaf", (), {}, label)

    def grad(self, node: Node) -> Quantity | None:
        """The gradient as it is now (later backward calls do not change this snapshot)."""
        return self.grad_of(node.raw)

    def make_value(self, x: float) -> Any:
        raise NotImplementedError

    def local_backward(self, out: Node, out_grad: float = 1.0) -> None:
        """Run only `out`'s own gradient rule, with `out.grad = out_grad`.

        Tests one primitive op in isolation (its inputs must be fresh leaves), so a rule can be
        checked, and named when wrong, before `backward()` exists.
        """
        raise NotImplementedError

    def backward(self, node: Node) -> None:
        raise NotImplementedError

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        raise NotImplementedError
