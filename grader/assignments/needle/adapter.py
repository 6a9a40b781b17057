"""A submission's needle, driven by cases. It never imports torch: its results are plain
numbers, so it can run in a worker process that has nothing else."""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from grader.assignments.needle import ACCOUNTS, MARKERS, REFLECTED, hints
from grader.assignments.needle.backend import (
    COMPOUND_OPS,
    DIFFERENTIABLE,
    HELPERS,
    IN_NUMPY,
    NOT_DIFFERENTIABLE,
    NUMPY_OPERAND,
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
from grader.case.backend import OPERATORS, MissingOp
from grader.case.loading import Package
from grader.case.quantity import Quantity
from grader.case.run import defined_at, function_name
from grader.case.trace import Node, NodeRef

#: the most nodes one op may build (a compound operator builds two or three)
MAX_OP_NODES = 1000


class NoGradientError(ValueError):
    """Leaves asked for with requires_grad=True came out with requires_grad = False."""


def _rule_place(op: Any) -> tuple[str, int, str] | None:
    """Where `op`'s gradient rule is defined, as `describe_exception` names a place: a
    failure found by the grader (not raised in the rule) is laid at that rule."""
    return defined_at(type(op).gradient)


class GradientTypeError(TypeError):
    """A gradient rule returned something other than the library's Tensors."""

    def __init__(self, op: Any, got: Any) -> None:
        self.where = _rule_place(op)
        kind = type(got)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
        super().__init__(
            f"{type(op).__name__}.gradient returned {name}; return Tensors (built with needle's "
            "ops, so that backward can use them and a gradient can be differentiated again)"
        )


class GradientCountError(ValueError):
    """A gradient rule returned another number of gradients than its op has inputs: backward,
    pairing them with the inputs, trips over it."""

    def __init__(self, op: Any, got: int, inputs: int) -> None:
        self.where = _rule_place(op)
        super().__init__(
            f"{type(op).__name__}.gradient returned {got} gradient{'s' * (got != 1)} for its {inputs} "
            f"input{'s' * (inputs != 1)}: it returns one for each of node.inputs, in their order"
        )


class GradientShapeError(ValueError):
    """A gradient rule, given an out_grad of its output's shape, returned a gradient of
    another shape than its input's: later code (another rule, backward's sum) trips over it."""

    def __init__(
        self, op: Any, k: int, got: tuple[int, ...], want: tuple[int, ...], surfaced: BaseException
    ) -> None:
        #: the rule, where `describe_exception` would have found it: the failure's place
        self.where = _rule_place(op)
        shown = f"{type(surfaced).__name__}: {surfaced}".splitlines()[0][:200]
        super().__init__(
            f"{type(op).__name__}.gradient returns a gradient of shape {got} for its input {k}, whose "
            f"shape is {want}: a gradient must have its input's shape (the case then raised {shown})"
        )


class OutGradShapeError(ValueError):
    """backward called a gradient rule with an out_grad of another shape than the rule's node,
    and the rule raised on it. Every rule, run alone on an out_grad of its node's shape, gives
    its inputs' shapes, so the rule is not at fault: backward made that out_grad."""

    def __init__(
        self, op: Any, got: tuple[int, ...], want: tuple[int, ...], surfaced: BaseException, where: Any
    ) -> None:
        #: backward's line that called the rule: the failure's place
        self.where = where
        shown = f"{type(surfaced).__name__}: {surfaced}".splitlines()[0][:200]
        super().__init__(
            f"backward called {type(op).__name__}.gradient with an out_grad of shape {got}, where its "
            f"node has shape {want}: a node's out_grad is its own gradient, the sum of the partial "
            f"adjoints it received, which has the node's shape (the rule then raised {shown})"
        )


class SortGivenANodeError(TypeError):
    """backward called find_topo_sort with one node, where it takes a list of them."""

    def __init__(self, given: Any, where: Any) -> None:
        #: backward's line that called the sort: the failure's place
        self.where = where
        super().__init__(
            f"backward called find_topo_sort with a {type(given).__name__}, where it takes a list of "
            "nodes (the roots to sort from), even when there is one"
        )


class NotDifferentiableError(ValueError):
    """A gradient rule built a result that backward cannot differentiate again."""

    def __init__(self, op: Any, found: float, cause: str) -> None:
        #: the rule, where `describe_exception` would have found it: the failure's place
        self.where = _rule_place(op)
        self.found = found
        how = "" if found == NUMPY_OPERAND else " builds a gradient that backward cannot differentiate again"
        super().__init__(f"{type(op).__name__}.gradient{how}: a backward through its gradient raised {cause}")


class SeedMissingError(KeyError):
    """backward looked up the output's own partial adjoints and found none: it began with an
    empty record, where the output's list holds out_grad."""

    def __init__(self, where: Any) -> None:
        #: backward: the failure's place
        self.where = where
        super().__init__()

    def __str__(self) -> str:  # a KeyError's own would quote its key
        return (
            "backward found no partial adjoint for the output itself: the output's first partial "
            "adjoint is out_grad, its own gradient (ones when backward is given none), recorded before "
            "any node is visited"
        )


class GradientNotStoredError(ValueError):
    """A case read a node's gradient, and backward had stored none, not even on the output
    it was called on: it stores no gradient anywhere."""

    def __init__(self, where: Any) -> None:
        #: backward, where the gradients are stored: the failure's place
        self.where = where
        super().__init__(
            "x.grad is not set, nor is the gradient of the output backward was called on: backward "
            "stores no gradient; each node's gradient, the sum of its partial adjoints, goes in its grad"
        )


class GradientSkippedError(ValueError):
    """A case read the gradient of a node its output depends on, and backward had stored
    none there, though find_topo_sort lists the node: backward came to it and stored nothing
    (a `continue` for the leaves before their gradient is set)."""

    def __init__(self, name: str, where: Any) -> None:
        #: backward, where the gradients are stored: the failure's place
        self.where = where
        super().__init__(
            f"{name}.grad is not set, though find_topo_sort lists {name} among the nodes the output "
            "depends on: backward must set node.grad on every node it visits, the leaves too (they "
            "hold what the caller reads)"
        )


class SortLeftOutError(ValueError):
    """A case read the gradient of a node its output depends on, and backward had stored
    none there: find_topo_sort, from the output, does not list it, so backward never came
    to it."""

    def __init__(self, name: str, where: Any) -> None:
        #: find_topo_sort, which leaves the node out: the failure's place
        self.where = where
        super().__init__(
            f"{name}.grad is not set: find_topo_sort leaves {name} out of the nodes the output depends "
            "on, so backward never came to it; the sort must list every node reached from the roots, "
            "once, after its inputs"
        )


class AdjointsMisroutedError(ValueError):
    """backward gives what a rule returns to its node's inputs in another order: a case
    raised where an input's gradient had another input's shape."""

    def __init__(self, where: Any) -> None:
        #: backward, which pairs gradients with inputs: the failure's place
        self.where = where
        super().__init__(
            "backward gives a rule's gradients to its node's inputs in another order (on x * y, x "
            "got the gradient for y): the i-th gradient a rule returns is the partial adjoint for "
            "node.inputs[i]"
        )


class GradientListError(TypeError):
    """backward stored a node's gradient as the list of its partial adjoints (or another
    sequence), not their sum: reading it, or differentiating it again, raised far from the
    line that stored it."""

    def __init__(self, got: Any, where: Any) -> None:
        #: backward, where the gradients are stored: the failure's place
        self.where = where
        count = len(got)
        super().__init__(
            f"backward stored a node's grad as a {type(got).__name__} of {count} item{'s' * (count != 1)}, "
            "where a gradient is one Tensor: the sum of the partial adjoints the node received"
        )


#: what a rule probed alone raises when it returned the wrong thing: the probe's answer
RETURNED_WRONG = (GradientTypeError, GradientCountError)


def _data(raw: Any) -> np.ndarray:
    """A Tensor's data (computing it in lazy mode, as `numpy()` does); arrays as they are."""
    return np.asarray(raw.numpy() if hasattr(raw, "numpy") else raw)


class NumpyOperandError(NotDifferentiableError):
    """A gradient rule multiplied by a NumPy array, and backward cannot differentiate that."""


#: the grader's own accounts of an exception, the classes `ACCOUNTS` names (`explain_exception`
#: gives no other for them)
OWN_ACCOUNTS = tuple(globals()[name] for name in ACCOUNTS)


def _called(exc: BaseException, name: str, count: int) -> tuple[list[Any], Any] | None:
    """Where the exception was raised inside a call of a function `name` of `count` arguments
    (a method or a function, its parameters however named): the arguments it was given, read
    off its frame on the traceback, and the place of the line that called it (the given
    `gradient_as_tuple` passed over)."""
    caller = None
    tb = exc.__traceback__
    while tb is not None:
        frame, code = tb.tb_frame, tb.tb_frame.f_code
        if code.co_name == name and code.co_argcount == count:
            return [frame.f_locals.get(arg) for arg in code.co_varnames[:count]], caller
        if code.co_name != "gradient_as_tuple":
            caller = (Path(code.co_filename).name, tb.tb_lineno, function_name(code))
        tb = tb.tb_next
    return None


def _given_out_grad(exc: BaseException) -> tuple[Any, tuple[int, ...], tuple[int, ...], Any] | None:
    """Where the exception was raised inside a gradient rule called with an out_grad of
    another shape than its node: (the op, the out_grad's shape, the node's, the place of the
    line that called the rule)."""
    found = _called(exc, "gradient", 3)  # (self, out_grad, node)
    if found is None:
        return None
    (op, out_grad, node), caller = found
    try:
        got, want = _data(out_grad).shape, _data(node).shape
    except Exception:
        return None
    return None if got == want else (op, got, want, caller)


def _sort_given_a_node(exc: BaseException) -> SortGivenANodeError | None:
    """The exception was raised in find_topo_sort, called (by backward) with a node where it
    takes a list of nodes: the account of it, placed at the line that called the sort."""
    found = _called(exc, "find_topo_sort", 1)
    if found is None:
        return None
    (given,), caller = found
    named = not isinstance(given, (list, tuple)) and hasattr(given, "inputs")
    return SortGivenANodeError(given, caller) if named and caller is not None else None


def _graph(root: Any) -> list[Any]:
    """The Tensors `root` reaches through `inputs`, root first (at most MAX_OP_NODES)."""
    seen, order = {id(root)}, [root]
    for node in order:
        for inp in node.inputs:
            if id(inp) not in seen and len(order) < MAX_OP_NODES:
                seen.add(id(inp))
                order.append(inp)
    return order


def _reaches(root: Any, target: Any) -> bool:
    """Does `root`'s graph hold `target`? A gradient built from out_grad with needle's ops
    does; one computed in NumPy and wrapped in a Tensor is a leaf."""
    return any(node is target for node in _graph(root))


def _numpy_operand(root: Any, stop: Any) -> bool:
    """Does an op in `root`'s graph hold a NumPy array as a constant (`Tensor * array` makes
    a MulScalar whose scalar is the array)?"""
    return any(
        isinstance(value, np.ndarray) and value.ndim > 0
        for node in _graph(root)
        if node is not stop and node.op is not None
        for value in vars(node.op).values()
    )


def _answer(got: Any, shape: tuple[int, ...], answers: dict[float, Any]) -> Quantity | None:
    """What a probe of backward says: the answer whose gradient `got` is (of `shape`), or
    None for any other."""
    if np.shape(got) != shape:
        return None
    return next((Quantity((said,), ()) for said, value in answers.items() if np.allclose(got, value)), None)


def _depends_on(outputs: list[Any], node: Any) -> bool:
    """Is `node` among the outputs or the nodes they were computed from (by `inputs`)?"""
    seen, stack = set(), list(outputs)
    while stack:
        current = stack.pop()
        if current is node:
            return True
        if id(current) not in seen:
            seen.add(id(current))
            stack.extend(getattr(current, "inputs", None) or ())
    return False


def _requires_grad(raw: Any) -> Quantity | None:
    try:
        value = getattr(raw, "requires_grad", None)
    except Exception:
        return None
    return flag(value) if isinstance(value, bool) else None


#: how a probe applies each op class forward, as cases reach it: through Tensor's operators
#: and methods (`a ** b` is EWisePow) or needle's helpers, on a = [[0.5, 1.5], [1, 2]]
PROBES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "EWiseAdd": lambda o, a, b: a + b,
    "AddScalar": lambda o, a, b: a + 1.5,
    "EWiseMul": lambda o, a, b: a * b,
    "MulScalar": lambda o, a, b: a * 1.5,
    "PowerScalar": lambda o, a, b: a**2,
    "EWisePow": lambda o, a, b: a**b,
    "EWiseDiv": lambda o, a, b: a / b,
    "DivScalar": lambda o, a, b: a / 2.0,
    "Negate": lambda o, a, b: -a,
    "Exp": lambda o, a, b: o.exp(a),
    "Log": lambda o, a, b: o.log(a),
    "ReLU": lambda o, a, b: o.relu(a),
    "Tanh": lambda o, a, b: o.tanh(a),
    "Transpose": lambda o, a, b: a.transpose(),
    "Reshape": lambda o, a, b: a.reshape((4,)),
    "BroadcastTo": lambda o, a, b: a.broadcast_to((3, 2, 2)),
    "Summation": lambda o, a, b: a.sum(),
    "MatMul": lambda o, a, b: a @ b,
}
#: the op class of each helper a case calls (`lib.tanh(x)` is `ops.tanh`)
HELPER_OF = {op_class: helper for helper, op_class in HELPERS.items()}
#: Tensor's operator or method behind each class a case reaches that way
TENSOR_ATTRIBUTE = {
    "EWiseAdd": "__add__", "AddScalar": "__add__", "EWiseMul": "__mul__", "MulScalar": "__mul__",
    "PowerScalar": "__pow__", "EWisePow": "__pow__", "EWiseDiv": "__truediv__",
    "DivScalar": "__truediv__", "Negate": "__neg__", "Transpose": "transpose", "Reshape": "reshape",
    "BroadcastTo": "broadcast_to", "Summation": "sum", "MatMul": "__matmul__",
}  # fmt: skip


def _helper(ops_module: Any, name: str) -> Callable[..., Any]:
    """`ops_module.<name>(...)`, found when called: a missing helper fails only its cases."""
    return lambda *args, **kwargs: getattr(ops_module, name)(*args, **kwargs)


#: each module a case needs -> what it defines (found in the package itself when the
#: submission has no such module: a single needle.py, or everything in __init__.py)
PROVIDES = {"autograd": "Tensor", "ops": "EWiseAdd"}


class NeedleBackend(TensorBackend):
    name = "needle"

    def __init__(self, modules: dict, trace: bool = True) -> None:
        super().__init__(trace)
        self.needle = modules["needle"]
        self.autograd = modules["autograd"]
        self.opsmod = modules["ops"]
        self.Tensor = self.autograd.Tensor
        #: tape indices of the leaves a case made with requires_grad=True
        self.grad_asked: set[int | None] = set()
        o = self.opsmod
        self.ops = {
            # Tensor's operators: with a Python number they make the scalar op
            **OPERATORS,
            "sum": lambda a, axes=None: a.sum(axes),
            "reshape": lambda a, shape: a.reshape(shape),
            "broadcast_to": lambda a, shape: a.broadcast_to(shape),
            "transpose": lambda a, axes=None: a.transpose(axes),
            "detach": lambda a: a.detach(),
            # the ops' helpers, looked up in the submission's ops module when called
            **{helper: _helper(o, helper) for helper in HELPERS},
        }

    @classmethod
    def load(cls, directory: str | Path) -> Package:
        """The submission's needle with the modules every case needs: autograd and ops
        (init.py is not needed: no case uses it)."""
        package = Package(directory, "needle", markers=MARKERS, provides=PROVIDES)
        package.require("autograd", PROVIDES["autograd"])
        package.module("ops")
        return package

    # ---- what the submission lacks ----

    def lacking(self, needs) -> list[str]:
        """An op class is lacking when the class, the helper or the Tensor operator a case
        reaches it through is missing, or when applying it forward (eagerly, to fresh
        tensors) raises NotImplementedError, as needle's own `Tensor.__pow__` does for a
        tensor exponent until it is written. A reflected operator (`__rsub__`) is lacking
        when Tensor does not define it. Only forward code runs: a `gradient` that
        raises, as the untouched template's do, fails its cases instead."""
        return [
            need
            for need in needs
            if (need in PROBES and self._lacks(need))
            or (need in REFLECTED and getattr(self.Tensor, need, None) is None)
        ]

    def _lacks(self, op_class: str) -> bool:
        helper, attribute = HELPER_OF.get(op_class), TENSOR_ATTRIBUTE.get(op_class)
        if getattr(self.opsmod, op_class, None) is None:
            return True
        if helper is not None and getattr(self.opsmod, helper, None) is None:
            return True
        if attribute is not None and getattr(self.Tensor, attribute, None) is None:
            return True
        try:
            with self._two_leaves() as (a, b):
                PROBES[op_class](self.opsmod, a, b)
        except NotImplementedError:
            return True
        except Exception:  # it exists and fails otherwise: its cases say how
            return False
        return False

    @contextlib.contextmanager
    def _two_leaves(self) -> Iterator[tuple[Any, Any]]:
        """Two 2x2 leaves of positive numbers for a probe's op, in eager mode (the op's value
        at once, whatever mode the case left), NumPy quiet: a wrong rule may divide by zero
        on the probe's own inputs, which is not the student's warning."""
        previous = getattr(self.autograd, "LAZY_MODE", None)
        try:
            if previous is not None:
                self.autograd.LAZY_MODE = False
            with np.errstate(all="ignore"):
                yield (
                    self.Tensor(np.array([[0.5, 1.5], [1.0, 2.0]]), dtype="float64"),
                    self.Tensor(np.array([[1.5, 0.5], [2.0, 1.0]]), dtype="float64"),
                )
        finally:
            if previous is not None:
                self.autograd.LAZY_MODE = previous

    def rule_probes(self) -> dict[str, Callable[[], object]]:
        """Each op's gradient rule run alone on the tiny input of PROBES, by op class: the
        grader runs them beside `probe_backward` to learn, in a moment, which never return."""
        return {op_class: functools.partial(self._run_rule, op_class) for op_class in PROBES}

    def _run_rule(self, op_class: str) -> tuple[Any, tuple[Any, ...]]:
        """One op applied to the two probe leaves, and `op.gradient_as_tuple(out_grad, out)`
        with an out_grad of ones: (its output, the gradients)."""
        with self._two_leaves() as (a, b):
            out = PROBES[op_class](self.opsmod, a, b)
            out_grad = self.Tensor(np.ones(_data(out).shape), dtype="float64")
            return out, out.op.gradient_as_tuple(out_grad, out)

    # ---- leaves, backward, gradients ----

    def tensor(self, array: Any, label: str = "", dtype: str = "float64", requires_grad: bool = True) -> Node:
        if isinstance(array, Node):
            raw = self.Tensor(array.raw, dtype=dtype, requires_grad=requires_grad)
        else:
            raw = self.Tensor(as_float_array(array, dtype), dtype=dtype, requires_grad=requires_grad)
        node = self.wrap(raw, "leaf", (), {}, label)
        if requires_grad:
            self.grad_asked.add(node.index)
        return node

    def _out_grad(self, out_grad: Any, like: Any) -> Any:
        if out_grad is None or isinstance(out_grad, Node):
            return None if out_grad is None else out_grad.raw
        return self.Tensor(as_float_array(out_grad, str(_data(like).dtype)), requires_grad=False)

    def backward(self, y: Node, out_grad: Any = None) -> None:
        self.tape.mark_output(y)
        y.raw.backward(self._out_grad(out_grad, y.raw))

    def grad(self, x: Node) -> Quantity | None:
        return self.grad_of(x.raw)

    def numpy(self, x: Node) -> Quantity:
        return self.value_of(x.raw)

    def grad_node(self, x: Node) -> Node:
        grad = self._stored_grad(x.raw)
        if grad is None:
            outputs = [self.tape.nodes[i].raw for i in self.tape.outputs]
            if outputs and all(getattr(y, "grad", None) is None for y in outputs):
                raise GradientNotStoredError(self._backward_place())
            step = self.tape.steps[x.index] if x.index is not None else None
            name = (step.label if step is not None else "") or (f"t{x.index}" if x.index is not None else "x")
            raise self._left_without_gradient(x.raw, outputs, name)
        return self.wrap(grad, "grad", (x,))

    def op_gradient(
        self, op_name: str, inputs: list[Node], out_grad: Node, **op_args: Any
    ) -> tuple[Node, ...]:
        """Run `op.gradient_as_tuple(out_grad, node)` alone, for one op applied to `inputs`."""
        self.op_class(op_name, op_args)
        try:
            op_class = getattr(self.opsmod, op_name, None) or getattr(self.needle, op_name)
            op = op_class(*op_args.values())
            raw = op(*(x.raw for x in inputs))
        except Exception as exc:
            if self.lacking([op_name]):
                raise MissingOp([op_name]) from exc
            raise
        out = self.wrap(raw, op_name, tuple(inputs), op_args)
        grads = self._returned(op, op.gradient_as_tuple(out_grad.raw, out.raw), len(inputs))
        return tuple(
            self.wrap(g, f"{op_name}.gradient", (out, out_grad), {"input": i}) for i, g in enumerate(grads)
        )

    # ---- structure: the submission's own graph ----

    def _index_of(self) -> dict[int, int]:
        return {id(n.raw): n.index for n in self.tape.nodes}

    def topo_order(self, ys: Node | list[Node]) -> Quantity:
        ys = ys if isinstance(ys, list) else [ys]
        order = self.autograd.find_topo_sort([y.raw for y in ys])
        where = self._index_of()
        return indices([where.get(id(n), -1) for n in order])

    def has_op(self, x: Node) -> Quantity:
        return flag(x.raw.op is not None)

    def count_nodes(self, y: Node) -> Quantity:
        seen, stack = {id(y.raw)}, [y.raw]
        while stack:
            for inp in stack.pop().inputs:
                if id(inp) not in seen:
                    seen.add(id(inp))
                    stack.append(inp)
        return Quantity((float(len(seen)),), ())

    # ---- lazy mode ----

    def set_lazy(self, on: bool) -> bool:
        previous = bool(self.autograd.LAZY_MODE)
        self.autograd.LAZY_MODE = on
        return previous

    def computed(self, x: Node) -> Quantity:
        return flag(x.raw.cached_data is not None)

    def realize(self, x: Node) -> None:
        x.raw.realize_cached_data()

    # ---- each op's gradient rule, probed alone ----

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        """Each op node's entry also holds `rule`: what its gradient rule sends each input,
        run alone on fresh leaves with the node's own gradient as out_grad (the partial
        adjoints it contributed, if backward was right). When a node's gradient is wrong and
        every consumer's rule is right, the diagnostic blames backward's sum, not a rule.
        Leaves also carry `requires_grad`, and a `grad` step (a gradient differentiated
        again) `carries_over` and `grad_is_node`; in such a case each op node also holds
        `rule_fixed`, its rule probed with `fixed_out_grad` (PyTorch knows no gradient of the
        first graph's interior nodes then). The last op node holds `rules_get_node_grad`
        and `pairs_in_order`, what backward hands the rules and where it sends what they
        return, and `processed_once`, whether it processes a node used twice only once; each
        node holds `listed_by_sort`, how often find_topo_sort lists it among the nodes the
        case's outputs depend on (0, 1, or 2 for more than once). A rule that returns no
        Tensor raises here."""
        tape = super().read_tape()
        again = self._differentiates_a_gradient()
        # each probe runs the submission's backward (or sort) on a fresh graph, within probe_cpu
        probe = self.probed_alone
        carries = probe(hints.BACKWARD, self._carries_over) if again else None
        is_node = probe(hints.BACKWARD, self._gradient_is_a_node) if again else None
        last = max((i for i, step in enumerate(self.tape.steps) if step.op in self.ops), default=None)
        listed = probe("find_topo_sort", self._listed_by_sort)
        for i, entry in enumerate(tape):
            step = self.tape.steps[i]
            if listed is not None:
                times = listed.get(id(self.tape.nodes[i].raw), 0)
                entry["listed_by_sort"] = Quantity((float(min(times, 2)),), ())
            if step.op in ("leaf", "parameter"):
                entry["requires_grad"] = _requires_grad(self.tape.nodes[i].raw)
            elif step.op in self.ops:
                entry["rule"] = self.probed_alone(step.op, self._probe, i)
                if step.op in COMPOUND_OPS:
                    entry["parts"] = self.probed_alone(step.op, self._parts, i)
                if self._differentiates_a_gradient():
                    found = self.probed_alone(step.op, self._differentiable, i)
                    entry["differentiable"] = None if found is None else Quantity((found[0],), ())
                    data = _data(self.tape.nodes[i].raw)
                    if step.op != "detach" and data.dtype.kind == "f":
                        fixed = fixed_out_grad(data.shape).astype(data.dtype)
                        entry["rule_fixed"] = self.probed_alone(step.op, self._probe, i, fixed)
            elif step.op == "grad":
                entry["carries_over"], entry["grad_is_node"] = carries, is_node
            if i == last:
                entry["rules_get_node_grad"] = probe(hints.BACKWARD, self._rules_get_node_grad)
                entry["pairs_in_order"] = probe(hints.BACKWARD, self._pairs_in_order)
                entry["processed_once"] = probe(hints.BACKWARD, self._processed_once)
        return tape

    def _left_without_gradient(self, node: Any, outputs: list[Any], name: str) -> ValueError:
        """Why `node`, which the outputs depend on, has no gradient though they have theirs:
        find_topo_sort lists it (backward stored nothing there) or leaves it out. Where the
        sort cannot be asked, or the outputs do not depend on the node, only that it has none."""
        listed = self._listed_by_sort()
        if listed is None or not _depends_on(outputs, node):
            return ValueError(f"{name}.grad is not set: backward() did not give this node a gradient")
        if id(node) in listed:
            return GradientSkippedError(name, self._backward_place())
        return SortLeftOutError(name, defined_at(getattr(self.autograd, "find_topo_sort", None)))

    def _pairs_in_order(self) -> Quantity | None:
        """backward() from x * y on fresh leaves (x = 2, 3 and y = 5, 7), once the product's
        rule alone returns y for x and x for y: 1 when x then holds y (backward gives each
        input the gradient its rule returned for it), 0 when x holds x (it gave them to the
        inputs in reverse order), None when the probe cannot tell."""
        a, b = np.array([2.0, 3.0], dtype="float32"), np.array([5.0, 7.0], dtype="float32")
        try:
            x, y = self.Tensor(a, requires_grad=True), self.Tensor(b, requires_grad=True)
            z = x * y
            alone = z.op.gradient_as_tuple(self.Tensor(np.ones_like(a)), z)
            if not (np.allclose(_data(alone[0]), b) and np.allclose(_data(alone[1]), a)):
                return None  # EWiseMul's rule is wrong: no telling
            z.backward()
            got = _data(x.grad)
        except Exception:
            return None
        return _answer(got, a.shape, {1.0: b, 0.0: a})

    def _listed_by_sort(self) -> dict[int, int] | None:
        """How often find_topo_sort lists each node from the case's outputs (by id), or None
        where it cannot be asked (no output, or it raised): a node backward left without a
        gradient was never visited only if the sort leaves it out, and one the sort lists
        twice has its partial adjoints added twice."""
        outputs = [self.tape.nodes[i].raw for i in self.tape.outputs]
        if not outputs:
            return None
        try:
            return dict(Counter(id(node) for node in self.autograd.find_topo_sort(outputs)))
        except Exception:
            return None

    def _processed_once(self) -> Quantity | None:
        """backward() from d = b + b, b = x * 3 on a fresh leaf x, once d's rule alone sends
        each b its out_grad: 1 when x then holds 6 (b processed once, its two partial adjoints
        added), 0 when it holds 12 (b processed once per path to it, so the adjoint it sends x
        is added twice), 2 when it holds 3 (b kept one of its two partial adjoints, or its rule
        was handed the output's out_grad: `rules_get_node_grad` tells the two apart), None
        when the probe cannot tell."""
        data = np.array([0.5, -1.5, 2.0], dtype="float32")
        try:
            x = self.Tensor(data, requires_grad=True)
            b = x * 3.0
            d = b + b
            alone = d.op.gradient_as_tuple(self.Tensor(np.ones_like(data)), d)
            if not all(np.allclose(_data(g), 1.0) for g in alone):
                return None  # EWiseAdd's rule is wrong: no telling
            d.backward()
            got = _data(x.grad)
        except Exception:
            return None
        twelve, six, three = (np.full_like(data, n) for n in (12.0, 6.0, 3.0))
        return _answer(got, data.shape, {1.0: six, 0.0: twelve, 2.0: three})

    def _rules_get_node_grad(self) -> Quantity | None:
        """backward() from u = (x * 3) * 5, x a fresh leaf, once x * 3 alone gave x its 3: 1
        when x then holds 15 (each rule was given its own node's gradient), 0 when it holds 3
        (each rule was given the output's out_grad, so x * 3's rule sent 3 * 1, not 3 * 5),
        None when the probe cannot tell (an op or backward raised, or another number). Said
        on the tape's last op node: it is backward's, not a node's."""
        data = np.array([0.5, -1.5, 2.0], dtype="float32")
        try:
            alone = self.Tensor(data, requires_grad=True)
            (alone * 3.0).backward()
            if not np.allclose(_data(alone.grad), 3.0):
                return None  # MulScalar's rule, or backward on one op, is wrong: no telling
            x = self.Tensor(data, requires_grad=True)
            ((x * 3.0) * 5.0).backward()
            got = _data(x.grad)
        except Exception:
            return None
        return _answer(got, data.shape, {1.0: 15.0, 0.0: 3.0})

    def _gradient_is_a_node(self) -> Quantity | None:
        """backward() from sum(x * x), x a fresh leaf: 1 when x's gradient is a node of the
        graph (made by an op: the add of its two partial adjoints), 0 when it is a leaf (a
        gradient detached, or made anew from NumPy, which a backward through it cannot
        differentiate), None when the probe cannot tell (an op or backward raised)."""
        try:
            x = self.Tensor(np.array([0.5, -1.5, 2.0], dtype="float32"), requires_grad=True)
            (x * x).sum().backward()
            return Quantity((0.0 if getattr(x.grad, "op", None) is None else 1.0,), ())
        except Exception:
            return None

    def _carries_over(self) -> Quantity | None:
        """backward() twice from the output of a fresh graph, sum(x * x): 1 when a node then
        holds twice its first gradient (the second backward added to what the first left
        there), 0 when every node holds its first gradient again, None when the probe cannot
        tell (an op or backward raised, or the gradients changed otherwise). A case that
        differentiates a gradient runs backward through nodes an earlier backward gave
        gradients to: where backward adds to those, every gradient after is off, and this
        says why."""
        try:
            x = self.Tensor(np.array([0.5, -1.5, 2.0], dtype="float32"), requires_grad=True)
            t = x * x
            y = t.sum()
            nodes = (x, t, y)
            passes = []
            for _ in range(2):
                y.backward()
                passes.append([_data(node.grad).astype(np.float64) for node in nodes])
        except Exception:
            return None
        pairs = [(a, b) for a, b in zip(*passes, strict=True) if a.shape == b.shape]
        if len(pairs) == len(nodes) and all(np.array_equal(a, b) for a, b in pairs):
            return Quantity((0.0,), ())
        doubled = any(np.any(a != 0) and np.allclose(b, 2 * a) for a, b in pairs)
        return Quantity((1.0,), ()) if doubled else None

    def _on_fresh_leaves(self, step: Any) -> tuple[Any, list[Any]]:
        """The step's op applied anew, to fresh leaves that hold its inputs' data and require
        gradients (its constants as they were): the op's output, and the leaves."""
        leaves, args = [], []
        for ref in step.inputs:
            if isinstance(ref, NodeRef):
                leaves.append(self.Tensor(_data(self.tape.nodes[ref.index].raw), requires_grad=True))
                args.append(leaves[-1])
            else:
                args.append(ref)
        return self.ops[step.op](*args, **step.kwargs), leaves

    def _differentiates_a_gradient(self) -> bool:
        return any(step.op == "grad" for step in self.tape.steps)

    def _differentiable(self, i: int) -> tuple[float, Any, str] | None:
        """Node i's gradient rule, run on fresh leaves with an out_grad that requires a
        gradient too, and its result differentiated again with the submission's rules:
        (what `DIFFERENTIABLE` and the others say, the op, what failed), or None when the
        probe cannot tell (an op that built several nodes, a forward that fails)."""
        step = self.tape.steps[i]
        if step.op == "detach" or step.op in COMPOUND_OPS:
            return None
        try:
            out, leaves = self._on_fresh_leaves(step)
            if out.op is None or {id(x) for x in out.inputs} - {id(x) for x in leaves}:
                return None
            given = self.Tensor(np.ones_like(_data(out)), requires_grad=True)
            grads = out.op.gradient_as_tuple(given, out)
        except Exception:
            return None
        for g in grads:
            if not isinstance(g, self.Tensor):
                return None  # GradientTypeError's case, said where it surfaces
            if not _reaches(g, given):
                return IN_NUMPY, out.op, ""
            try:
                self._local_grads(g, [given, *leaves], np.ones_like(_data(g)))
            except Exception as exc:
                found = NUMPY_OPERAND if _numpy_operand(g, given) else NOT_DIFFERENTIABLE
                return found, out.op, f"{type(exc).__name__}: {exc}"
        return DIFFERENTIABLE, out.op, ""

    def _probe(self, i: int, out_grad: Any = None) -> Quantity | None:
        step = self.tape.steps[i]
        raw = self.tape.nodes[i].raw
        try:
            grad = out_grad
            if step.op == "detach":  # its node is a leaf, with no gradient of its own
                grad = np.ones(_data(raw).shape)
            elif grad is None and getattr(raw, "grad", None) is not None:
                grad = _data(raw.grad)
            if grad is None:
                return None
            if step.op == "detach":
                # detached from a node with an op, as in a case (a leaf would have none to keep):
                # what reaches the leaf under that node is what flows through the detach
                (ref,) = step.inputs
                leaves = [self.Tensor(_data(self.tape.nodes[ref.index].raw), requires_grad=True)]
                out = self.ops["detach"](leaves[0] * 1.0)
            else:
                out, leaves = self._on_fresh_leaves(step)
            grads = self._local_grads(out, leaves, np.asarray(grad))
        except RETURNED_WRONG:
            raise
        except Exception:  # unknown: the diagnostic falls back to naming the rule
            return None
        if not grads:
            return None
        flat = quantity(np.concatenate([g.reshape(-1) for g in grads]))
        shapes = [(g.shape, _data(x).shape) for g, x in zip(grads, leaves, strict=True)]
        if np.shape(grad) == _data(raw).shape and any(got != want for got, want in shapes):
            # given an out_grad of its output's shape, it returned another shape than its
            # input's: the same numbers as a column, which compares as wrong (a slip may
            # still read them, `Evidence.rule_pair`)
            return Quantity(flat.data, (len(flat.data), 1), flat.dtype)
        return flat

    def _parts(self, i: int) -> Quantity | None:
        """A compound op's parts (`compound_parts`), each one's rule probed alone on fresh
        leaves with `fixed_out_grad`; None if it is no compound or a part fails."""
        step = self.tape.steps[i]
        args = [_data(self.tape.nodes[r.index].raw) if isinstance(r, NodeRef) else r for r in step.inputs]
        parts = compound_parts(step.op, args)
        if parts is None:
            return None
        rows = []
        try:
            for op, inputs in parts:
                args, leaves = on_leaves(inputs, lambda x: self.Tensor(x, requires_grad=True))
                out = self.ops[op](*args)
                grad = fixed_out_grad(_data(out).shape).astype(_data(out).dtype)
                rows.append(np.concatenate([g.reshape(-1) for g in self._local_grads(out, leaves, grad)]))
        except Exception:  # the rule probe of the whole says what is wrong with it
            return None
        return parts_quantity(rows, str(_data(self.tape.nodes[i].raw).dtype))

    def _local_grads(self, out: Any, leaves: list[Any], out_grad: np.ndarray) -> list[np.ndarray]:
        """Run the gradient rules of the nodes `out`'s op built, back to `leaves`, adding
        the partial adjoints here (in NumPy), so that only the rules are on trial."""
        stop = {id(leaf) for leaf in leaves}
        nodes, frontier = {id(out): out}, [out]
        while frontier:  # every node between out and the leaves
            node = frontier.pop()
            for inp in () if id(node) in stop else node.inputs:
                if id(inp) not in nodes:
                    nodes[id(inp)] = inp
                    frontier.append(inp)
            if len(nodes) > MAX_OP_NODES:
                raise ValueError("the op built too many nodes")
        waiting = dict.fromkeys(nodes, 0)  # how many consumers have not sent their adjoint yet
        for key, node in nodes.items():
            for inp in () if key in stop else node.inputs:
                waiting[id(inp)] += 1
        adjoints: dict[int, list[np.ndarray]] = {id(out): [out_grad]}
        ready = [out]  # Kahn's order from the output: a node once all its consumers are done
        while ready:
            node = ready.pop()
            if id(node) in stop or node.op is None:
                continue
            total = sum(adjoints[id(node)][1:], adjoints[id(node)][0])
            given = self.Tensor(np.asarray(total, dtype=_data(node).dtype), requires_grad=False)
            grads = self._returned(node.op, node.op.gradient_as_tuple(given, node), len(node.inputs))
            for inp, g in zip(node.inputs, grads, strict=True):
                adjoints.setdefault(id(inp), []).append(_data(g))
                waiting[id(inp)] -= 1
                if waiting[id(inp)] == 0:
                    ready.append(inp)
        return [
            sum(adjoints[id(leaf)][1:], adjoints[id(leaf)][0])
            if id(leaf) in adjoints
            else np.zeros_like(_data(leaf))
            for leaf in leaves
        ]

    def explain_exception(self, exc: BaseException) -> BaseException | None:
        """When a case raised: leaves that do not require a gradient although asked to, or a
        gradient rule on its tape that returns no Tensor (a NumPy array passes through some of
        backward and fails far from the rule), another number of gradients than its op has
        inputs, or a gradient of another shape than its input's (the next rule, or backward's
        sum, raises), is the cause, and so is such a rule off the tape, of an op in the graph
        that backward was walking (a gradient's). A rule that raised on an out_grad of another
        shape than its node is not: a rule that returns such shapes, off the tape too, or else
        backward is; find_topo_sort given one node, where it takes a list, raised by
        backward's call; and a KeyError for the output backward was called on is backward's,
        which never recorded out_grad as its first partial adjoint."""
        if isinstance(exc, OWN_ACCOUNTS):
            return None
        refused = [
            self.tape.steps[i].label or f"t{i}"
            for i, step in enumerate(self.tape.steps)
            if i in self.grad_asked and getattr(self.tape.nodes[i].raw, "requires_grad", None) is False
        ]
        if refused:
            return NoGradientError(
                f"the leaves {', '.join(refused[:6])} were made with Tensor(array, requires_grad=True) "
                "and have requires_grad = False, so no op records them and backward gives them no "
                "gradient: Tensor must keep the requires_grad it is given"
            )
        for step in self.tape.steps:
            if step.op in self.ops and step.op != "detach":
                try:
                    out, leaves = self._on_fresh_leaves(step)
                    grads = self._local_grads(out, leaves, np.ones(_data(out).shape))
                except RETURNED_WRONG as found:
                    return found
                except Exception:
                    continue
                for k, (g, x) in enumerate(zip(grads, leaves, strict=True)):
                    if g.shape != _data(x).shape:
                        return GradientShapeError(out.op, k, g.shape, _data(x).shape, exc)
        found = self._not_differentiable() if self._differentiates_a_gradient() else None
        found = found or self._returned_wrong_in_graph(exc) or self._seed_missing(exc)
        found = found or self._adjoints_misrouted()
        return found or self._misshapen_out_grad(exc) or _sort_given_a_node(exc)

    def _adjoints_misrouted(self) -> AdjointsMisroutedError | None:
        """backward, probed on a fresh x * y, gives the rule's gradients to the inputs in
        reverse order: an input then gets another's gradient, of another shape where their
        shapes differ, and whatever raised next is a symptom."""
        said = self.probed_alone(hints.BACKWARD, self._pairs_in_order)
        return (
            AdjointsMisroutedError(self._backward_place())
            if said is not None and said.data[0] == 0.0
            else None
        )

    def _seed_missing(self, exc: BaseException) -> SeedMissingError | None:
        """backward raised a KeyError for the very output it was called on: it never
        recorded out_grad as the output's first partial adjoint."""
        found = _called(exc, hints.BACKWARD, 2)  # (output_tensor, out_grad)
        if not isinstance(exc, KeyError) or found is None or not exc.args or exc.args[0] is not found[0][0]:
            return None
        return SeedMissingError(self._backward_place())

    def _returned_wrong_in_graph(self, exc: BaseException) -> BaseException | None:
        """The exception was raised in a backward walking a graph that holds ops off the tape
        (a backward through a gradient walks the gradient's graph, which the rules and
        backward's sums built): the rule of one of those ops, run alone on PROBES' inputs,
        that returns no Tensor, or another number of gradients than its op has inputs."""
        found = _called(exc, hints.BACKWARD, 2)  # (output_tensor, out_grad)
        output = found[0][0] if found is not None else None
        if not hasattr(output, "inputs"):
            return None
        ops = {type(node.op).__name__ for node in _graph(output) if getattr(node, "op", None) is not None}
        for op_class in (name for name in PROBES if name in ops):
            try:
                out, grads = self._run_rule(op_class)
                self._returned(out.op, grads, len(out.inputs))
            except RETURNED_WRONG as wrong:
                return wrong
            except Exception:  # an op not written, or a rule that fails alone: its own cases say so
                continue
        return None

    def _returned(self, op: Any, grads: Any, inputs: int) -> Any:
        """What `op`'s rule returned, checked: Tensors (GradientTypeError), one for each of
        its `inputs` (GradientCountError)."""
        for g in grads:
            if not isinstance(g, self.Tensor):
                raise GradientTypeError(op, g)
        if len(grads) != inputs:
            raise GradientCountError(op, len(grads), inputs)
        return grads

    def _backward_place(self) -> tuple[str, int, str] | None:
        """Where the submission's backward is defined: the place of a failure the grader
        finds to be backward's (a gradient stored as a list, or nowhere; no out_grad recorded)."""
        return defined_at(getattr(self.autograd, hints.BACKWARD, None))

    def _misshapen_out_grad(self, exc: BaseException) -> ValueError | None:
        """The exception was raised inside a gradient rule that was called with an out_grad of
        another shape than its node: a rule that returns its inputs a gradient of another
        shape made it, or else backward did. The tape's rules were checked before; a case
        that differentiates a gradient also runs rules on nodes that other rules made, off
        the tape, so each op's rule is run alone on PROBES' inputs too."""
        given = _given_out_grad(exc)
        if given is None:
            return None
        for op_class in PROBES:
            try:
                out, grads = self._run_rule(op_class)
                shapes = [(_data(g).shape, _data(x).shape) for g, x in zip(grads, out.inputs, strict=True)]
            except Exception:  # an op not written, or a rule that fails alone: its own cases say so
                continue
            for k, (got, want) in enumerate(shapes):
                if got != want:
                    return GradientShapeError(out.op, k, got, want, exc)
        op, got, want, caller = given
        return OutGradShapeError(op, got, want, exc, caller)

    def _not_differentiable(self) -> NotDifferentiableError | None:
        """A case that differentiates a gradient raised: a rule whose result backward cannot
        differentiate again is the cause, wherever the exception surfaced (a Reshape that
        cannot undo the broadcast a NumPy operand made)."""
        for i, step in enumerate(self.tape.steps):
            if step.op in self.ops:
                found = self._differentiable(i)
                if found is not None and found[0] in (NUMPY_OPERAND, NOT_DIFFERENTIABLE):
                    error = NumpyOperandError if found[0] == NUMPY_OPERAND else NotDifferentiableError
                    return error(found[1], found[0], found[2])
        return None

    # ---- reading results ----

    def value_of(self, raw: Any) -> Quantity | None:
        return None if raw is None else quantity(_data(raw))  # None: a rule returned no gradient

    def grad_of(self, raw: Any) -> Quantity | None:
        grad = self._stored_grad(raw)
        return None if grad is None else quantity(_data(grad))

    def _stored_grad(self, raw: Any) -> Any:
        """The gradient backward stored on a node (None: none); a list of its partial
        adjoints is said as backward's, at backward's place."""
        grad = getattr(raw, "grad", None)
        if isinstance(grad, (list, tuple)):
            raise GradientListError(grad, self._backward_place())
        return grad


#: what `grader.assignments.get` hands the grader
ENGINE = NeedleBackend
