"""What every backend shares: applying ops through the tape and flattening results."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from grader.case import hang
from grader.case.quantity import Quantity
from grader.case.trace import Node, Tape

#: Python's operators, which every engine overloads; `r...` are the reflected forms that a
#: number on the left calls (`2 * x` runs `x.__rmul__(2)`).
OPERATORS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "radd": lambda a, b: b + a,
    "sub": lambda a, b: a - b,
    "rsub": lambda a, b: b - a,
    "mul": lambda a, b: a * b,
    "rmul": lambda a, b: b * a,
    "truediv": lambda a, b: a / b,
    "rtruediv": lambda a, b: b / a,
    "pow": lambda a, b: a**b,
    "matmul": lambda a, b: a @ b,
    "neg": lambda a: -a,
}


class UnknownOp(KeyError):
    """A case used an operation this backend does not provide (a bug in the case)."""


class MissingOp(Exception):
    """The submission does not have an op the case needs: the case is not graded.

    Raised only when a probe confirms it (`Backend.lacking`): the op's method, operator,
    helper or class is missing, or its forward computation raises NotImplementedError.
    An op that exists and fails in any other way, and every gradient rule, is graded."""

    def __init__(self, needs: list[str]) -> None:
        super().__init__(", ".join(needs))
        self.needs = needs


T = TypeVar("T")


class Backend:
    """Base of every `lib`: subclasses fill `ops` and the value/grad readers."""

    name = "backend"
    #: op name -> function of raw objects (and keyword arguments) returning a raw object
    ops: Mapping[str, Callable[..., Any]] = {}

    #: the ops a case may need, in the words of the assignment (what a scope file lists)
    vocabulary: tuple[str, ...] = ()
    #: does what an op needs depend on its operands (needle: `a * 2` is MulScalar)?
    needs_depend_on_arguments = False
    #: CPU seconds each gradient rule that reading the tape runs alone may take: set by the
    #: engines before they read a submission's tape (`grader.case.limits.PROBE_CPU`)
    probe_cpu: float | None = None

    def __init__(self, trace: bool = True) -> None:
        self.tape = Tape(enabled=trace)
        self.names: dict[int, str] = {}
        #: the results that are the gradient of a node backward() was called on (`y.grad`)
        self.seeds: set[str] = set()
        #: what the case needed so far (see `needs_of`), recorded even without a tape
        self.used: set[str] = set()
        self.plain_ops: set[str] = set()
        #: the ops whose rule, run alone while the tape was read, did not return
        self.hung_probes: set[str] = set()

    # ---- building expressions ----

    def wrap(
        self, raw: Any, op: str, inputs: tuple = (), kwargs: dict | None = None, label: str = ""
    ) -> Node:
        node = Node(raw, self)
        self.tape.record(node, op, inputs, kwargs or {}, label)
        return node

    def apply(self, op: str, *args: Any, **kwargs: Any) -> Node:
        fn = self.ops.get(op)
        if fn is None:
            raise UnknownOp(f"{self.name} has no operation {op!r}")
        if op not in self.plain_ops:  # a 10**5-op chain records its one op once
            self.used.update(self.needs_of(op, args, kwargs))
            if not self.needs_depend_on_arguments:
                self.plain_ops.add(op)
        try:  # every op of every case comes through here: kept lean for the deep chains
            raw = fn(*[a.raw if type(a) is Node else self.unwrap(a) for a in args], **kwargs)
        except Exception as exc:
            missing = self.lacking(self.needs_of(op, args, kwargs))
            if missing:
                raise MissingOp(missing) from exc
            raise
        node = Node(raw, self)
        if self.tape.enabled:
            self.tape.record(node, op, args, kwargs)
        self.after_op(node)
        return node

    def repeat(self, node: Node, op: str, arg: Any, times: int) -> Node:
        """`node op arg`, then `op arg` again on the result, `times` times in all: the chain
        `(((x ** 1) ** 1) ...) ** 1` of a deep case. With a tape every op is recorded. Without
        one, only the first goes through `apply` (which finds a missing op); the others run on
        the engine's own objects, so a 10**5-op chain costs what the engine's ops cost."""
        node = self.apply(op, node, arg)
        if self.tape.enabled:
            for _ in range(times - 1):
                node = self.apply(op, node, arg)
            return node
        fn, raw, arg = self.ops[op], node.raw, self.unwrap(arg)
        for _ in range(times - 1):
            raw = fn(raw, arg)
        return Node(raw, self)

    def after_op(self, node: Node) -> None:
        """Hook: torch keeps interior gradients so they can be compared."""

    # ---- what a case needs, and what the submission lacks ----

    def needs_of(self, op: str, args: tuple, kwargs: dict) -> tuple[str, ...]:
        """The vocabulary words applying `op` to `args` needs (micrograd: the op's own name)."""
        return (op,)

    def lacking(self, needs: Iterable[str]) -> list[str]:
        """Which of `needs` the engine does not have. The oracle has everything; a
        submission's backend probes its API (see the adapters)."""
        return []

    def rule_probes(self) -> dict[str, Callable[[], object]]:
        """Each op's gradient rule run alone on a tiny input, by op: the grader runs them with
        its probe (`grader.case.limits`) to learn which rules never return. None here; an
        assignment's backend may say how."""
        return {}

    def probed_alone(self, op: str, probe: Callable[..., T], *args: Any) -> T | None:
        """`probe(*args)`, a rule of `op` run alone while the tape is read, within `probe_cpu`. A
        rule that never returns on a node's own inputs (though it returned on the tiny probe
        before the cases) costs that budget once, not the case's time limit; its op's later
        probes are not run. Either way the entry reads as unknown (None), as a probe that
        failed does, and the diagnosis says less about that op."""
        if op in self.hung_probes:
            return None
        try:
            with hang.cpu_budget(self.probe_cpu):
                return probe(*args)
        except hang.CaseTimedOut:
            self.hung_probes.add(op)
            return None

    def needs(self) -> list[str]:
        """Everything the case needed, sorted: the oracle's answer says what a scope must allow."""
        return sorted(self.used)

    @staticmethod
    def unwrap(x: Any) -> Any:
        if isinstance(x, Node):
            return x.raw
        if isinstance(x, (list, tuple)):
            return type(x)(Backend.unwrap(v) for v in x)
        return x

    # ---- reading results ----

    def value_of(self, raw: Any) -> Quantity:
        raise NotImplementedError

    def grad_of(self, raw: Any) -> Quantity | None:
        raise NotImplementedError

    def read(self, node: Node) -> dict[str, Quantity | None]:
        """A tape entry: the node's value and gradient, and `rule` (see `ScalarBackend`)."""
        return {"value": self.value_of(node.raw), "grad": self.grad_of(node.raw), "rule": None}

    def flatten(self, returned: Mapping[str, Any]) -> dict[str, Quantity | None]:
        """A case's returned dict as flat names: `x` (value), `x.grad`, `xs[0]`, ..."""
        flat: dict[str, Quantity | None] = {}

        def put(name: str, item: Any) -> None:
            if isinstance(item, Node):
                if item.index is not None:
                    self.names.setdefault(item.index, name)
                if self.tape.is_output(item):
                    self.seeds.add(name + ".grad")
                flat[name] = self.value_of(item.raw)
                flat[name + ".grad"] = self.grad_of(item.raw)
            elif isinstance(item, (list, tuple)) and item and isinstance(item[0], Node):
                for i, sub in enumerate(item):
                    put(f"{name}[{i}]", sub)
            elif item is None or isinstance(item, Quantity):
                flat[name] = item
            else:
                flat[name] = Quantity.from_array(item)

        for name, item in returned.items():
            put(name, item)
        return flat

    def read_values(self) -> list[dict[str, Quantity | None]]:
        """Each node's value alone, of those the case made: what the diagnosis of a case that
        raised reads (a value gone wrong before the exception), without reading gradients or
        probing rules."""
        out: list[dict[str, Quantity | None]] = []
        for node in self.tape.nodes:
            try:
                value = self.value_of(node.raw)
            except Exception:
                value = None
            out.append({"value": value, "grad": None, "rule": None})
        return out

    def read_tape(self) -> list[dict[str, Quantity | None]]:
        out = []
        for node in self.tape.nodes:
            try:
                out.append(self.read(node))
            except Exception:  # a broken node is reported where it is compared
                out.append({"value": None, "grad": None, "rule": None})
        return out
