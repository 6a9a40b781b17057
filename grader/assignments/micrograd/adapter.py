"""A submission's micrograd, driven by cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.assignments.micrograd.backend import OPS, Model, ScalarBackend, mlp_weights
from grader.case.backend import OPERATORS
from grader.case.loading import load_package
from grader.case.quantity import Quantity


def _number(x: Any) -> float:
    return float(x)


#: where each op lives on `Value`, and how a probe applies it to Value(1.5) (and 2.0)
ATTRIBUTES = {
    "add": "__add__", "radd": "__radd__", "sub": "__sub__", "rsub": "__rsub__",
    "mul": "__mul__", "rmul": "__rmul__", "truediv": "__truediv__", "rtruediv": "__rtruediv__",
    "pow": "__pow__", "neg": "__neg__",
}  # fmt: skip


def _probe(op: str, v: Any) -> Any:
    """Apply `op` forward to the Value `v` (and the number 2.0, on the side the op says)."""
    if op == "pow":
        return v**2
    if op == "neg":
        return -v
    if op in OPERATORS:
        return OPERATORS[op](v, 2.0)
    return getattr(v, op)()


class MicrogradBackend(ScalarBackend):
    name = "micrograd"

    def __init__(self, modules: dict, trace: bool = True) -> None:
        super().__init__(trace)
        self.engine = modules["engine"]
        self.nn = modules.get("nn")
        self.Value = self.engine.Value

    @classmethod
    def load(cls, directory: str | Path) -> dict:
        return load_package(directory, "micrograd", ("engine", "nn"))

    ops = {
        **OPERATORS,
        "relu": lambda a: a.relu(),
        "exp": lambda a: a.exp(),
        "log": lambda a: a.log(),
        "tanh": lambda a: a.tanh(),
        "sigmoid": lambda a: a.sigmoid(),
        "detach": lambda a: a.detach(),
    }

    def make_value(self, x: float) -> Any:
        return self.Value(x)

    def lacking(self, needs) -> list[str]:
        """An op is lacking when `Value` has no such method or operator, or when applying it
        to a fresh Value raises NotImplementedError in its forward computation. Only the
        forward runs: a rule (`_backward`) that raises, as the untouched template's do, is
        not looked at here, so it fails its cases instead of leaving them ungraded."""
        return [need for need in needs if need in OPS and self._lacks(need)]

    def _lacks(self, op: str) -> bool:
        if getattr(self.Value, ATTRIBUTES.get(op, op), None) is None:
            return True
        try:
            _probe(op, self.Value(1.5))
        except NotImplementedError:
            return True
        except Exception:  # it exists and fails otherwise: its cases say how
            return False
        return False

    def backward(self, node) -> None:
        self.tape.mark_output(node)
        node.raw.backward()

    def local_backward(self, out, out_grad: float = 1.0) -> None:
        self.tape.mark_output(out)
        self.run_rule(out.raw, out_grad)

    def set_grad(self, raw: Any, grad: float) -> None:
        raw.grad = grad

    def run_rule(self, out: Any, out_grad: float) -> None:
        out.grad = out_grad
        out._backward()

    def value_of(self, raw: Any) -> Quantity:
        return Quantity((_number(raw.data),), ())

    def grad_of(self, raw: Any) -> Quantity:
        return Quantity((_number(raw.grad),), ())

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        model = self.nn.MLP(nin, list(nouts))
        params = list(model.parameters())
        flat = [v for layer in mlp_weights(nin, nouts, seed) for w, b in layer for v in (*w, b)]
        if len(params) != len(flat):
            raise ValueError(f"MLP({nin}, {nouts}) has {len(params)} parameters, expected {len(flat)}")
        for p, v in zip(params, flat, strict=True):
            p.data = v
        nodes = [self.wrap(p, "parameter", (), {}, f"p{i}") for i, p in enumerate(params)]
        return Model(self, model, nodes, model, model.zero_grad)


#: what `grader.assignments.get` hands the grader
ENGINE = MicrogradBackend
