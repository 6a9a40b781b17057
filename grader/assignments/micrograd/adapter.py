"""A submission's micrograd, driven by cases."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grader.assignments.micrograd import MARKERS, OPS
from grader.assignments.micrograd.backend import (
    BREADTH_FIRST_WALK,
    OUTPUT_ALONE,
    REPEATED_WALK,
    RIGHT_WALK,
    TOPOLOGICAL_WALK,
    WRAPPED_SEED,
    Model,
    ScalarBackend,
    mlp_weights,
)
from grader.case.backend import OPERATORS
from grader.case.loading import Package
from grader.case.quantity import Quantity
from grader.case.run import defined_at

#: the most nodes one op may create (a composite tanh has a handful; more is a runaway graph)
MAX_OP_NODES = 10_000


def _number(x: Any) -> float:
    return float(x)


class ParameterCountError(ValueError):
    """An MLP's parameters() lists another number of Values than its neurons have weights and
    biases: said with which ones it leaves out, placed at the `parameters` that must list
    them (see `_left_out`)."""

    def __init__(self, nin: int, nouts: list[int], params: list[Any], want: int, model: Any, nn: Any) -> None:
        shows, culprit = _left_out(_neurons(model), params) or _counted(nouts, len(params), want)
        #: the `parameters` at fault: the failure's place
        self.where = defined_at(getattr(getattr(nn, culprit, None), "parameters", None))
        got = len(params)
        super().__init__(f"MLP({nin}, {nouts}).parameters() lists {got} Values where it has {want}: {shows}")


def _neurons(model: Any) -> list[list[tuple[list[Any], Any]]] | None:
    """The MLP's (weights, bias) neuron by neuron, layer by layer, where it keeps them as the
    reference does (`layers`, `neurons`, `w`, `b`); None where it keeps them otherwise."""
    try:
        return [[(list(n.w), n.b) for n in layer.neurons] for layer in model.layers]
    except (AttributeError, TypeError):
        return None


#: what parameters() leaves out, where every neuron leaves out the same (`_left_out`, `_counted`)
_NO_BIASES = "{neurons} fewer, one for each neuron: each neuron's bias is left out"
_NO_WEIGHTS = "one for each neuron: each neuron's weights are left out"


def _left_out(layers: list[list[tuple[list[Any], Any]]] | None, params: list[Any]) -> tuple[str, str] | None:
    """What the Values parameters() leaves out have in common, and the class whose
    parameters() leaves them out: every neuron's bias, or its weights (Neuron), whole layers'
    (MLP), every neuron's but each layer's first (Layer); None for anything else."""
    if not layers:
        return None
    listed = {id(p) for p in params}

    def state(values: list[Any]) -> str:
        found = [id(v) in listed for v in values]
        return "all" if all(found) else "none" if not any(found) else "some"

    rows = [[(state(w), state([b])) for w, b in layer] for layer in layers]
    cells = [cell for row in rows for cell in row]
    if all(cell == ("all", "none") for cell in cells):
        return _NO_BIASES.format(neurons=len(cells)), "Neuron"
    if all(cell == ("none", "all") for cell in cells):
        return _NO_WEIGHTS, "Neuron"
    full, empty = ("all", "all"), ("none", "none")
    if all(all(c == full for c in row) or all(c == empty for c in row) for row in rows):
        whole = [k for k, row in enumerate(rows) if all(c == empty for c in row)]
        named = f"layer{'s' if len(whole) > 1 else ''} {', '.join(str(k + 1) for k in whole)}'s"
        which = "the last layer's" if whole == [len(rows) - 1] else named
        return f"{which} weights and biases are left out: MLP.parameters() lists every layer's", "MLP"
    if any(len(row) > 1 for row in rows) and all(row[0] == full and set(row[1:]) <= {empty} for row in rows):
        return "each layer lists its first neuron's weights and bias only: it lists every neuron's", "Layer"
    return None


def _counted(nouts: list[int], got: int, want: int) -> tuple[str, str]:
    """What the count alone shows, where the MLP keeps its neurons otherwise."""
    neurons = sum(nouts)
    if want - got == neurons:
        return _NO_BIASES.format(neurons=neurons), "Neuron"
    if got == neurons:
        return _NO_WEIGHTS, "Neuron"
    return "each neuron lists its nin weights, then its bias", "MLP"


#: the order backward() ran the closures of d = b + e, e = (b * 4) * 5, b = a * 3 in
#: (`_walk`) -> what it says. b feeds d directly and through c = b * 4 and e: one order
#: alone is right, and every breadth-first walk from d runs b's closure before c's
WALKS = {
    ("d", "e", "c", "b"): RIGHT_WALK,
    ("b", "c", "e", "d"): TOPOLOGICAL_WALK,
    ("d",): OUTPUT_ALONE,
    ("d", "b", "e", "c"): BREADTH_FIRST_WALK,
    ("d", "e", "b", "c"): BREADTH_FIRST_WALK,
}


def _noted(ran: list[str], name: str, closure: Callable[[], Any]) -> Any:
    ran.append(name)
    return closure()


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


def requires_grad(raw: Any) -> Quantity | None:
    """A leaf's `requires_grad` as a flag, if it has a plain bool one (the contract has none)."""
    try:
        flag = getattr(raw, "requires_grad", None)
    except Exception:
        return None
    return Quantity((1.0 if flag else 0.0,), ()) if isinstance(flag, bool) else None


def _children(node: Any) -> list[Any]:
    """A node's inputs, each once (by identity: a student's Value may not be hashable)."""
    return list({id(c): c for c in getattr(node, "_prev", ()) or ()}.values())


def in_its_type(current: Any, number: float) -> Any:
    """`number` in the type the engine keeps its gradients in (`current`, a gradient it
    made): a float, or a 0-d or one-element NumPy array of its dtype. A probe that set a
    float where the engine keeps arrays would fail the engine's right rules. NumPy is
    looked up, not imported: an engine that made an array has imported it, and a worker
    whose engine never does is spared its import (a third of a cold worker's time)."""
    np = sys.modules.get("numpy")
    if np is None:
        return float(number)
    if isinstance(current, np.ndarray):
        return np.full(current.shape, number, dtype=current.dtype)
    if isinstance(current, np.generic):
        return type(current)(number)
    return float(number)


def op_nodes(out: Any, inputs: list[Any]) -> list[Any]:
    """The nodes an op created, between its output and its inputs, in topological order
    (`out` last). An op built from other ops (`tanh` as `(e - n) / (e + n)`) has several:
    running only `out._backward` would leave its inputs without a gradient.

    Kahn's algorithm from the output: a node is placed once every node of the op that uses
    it has been (this file reaches students, so it is not the depth-first order their own
    `backward()` is asked to write)."""
    stop = {id(x) for x in inputs}
    nodes = {id(out): out}
    frontier = [out]
    while frontier:
        node = frontier.pop()
        for child in getattr(node, "_prev", ()) or ():
            if id(child) not in stop and id(child) not in nodes:
                nodes[id(child)] = child
                frontier.append(child)
        if len(nodes) > MAX_OP_NODES:
            return [out]
    users = dict.fromkeys(nodes, 0)
    for node in nodes.values():
        for child in _children(node):
            if id(child) in users:
                users[id(child)] += 1
    ready, placed = [out], []
    while ready:
        node = ready.pop()
        placed.append(node)
        for child in _children(node):
            if id(child) in users:
                users[id(child)] -= 1
                if users[id(child)] == 0:
                    ready.append(child)
    return placed[::-1]


#: each module a case may need -> what it defines (found in the package itself when the
#: submission has no such module: a single micrograd.py, or everything in __init__.py)
PROVIDES = {"engine": "Value", "nn": "MLP"}


class OrderedChildren(set):
    """A node's `_prev` that iterates in a fixed order: the same set, compared, tested and
    counted as before, but `for child in node._prev` no longer follows memory addresses.

    A plain set of Values iterates in the order of their addresses, so a backward() whose
    result depends on the order it visits a node's inputs (a rule that assigns where it should
    add, a sort that is not topological) would pass or fail a case by the luck of the heap,
    and a regrade could change a grade. A correct engine gives the same gradients in any
    order, so fixing one costs it nothing. Should the submission change the set afterwards,
    it iterates as a plain set again.
    """

    __slots__ = ("order",)

    def __init__(self, order: list[Any]) -> None:
        super().__init__(order)
        self.order: list[Any] | None = order

    def __iter__(self) -> Iterator[Any]:
        return iter(self.order) if self.order is not None else super().__iter__()

    def _changed(method: Any) -> Any:  # noqa: N805 - wraps the mutators below
        def changed(self: OrderedChildren, *args: Any) -> Any:
            self.order = None  # changed by the submission: a plain set again
            return method(self, *args)

        return changed

    add = _changed(set.add)
    discard = _changed(set.discard)
    remove = _changed(set.remove)
    pop = _changed(set.pop)
    clear = _changed(set.clear)
    update = _changed(set.update)
    intersection_update = _changed(set.intersection_update)
    difference_update = _changed(set.difference_update)
    symmetric_difference_update = _changed(set.symmetric_difference_update)
    __ior__ = _changed(set.__ior__)
    __iand__ = _changed(set.__iand__)
    __isub__ = _changed(set.__isub__)
    __ixor__ = _changed(set.__ixor__)
    del _changed


def _order_key(raw: Any, known: dict[int, int]) -> tuple:
    """The case's nodes first, in the order it made them; then the engine's own nodes by op
    and value (a float compared as a float, anything else by its repr), never by address."""
    index = known.get(id(raw))
    if index is not None:
        return (0, index)
    data = getattr(raw, "data", None)
    value = (0, data) if type(data) is float else (1, repr(data))
    return (1, str(getattr(raw, "_op", "")), value)


def _in_order(children: set, known: dict[int, int]) -> list:
    """`children` sorted by `_order_key`. Most nodes have two inputs, of which the case made
    one or both: their order is read off `known` at once (a 5000-op chain's walk took as
    long as its backward() when every pair was sorted by its keys)."""
    if len(children) == 2:
        a, b = children
        i, j = known.get(id(a)), known.get(id(b))
        if i is not None or j is not None:  # the case's nodes first, in the order it made them
            return [a, b] if j is None or (i is not None and i < j) else [b, a]
    return sorted(children, key=lambda c: _order_key(c, known))


def fix_visiting_order(root: Any, known: dict[int, int]) -> None:
    """Give every node reachable from `root` through `_prev` an `OrderedChildren`: children the
    case built come in the order it built them (`known`: id -> tape index), the nodes the
    engine made on its own (say `b * -1` inside `a - b`) after them, by op and value. Sets of
    one child need no order. Nodes whose `_prev` is not a plain set are walked, not changed.
    Each node is looked at once. An untraced case (a deep chain) is not walked: a chain's
    every visiting order is topological, and the walk would cost a 10**5-op chain half its
    backward()."""
    seen, stack = {id(root)}, [root]
    push, pop, mark = stack.append, stack.pop, seen.add
    while stack:
        node = pop()
        prev = getattr(node, "_prev", None)
        kind = type(prev)
        if kind is set and len(prev) > 1:
            try:
                children = _in_order(prev, known)
                node._prev = OrderedChildren(children)
            except Exception:  # an odd node (a read-only `_prev`, uncomparable data): leave it be
                continue
        elif kind is set or kind is OrderedChildren or isinstance(prev, (set, frozenset, list, tuple)):
            children = prev
        else:
            continue
        try:
            for child in children:
                if id(child) not in seen:
                    mark(id(child))
                    push(child)
        except Exception:  # a container that changes as it is walked: what was reached is enough
            continue


class MicrogradBackend(ScalarBackend):
    name = "micrograd"

    def __init__(self, modules: dict, trace: bool = True) -> None:
        super().__init__(trace)
        self.modules = modules
        self.engine = modules["engine"]
        self.Value = self.engine.Value

    @property
    def nn(self) -> Any:
        """`micrograd.nn`, imported when an MLP case first asks: a missing or broken nn.py
        costs those cases only."""
        return self.modules["nn"]

    @classmethod
    def load(cls, directory: str | Path) -> Package:
        """The submission's micrograd with its engine imported (every case needs `Value`)."""
        package = Package(directory, "micrograd", markers=MARKERS, provides=PROVIDES)
        package.require("engine", PROVIDES["engine"])
        return package

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
        if self.tape.enabled:  # an untraced case is a chain: every visiting order is the same
            fix_visiting_order(node.raw, {id(n.raw): n.index for n in self.tape.nodes})
        node.raw.backward()
        self.snapshot()

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        """Also each node's `requires_grad`, when the submission's Value has one: a leaf made
        with requires_grad=False gets no gradient, and the diagnostic says so; and, on the
        last node, `walk`: the closures backward() runs, and in which order."""
        tape = super().read_tape()
        for entry, node in zip(tape, self.tape.nodes, strict=True):
            entry["requires_grad"] = requires_grad(node.raw)
        if tape:
            tape[-1]["walk"] = self.probed_alone("backward", self._walk)
        return tape

    def _walk(self) -> Quantity | None:
        """backward() from d = b + (b * 4) * 5, b = a * 3, on a fresh Value a, each op
        node's closure noting when it runs: WALKS says what the order shows, REPEATED_WALK
        that a closure ran more than once (None: another, or it raised). The gradients alone
        cannot tell a walk in topological order from one that runs the output's closure alone
        (each inner closure runs while its node's gradient is 0), nor, in a case whose nodes
        are off the tape (an MLP's), a walk breadth first from one in reverse topological
        order."""
        ran: list[str] = []
        try:  # the submission's ops, Value and backward(): any of them may raise
            a = self.Value(2.0)
            b = a * 3.0
            c = b * 4.0
            e = c * 5.0
            d = b + e
            for name, node in (("b", b), ("c", c), ("e", e), ("d", d)):
                node._backward = functools.partial(_noted, ran, name, node._backward)
            d.backward()
        except Exception:
            return None
        said = REPEATED_WALK if len(set(ran)) < len(ran) else WALKS.get(tuple(ran))
        return None if said is None else Quantity((said,), ())

    def local_backward(self, out, out_grad: float = 1.0) -> None:
        self.tape.mark_output(out)
        inputs = [self.tape.nodes[i].raw for i in self.input_indices(out)]
        self.run_rule(out.raw, out_grad, inputs)

    def set_grad(self, raw: Any, grad: float) -> None:
        raw.grad = in_its_type(raw.grad, grad)

    def run_rule(self, out: Any, out_grad: float, inputs: list[Any]) -> None:
        """Run the rules of every node the op created, from `out` back to `inputs`. The
        nodes inside the op start from zero, as backward() starts the interior nodes: run
        twice, only the inputs add up. The numbers it wrapped as Values (the 2 of `a * 2`)
        start from WRAPPED_SEED: no right rule reads their gradient, and one that reads it
        where it needs their value (`other.grad * out.grad`) then sends its input what the
        slip's model predicts, not the 0 that an op that never set its rule sends too
        (`slips.reads_grad`)."""
        nodes = op_nodes(out, inputs)
        for node in nodes:
            if node is not out:
                node.grad = in_its_type(node.grad, 0.0 if _children(node) else WRAPPED_SEED)
        out.grad = in_its_type(out.grad, out_grad)
        for node in reversed(nodes):
            node._backward()

    def value_of(self, raw: Any) -> Quantity:
        return Quantity((_number(raw.data),), ())

    def grad_of(self, raw: Any) -> Quantity:
        return Quantity((_number(raw.grad),), ())

    def mlp(self, nin: int, nouts: list[int], seed: int = 0) -> Model:
        model = self.nn.MLP(nin, list(nouts))
        params = list(model.parameters())
        flat = [v for layer in mlp_weights(nin, nouts, seed) for w, b in layer for v in (*w, b)]
        if len(params) != len(flat):
            raise ParameterCountError(nin, list(nouts), params, len(flat), model, self.nn)
        for p, v in zip(params, flat, strict=True):
            p.data = v
        nodes = self.parameter_nodes(params, nin, nouts)
        return Model(self, model, nodes, model, model.zero_grad)


#: what `grader.assignments.get` hands the grader
ENGINE = MicrogradBackend
