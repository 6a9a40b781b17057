"""The API that micrograd cases are written against, shared by both scalar backends.

A case sees `lib.value(x)`, Python operators and the methods of `Node`, `lib.backward(y)`,
`lib.grad(x)` and `lib.mlp(...)`. `MicrogradBackend` maps them onto a submission's `Value`;
`TorchScalarBackend` maps them onto float64 PyTorch tensors.
"""

from __future__ import annotations

import random
from typing import Any

from grader.case.backend import Backend
from grader.case.quantity import Quantity
from grader.case.trace import Node, NodeRef, Step

#: The ops a micrograd case may need, named as the case writes them (`rsub` is `2 - a`,
#: `Value.__rsub__`): what a scope file lists and what "not graded: needs tanh" names.
OPS = (
    "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "neg",
    "relu", "exp", "log", "tanh", "sigmoid", "detach",
)  # fmt: skip
#: what every case about accumulation, depth and repeated backward can be written with
CORE = ("add", "radd", "mul", "rmul", "pow")
#: a micrograd case relies on nothing but ops
FEATURES: tuple[str, ...] = ()

#: A probe runs one op's gradient rule alone: its inputs' gradients start at PROBE_SEED and
#: the output's is PROBE_GRAD, so a rule that assigns (`=`) or ignores out.grad shows.
PROBE_SEED, PROBE_GRAD = 0.25, 0.75
#: the most op nodes a tape probes (a long chain is about backward(), not about its rules)
MAX_PROBES = 200


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
    vocabulary = OPS

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

    def set_grad(self, raw: Any, grad: float) -> None:
        raise NotImplementedError

    def run_rule(self, out: Any, out_grad: float) -> None:
        """Run the gradient rule of `out`'s op alone, with `out_grad` as out's gradient."""
        raise NotImplementedError

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        """Each op node's entry also holds `rule`, its rule probed alone. When a node's
        gradient is wrong although the rules of all its consumers are right, the fault is in
        backward() (order, reset), not in a rule: the diagnostic can say so."""
        tape = super().read_tape()
        ops = [i for i, step in enumerate(self.tape.steps) if step.op in self.ops and step.op != "detach"]
        if len(ops) <= MAX_PROBES:
            for i in ops:
                tape[i]["rule"] = self.probe_rule(self.tape.steps[i])
        return tape

    def probe_rule(self, step: Step) -> Quantity | None:
        """Apply `step`'s op to fresh leaves holding its inputs' data, run its rule alone and
        return each leaf's gradient (a node used twice, as in `a + a`, is one leaf)."""
        try:
            leaves: dict[int, Any] = {}
            for ref in step.inputs:
                if isinstance(ref, NodeRef) and ref.index not in leaves:
                    data = self.value_of(self.tape.nodes[ref.index].raw).data[0]
                    leaves[ref.index] = self.make_value(data)
            args = [leaves[ref.index] if isinstance(ref, NodeRef) else ref for ref in step.inputs]
            out = self.ops[step.op](*args, **step.kwargs)
            for leaf in leaves.values():
                self.set_grad(leaf, PROBE_SEED)
            self.run_rule(out, PROBE_GRAD)
            grads = tuple(self.grad_of(leaf).data[0] for leaf in leaves.values())
            return Quantity(grads, (len(grads),))
        except Exception:  # unknown: the diagnostic falls back to naming the rule
            return None

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        raise NotImplementedError
