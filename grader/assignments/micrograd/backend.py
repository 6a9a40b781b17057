"""The API that micrograd cases are written against, shared by both scalar backends.

A case sees `lib.value(x)`, Python operators and the methods of `Node`, `lib.backward(y)`,
`lib.grad(x)` and `lib.mlp(...)`. `MicrogradBackend` maps them onto a submission's `Value`;
`TorchScalarBackend` maps them onto float64 PyTorch tensors.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

from grader.assignments.micrograd import OPS
from grader.case.backend import OPERATORS, Backend
from grader.case.quantity import Quantity
from grader.case.trace import Node, NodeRef, Step

#: A probe runs one op's gradient rule alone: its inputs' gradients start at PROBE_SEED and
#: the output's is PROBE_GRAD, so a rule that assigns (`=`) or ignores out.grad shows.
PROBE_SEED, PROBE_GRAD = 0.25, 0.75
#: and the numbers an op wraps as Values inside it (the 2 of `a * 2`) start from WRAPPED_SEED,
#: which no case's number is, so that a rule that reads one's gradient where it needs its
#: value shows (at PROBE_SEED, `a / 4.0`'s rule reading the gradient of 0.25 sent the right
#: number)
WRAPPED_SEED = 0.3819660112501051
#: what the tape's `walk` says of backward() (the adapter's probe, read by the slips): the
#: closures ran from the output back (right), in topological order, the output's alone,
#: breadth first from the output (a node before one that uses it, further from the output),
#: or one of them more than once (once for each path from the output to its node)
RIGHT_WALK, TOPOLOGICAL_WALK, OUTPUT_ALONE, BREADTH_FIRST_WALK, REPEATED_WALK = 1.0, 2.0, 3.0, 4.0, 5.0
#: the most op nodes a tape probes: in a deeper graph, the last made (nearest the output,
#: where the diagnosis starts looking)
MAX_PROBES = 200
#: the most backward() calls whose every node's gradient a tape keeps, one snapshot per call
MAX_PASSES = 8


class ProbeLeaf:
    """A probe's input: a fresh leaf holding `data`; two with one `key` are one leaf."""

    __slots__ = ("key", "data")

    def __init__(self, key: object, data: float) -> None:
        self.key, self.data = key, data


#: the rules an MLP's neurons run on, each probed alone at these inputs (in the order and
#: words of hints.MLP_RUNS_ON): a neuron's w * x and w + b, and relu above and below 0
MLP_PROBES: tuple[tuple[str, list[Any]], ...] = (
    ("mul", [ProbeLeaf("w", -0.8), ProbeLeaf("x", 1.5)]),
    ("add", [ProbeLeaf("w", -0.8), ProbeLeaf("b", 0.3)]),
    ("relu", [ProbeLeaf("x", 1.5)]),
    ("relu", [ProbeLeaf("x", -1.5)]),
)


def composite_parts(op: str, args: list[Any]) -> list[tuple[str, list[Any]]] | None:
    """The primitives the contract builds a composite op from, each as (op, inputs) at the
    data it meets inside: `a / b` is `a * b**-1`, so its parts are `b**-1` and `a * (1/b)`.
    A wrong part's rule is what to name when a composite's gradient is wrong (the student
    wrote `__pow__`'s rule, not `__truediv__`'s). The texts are in hints.BUILT_FROM."""
    x = args[0]
    y = args[1] if len(args) > 1 else None
    node = isinstance(y, ProbeLeaf)
    if op == "neg":
        return [("mul", [x, -1])]
    if op == "sub":
        return [("mul", [y, -1]), ("add", [x, ProbeLeaf("-y", -y.data)])] if node else [("add", [x, -y])]
    if op == "rsub":
        return [("mul", [x, -1]), ("add", [ProbeLeaf("-x", -x.data), y])]
    if op == "truediv" and node:
        return [("pow", [y, -1]), ("mul", [x, ProbeLeaf("1/y", 1.0 / y.data if y.data else 0.0)])]
    if op == "truediv":
        return [("mul", [x, y**-1 if y else 0.0])]
    if op == "rtruediv":
        return [("pow", [x, -1]), ("mul", [ProbeLeaf("1/x", 1.0 / x.data if x.data else 0.0), y])]
    if op in ("radd", "rmul"):
        return [(op[1:], [x, y])]
    return None


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

    def __init__(self, trace: bool = True) -> None:
        super().__init__(trace)
        #: each backward() call's snapshot of every node's gradient (see `snapshot`)
        self.passes: list[list[float]] = []

    def value(self, x: float, label: str = "") -> Node:
        return self.wrap(self.make_value(float(x)), "leaf", (), {}, label)

    def grad(self, node: Node) -> Quantity | None:
        """The gradient as it is now (later backward calls do not change this snapshot)."""
        return self.grad_of(node.raw)

    def make_value(self, x: float) -> Any:
        raise NotImplementedError

    def parameter_nodes(self, params: list[Any], nin: int, nouts: list[int]) -> list[Node]:
        """An MLP's parameters on the tape, layer by layer, neuron by neuron, each neuron's
        weights then its bias; the first also records the layer sizes (a leaf's keywords
        appear in no message): with them a slip's detector can run the MLP on the weights."""
        sizes = {"sizes": (nin, *nouts)}
        return [self.wrap(p, "parameter", (), sizes if i == 0 else {}, f"p{i}") for i, p in enumerate(params)]

    def probe_backward(self) -> None:
        """backward() on the smallest graph with a node used twice, `a * 3 + a`: the grader
        runs it before the cases to learn, in a moment, whether backward() returns."""
        a = self.value(2.0, "a")
        self.backward(a * 3.0 + a)

    def rule_probes(self) -> dict[str, Callable[[], object]]:
        """Each op's gradient rule run alone on the tiniest input, by op, and backward() through
        the tiniest MLP (its neurons apply rules of their own choosing): the grader runs them
        beside `probe_backward` to learn, in a moment, which never return."""
        x, y = ProbeLeaf(0, 1.5), ProbeLeaf(1, 2.0)
        binary = {op for op in OPERATORS if op not in ("neg", "matmul")}

        def args(op: str) -> list[Any]:
            return [x, 2.0] if op == "pow" else [x, y] if op in binary else [x]

        def mlp() -> None:
            model = self.mlp(2, [2, 1], seed=0)
            self.backward(model([self.value(0.5), self.value(-1.5)]))

        probes = {op: functools.partial(self.probe, op, args(op)) for op in OPS if op != "detach"}
        return {**probes, "mlp": mlp}

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

    def run_rule(self, out: Any, out_grad: float, inputs: list[Any]) -> None:
        """Run the gradient rule of `out`'s op alone, with `out_grad` as out's gradient: every
        node the op created between `out` and `inputs`, not only `out`'s own closure."""
        raise NotImplementedError

    def input_indices(self, node: Node) -> list[int]:
        """The tape indices of the nodes `node`'s op was applied to."""
        if node.index is None:
            return []
        return [r.index for r in self.tape.steps[node.index].inputs if isinstance(r, NodeRef)]

    def snapshot(self) -> None:
        """After a backward() call: every node's gradient now. Interior gradients are
        recomputed by each call and leaves add up, so the final tape alone cannot say which
        call went wrong; these snapshots can (a second call that did not start from zero)."""
        if not self.tape.enabled or len(self.passes) > MAX_PASSES:
            return
        grads = []
        for node in self.tape.nodes:
            try:
                grad = self.grad_of(node.raw)
            except Exception:
                grad = None
            grads.append(grad.data[0] if grad is not None else 0.0)
        self.passes.append(grads)

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        """Each op node's entry also holds `rule`, its rule probed alone (and `parts`, the
        rules of the primitives a composite op is built from). When a node's gradient is
        wrong although the rules of all its consumers are right, the fault is in backward()
        (order, reset), not in a rule: the diagnostic can say so. A detach() has no rule to
        probe: its `rule` says whether it returned the very node it detaches (1), through
        which every gradient flows back, or a new leaf (0). With several backward() calls,
        `passes` holds the node's gradient after each."""
        tape = super().read_tape()
        every = [i for i, step in enumerate(self.tape.steps) if step.op in self.ops and step.op != "detach"]
        for i in every[-MAX_PROBES:]:
            step = self.tape.steps[i]
            args = self._probe_args(step)
            tape[i]["rule"] = self.probed_alone(step.op, self.probe, step.op, args, step.kwargs)
            parts = composite_parts(step.op, args)
            if parts:
                rows = [self.probed_alone(op, self.probe, op, a) for op, a in parts]
                if all(r is not None and len(r.data) <= 2 for r in rows):
                    flat = tuple(x for r in rows for x in (*r.data, 0.0, 0.0)[:2])
                    tape[i]["parts"] = Quantity(flat, (len(rows), 2))
        for i, step in enumerate(self.tape.steps):
            if step.op == "mlp" and len(every) <= MAX_PROBES:
                tape[i]["parts"] = self._mlp_parts()
            if step.op == "detach":  # its rule: the share of its gradient it passes back
                node = self.tape.nodes[i]
                inputs = self.input_indices(node)
                passes = bool(inputs) and node.raw is self.tape.nodes[inputs[0]].raw
                tape[i]["rule"] = Quantity((1.0 if passes else 0.0,), (1,))
        if 2 <= len(self.passes) <= MAX_PASSES:
            for i, entry in enumerate(tape):
                grads = tuple(p[i] if i < len(p) else 0.0 for p in self.passes)
                entry["passes"] = Quantity(grads, (len(grads),))
        return tape

    def _mlp_parts(self) -> Quantity | None:
        """The rules an MLP runs on (hints.MLP_RUNS_ON), each probed alone: the tape
        does not see inside the MLP, so this is how a wrong gradient that comes out of it is
        laid at the engine's rule rather than at the MLP's own code."""
        rows = [self.probed_alone(op, self.probe, op, args) for op, args in MLP_PROBES]
        if any(r is None for r in rows):
            return None
        flat = tuple(v for r in rows for v in (*r.data, 0.0, 0.0)[:2])
        return Quantity(flat, (len(rows), 2))

    def _probe_args(self, step: Step) -> list[Any]:
        """A step's inputs as probe inputs: each node a `ProbeLeaf` with its data."""
        args: list[Any] = []
        for ref in step.inputs:
            if isinstance(ref, NodeRef):
                args.append(ProbeLeaf(ref.index, self.value_of(self.tape.nodes[ref.index].raw).data[0]))
            else:
                args.append(ref)
        return args

    def probe(self, op: str, args: list[Any], kwargs: dict | None = None) -> Quantity | None:
        """Apply `op` to fresh leaves holding `args`' data, run its rule alone and return
        what it added to each leaf's gradient (a node used twice, as in `a + a`, is one
        leaf). The leaves start from PROBE_SEED, so a rule that assigns (`=`) shows."""
        try:
            leaves: dict[object, Any] = {}
            for arg in args:
                if isinstance(arg, ProbeLeaf) and arg.key not in leaves:
                    leaves[arg.key] = self.make_value(arg.data)
            raw = [leaves[a.key] if isinstance(a, ProbeLeaf) else a for a in args]
            out = self.ops[op](*raw, **(kwargs or {}))
            for leaf in leaves.values():
                self.set_grad(leaf, PROBE_SEED)
            self.run_rule(out, PROBE_GRAD, list(leaves.values()))
            grads = tuple(self.grad_of(leaf).data[0] - PROBE_SEED for leaf in leaves.values())
            return Quantity(grads, (len(grads),))
        except Exception:  # unknown: the diagnostic falls back to naming the rule
            return None

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        raise NotImplementedError
