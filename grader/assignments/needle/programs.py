"""Random tensor programs over random broadcastable shapes, for needle cases and properties.

A `Program` is plain data: a list of nodes, each a leaf (shape, kind) or an op applied to
earlier nodes. One generator, written against a `random.Random` (the style of both
assignments, see `grader.case.search`):

- graded cases take fixed programs, `random_program(seed)`: `random.Random(seed)`, so the
  oracle's expected results are those of a program that never changes;
- searches and property tests draw them with hypothesis, `programs()` (`st.randoms()`),
  which shrinks a failing one to a small one.

Every op keeps values in a safe range (the generator tracks a bound on each node's
magnitude and, where known, a positive lower bound): exp only of bounded values, log,
division and square roots only of values bounded away from 0. Binary ops broadcast their
operands explicitly (`broadcast_to`) to a common shape, as needle requires.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grader.case.define import Case
from grader.case.search import search as search_programs
from grader.case.search import strategy

Chooser = Callable[[int], int]

UNARY = ("tanh", "relu", "neg", "exp", "mul_scalar", "add_scalar", "square", "log", "sqrt", "recip")
BINARY = ("add", "sub", "mul", "div")
SCALARS = (0.5, -1.5, 2.0, 0.25)


@dataclass(frozen=True)
class Item:
    """One node of a program: `op` ("leaf" or an op name), inputs (node numbers), params."""

    op: str
    inputs: tuple[int, ...] = ()
    params: Any = None


@dataclass
class Program:
    items: list[Item] = field(default_factory=list)
    seed: int = 0

    def describe(self) -> str:
        return "; ".join(
            f"v{i} = {it.op}{list(it.inputs) or ''}{'' if it.params is None else it.params}"
            for i, it in enumerate(self.items)
        )


@dataclass
class _Info:
    shape: tuple[int, ...]
    mag: float  # |value| <= mag
    low: float | None  # value >= low > 0 when known positive; 0.0 when known non-negative


def _pick(choose: Chooser, options: list[Any]) -> Any:
    return options[choose(len(options))]


def _broadcastable_from(choose: Chooser, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to `shape`: some leading axes dropped, some axes of size 1."""
    drop = choose(len(shape) + 1)
    kept = shape[drop:]
    return tuple(1 if choose(3) == 0 else n for n in kept)


class _Builder:
    def __init__(self, choose: Chooser) -> None:
        self.choose = choose
        self.program = Program()
        self.info: list[_Info] = []

    def add(self, item: Item, info: _Info) -> int:
        self.program.items.append(item)
        self.info.append(info)
        return len(self.info) - 1

    def leaf(self, shape: tuple[int, ...], positive: bool = False) -> int:
        kind = "positive" if positive else "normal"
        return self.add(Item("leaf", (), (shape, kind)), _Info(shape, 2.0, 0.5 if positive else None))

    def broadcast(self, i: int, shape: tuple[int, ...]) -> int:
        if self.info[i].shape == shape:
            return i
        info = self.info[i]
        return self.add(Item("broadcast_to", (i,), shape), _Info(shape, info.mag, info.low))

    def unary(self, i: int) -> int | None:
        for _ in range(3):  # an op may not fit the value's range: try another
            new = self._unary(i, _pick(self.choose, list(UNARY)))
            if new is not None:
                return new
        return None

    def _unary(self, i: int, op: str) -> int | None:
        info = self.info[i]
        low, mag = info.low, info.mag
        if op == "tanh":
            return self.add(Item(op, (i,)), _Info(info.shape, min(mag, 1.0), None))
        if op == "relu":
            return self.add(Item(op, (i,)), _Info(info.shape, mag, 0.0))
        if op == "neg":
            return self.add(Item(op, (i,)), _Info(info.shape, mag, None))
        if op == "exp" and mag <= 3.0:
            return self.add(Item(op, (i,)), _Info(info.shape, math.exp(mag), math.exp(-mag)))
        if op == "mul_scalar":
            c = _pick(self.choose, list(SCALARS))
            pos = low is not None and c > 0
            return self.add(Item(op, (i,), c), _Info(info.shape, abs(c) * mag, low * c if pos else None))
        if op == "add_scalar":
            c = _pick(self.choose, list(SCALARS))
            new_low = low + c if low is not None and low + c > 0 else None
            return self.add(Item(op, (i,), c), _Info(info.shape, mag + abs(c), new_low))
        if op == "square" and mag <= 10.0:
            return self.add(Item(op, (i,)), _Info(info.shape, mag * mag, 0.0 if low is None else low * low))
        if op == "log" and low is not None and low >= 0.1 and mag <= 100:
            return self.add(Item(op, (i,)), _Info(info.shape, max(abs(math.log(low)), math.log(mag)), None))
        if op == "sqrt" and low is not None and low >= 0.1:
            return self.add(Item(op, (i,)), _Info(info.shape, math.sqrt(mag), math.sqrt(low)))
        if op == "recip" and low is not None and low >= 0.3:
            return self.add(Item(op, (i,)), _Info(info.shape, 1.0 / low, 1.0 / mag))
        return None

    def binary(self, i: int, j: int, shape: tuple[int, ...]) -> int | None:
        op = _pick(self.choose, list(BINARY))
        a, b = self.info[i], self.info[j]
        if op == "div" and (b.low is None or b.low < 0.3):
            return None
        i, j = self.broadcast(i, shape), self.broadcast(j, shape)
        if op == "add":
            low = a.low + b.low if a.low is not None and b.low is not None else None
            return self.add(Item(op, (i, j)), _Info(shape, a.mag + b.mag, low or None))
        if op == "sub":
            return self.add(Item(op, (i, j)), _Info(shape, a.mag + b.mag, None))
        if op == "mul":
            low = a.low * b.low if a.low is not None and b.low is not None else None
            return self.add(Item(op, (i, j)), _Info(shape, a.mag * b.mag, low))
        return self.add(Item("div", (i, j)), _Info(shape, a.mag / b.low, None))

    def reduce(self, i: int) -> int | None:
        info = self.info[i]
        ndim = len(info.shape)
        if ndim == 0:
            return None
        form = self.choose(3)
        if form == 0:
            axes: Any = None
            count = math.prod(info.shape)
        elif form == 1:
            axes = self.choose(ndim)
            count = info.shape[axes]
        else:
            axes = tuple(a for a in range(ndim) if self.choose(2)) or (0,)
            count = math.prod(info.shape[a] for a in axes)
        if info.mag * count > 1000:
            return None
        if axes is None:
            shape: tuple[int, ...] = ()
        else:
            gone = {axes} if isinstance(axes, int) else set(axes)
            shape = tuple(n for k, n in enumerate(info.shape) if k not in gone)
        low = info.low * count if info.low else (0.0 if info.low == 0.0 else None)
        return self.add(Item("summation", (i,), axes), _Info(shape, info.mag * count, low))

    def reshape(self, i: int) -> int | None:
        info = self.info[i]
        size = math.prod(info.shape)
        options = [(size,), (1, size)]
        options += [(d, size // d) for d in range(2, size) if size % d == 0]
        shape = _pick(self.choose, options)
        return self.add(Item("reshape", (i,), shape), _Info(shape, info.mag, info.low))

    def transpose(self, i: int) -> int | None:
        info = self.info[i]
        ndim = len(info.shape)
        if ndim < 2:
            return None
        if self.choose(2):
            axes = None
            x, y = ndim - 2, ndim - 1
        else:
            x = self.choose(ndim - 1)
            y = x + 1 + self.choose(ndim - 1 - x)
            axes = (x, y)
        shape = list(info.shape)
        shape[x], shape[y] = shape[y], shape[x]
        return self.add(Item("transpose", (i,), axes), _Info(tuple(shape), info.mag, info.low))

    def matmul(self, i: int) -> int | None:
        info = self.info[i]
        if len(info.shape) < 2:
            return None
        k, m = info.shape[-1], 1 + self.choose(3)
        if info.mag * 2.0 * k > 1000:
            return None
        batch = _broadcastable_from(self.choose, info.shape[:-2]) if self.choose(2) else ()
        j = self.leaf(batch + (k, m))
        out_batch = np.broadcast_shapes(info.shape[:-2], batch)
        shape = tuple(out_batch) + (info.shape[-2], m)
        return self.add(Item("matmul", (i, j)), _Info(shape, info.mag * 2.0 * k, None))


def random_program(rng: random.Random | int, steps: int | None = None) -> Program:
    """A random program from `rng`, or from `random.Random(seed)` for a fixed (graded) one;
    its leaves' data come from the seed (drawn last from `rng`)."""
    seed = rng if isinstance(rng, int) else None
    if isinstance(rng, int):
        rng = random.Random(rng)
    choose = rng.randrange
    b = _Builder(choose)
    ndim = choose(4)
    shape = tuple(1 + choose(4) for _ in range(ndim))
    current = b.leaf(_broadcastable_from(choose, shape), positive=bool(choose(2)))
    for _ in range(steps if steps is not None else 3 + choose(5)):
        kind = choose(7)
        if kind in (0, 1):
            new = b.unary(current)
        elif kind in (2, 3):  # with a new leaf that broadcasts against the current shape
            target = b.info[current].shape
            other = b.leaf(_broadcastable_from(choose, target), positive=bool(choose(2)))
            if choose(2):
                current, other = other, current
            new = b.binary(current, other, target)
        elif kind == 4:
            new = b.reduce(current)
        elif kind == 5:
            new = b.reshape(current) if choose(2) else b.transpose(current)
        else:
            new = b.matmul(current)
        current = new if new is not None else current
    b.program.seed = seed if seed is not None else rng.randrange(1 << 16)
    return b.program


def leaf_arrays(program: Program) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(program.seed)
    out = {}
    for i, item in enumerate(program.items):
        if item.op == "leaf":
            shape, kind = item.params
            out[i] = rng.uniform(0.5, 2.0, shape) if kind == "positive" else rng.uniform(-2.0, 2.0, shape)
    return out


def build(lib: Any, program: Program, dtype: str = "float64") -> list[Any]:
    """Run the program on a backend: its nodes, in order."""
    data = leaf_arrays(program)
    nodes: list[Any] = []
    for i, item in enumerate(program.items):
        args = [nodes[j] for j in item.inputs]
        p = item.params
        if item.op == "leaf":
            node = lib.tensor(data[i], f"x{i}", dtype=dtype)
        elif item.op == "tanh":
            node = args[0].tanh()
        elif item.op == "relu":
            node = args[0].relu()
        elif item.op == "neg":
            node = -args[0]
        elif item.op == "exp":
            node = args[0].exp()
        elif item.op == "log":
            node = args[0].log()
        elif item.op == "mul_scalar":
            node = args[0] * p
        elif item.op == "add_scalar":
            node = args[0] + p
        elif item.op == "square":
            node = args[0] ** 2
        elif item.op == "sqrt":
            node = lib.power_scalar(args[0], 0.5)
        elif item.op == "recip":
            node = 1.0 / args[0]
        elif item.op == "add":
            node = args[0] + args[1]
        elif item.op == "sub":
            node = args[0] - args[1]
        elif item.op == "mul":
            node = args[0] * args[1]
        elif item.op == "div":
            node = args[0] / args[1]
        elif item.op == "broadcast_to":
            node = args[0].broadcast_to(p)
        elif item.op == "summation":
            node = args[0].sum(axes=p)
        elif item.op == "reshape":
            node = args[0].reshape(p)
        elif item.op == "transpose":
            node = args[0].transpose(p)
        elif item.op == "matmul":
            node = args[0] @ args[1]
        else:
            raise ValueError(f"unknown program op {item.op!r}")
        nodes.append(node)
    return nodes


def run(lib: Any, program: Program, dtype: str = "float64") -> dict[str, Any]:
    """Build the program, backward from its last node with a random out_grad: the results a
    case returns (every node, so every value and gradient is compared)."""
    nodes = build(lib, program, dtype)
    y = nodes[-1]
    rng = np.random.default_rng(program.seed + 1)
    out_grad = lib.tensor(
        rng.standard_normal(lib.numpy(y).shape), "out_grad", dtype=dtype, requires_grad=False
    )
    lib.backward(y, out_grad)
    return {"v": nodes}


def programs(steps: int | None = None):
    """A hypothesis strategy of random programs (shrinks towards short, small ones)."""
    return strategy(lambda rng: random_program(rng, steps))


#: how `build` writes each op, in needle code; {0}, {1} are the inputs, {p} the params
CODE = {
    "tanh": "{0}.tanh()",
    "relu": "ndl.relu({0})",
    "neg": "-{0}",
    "exp": "ndl.exp({0})",
    "log": "ndl.log({0})",
    "mul_scalar": "{0} * {p}",
    "add_scalar": "{0} + {p}",
    "square": "{0} ** 2",
    "sqrt": "ndl.power_scalar({0}, 0.5)",
    "recip": "1.0 / {0}",
    "add": "{0} + {1}",
    "sub": "{0} - {1}",
    "mul": "{0} * {1}",
    "div": "{0} / {1}",
    "broadcast_to": "{0}.broadcast_to({p})",
    "summation": "{0}.sum(axes={p})",
    "reshape": "{0}.reshape({p})",
    "transpose": "{0}.transpose({p})",
    "matmul": "{0} @ {1}",
}


def show(program: Program) -> str:
    """The program as needle code a student can paste (float64, the leaves' data as `run`
    draws them)."""
    lines = ["import numpy as np", "import needle as ndl", f"rng = np.random.default_rng({program.seed})"]
    for i, item in enumerate(program.items):
        if item.op == "leaf":
            shape, kind = item.params
            low = 0.5 if kind == "positive" else -2.0
            text = f"ndl.Tensor(rng.uniform({low}, 2.0, {shape}))"
        else:
            text = CODE[item.op].format(*(f"v{j}" for j in item.inputs), p=item.params)
        lines.append(f"v{i} = {text}")
    last = f"v{len(program.items) - 1}"
    out_grad = f"np.random.default_rng({program.seed + 1}).standard_normal({last}.shape)"
    lines.append(f"{last}.backward(ndl.Tensor({out_grad}))")
    return "\n".join(lines)


def program_case(program: Program) -> Case:
    """A case made on the fly for one program (for hypothesis; worth no points)."""
    import hashlib  # here, not in every sandbox worker's start: OpenSSL's is 4 ms to import

    digest = hashlib.sha256(program.describe().encode() + str(program.seed).encode()).hexdigest()[:12]
    return Case(
        assignment="needle",
        topic="random",
        name="random_program",
        fn=run,
        module="hypothesis",
        suite="search",
        points=0.0,
        param_id=digest,
        param=program,
    )


def search(max_examples: int, steps: int | None = None):
    """Decorate an ungraded test that checks `max_examples` more random programs; a failing
    one is shrunk by hypothesis, and its code ends the failure message."""
    return search_programs(lambda rng: random_program(rng, steps), program_case, show, max_examples)
