"""Random scalar expression graphs for micrograd, as plain data.

A *program* is a list of steps; step `k` makes node `k` out of earlier nodes:

    ("leaf", 1.25)          a new leaf with that value
    ("add", 0, 1)           node 0 + node 1         (also "sub", "mul", "div")
    ("add", 0, 2.0)         node 0 + 2.0            a float is a number, an int a node
    ("sub", 2.0, 0)         2.0 - node 0            a number on the left: the reflected op
    ("pow", 0, 3)           node 0 ** 3             the exponent is always a number
    ("tanh", 0)             node 0 .tanh()          (also neg, relu, exp, log, sigmoid, detach)

The last node is the output; every other node is used by some later step, so the output
depends on all of them. The generator follows the value of every node and only applies an
op where it is safe and smooth: log and fractional powers of values >= 0.5, division by
values at least 0.5 away from 0, exp of values <= 3, relu away from its kink, every value
within +-20. So PyTorch and a correct engine agree to float64 rounding on every program.

One generator, written against a `random.Random` (the style of both assignments, see
`grader.case.search`):

- `fixed_programs(n, seed)`: `random.Random(seed)`, the same programs on every run and
  machine (graded cases use these, also in the grader's sandbox);
- `programs()`: hypothesis's `st.randoms()`, which shrinks a failing program to a small one.

`build(lib, program)` runs a program on a backend and returns its nodes by name.
"""

from __future__ import annotations

import contextlib
import gc
import math
import operator
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from grader.case.define import Case
from grader.case.search import search as search_programs
from grader.case.search import strategy

BINARY = ("add", "sub", "mul", "div")
UNARY = ("neg", "relu", "exp", "log", "tanh", "sigmoid", "detach")
NUMBERS = (2.0, -1.5, 0.5, 3.0)
EXPONENTS = (2, 3, -1, -2, 0.5, -0.5, 1.5)
WEIGHTS = {"mul": 3, "add": 2, "pow": 2}  # how often a kind of op is drawn (default 1)

BOUND = 20.0  # every value stays within +-BOUND
AWAY = 0.5  # log, fractional powers: x >= AWAY; divisors and negative powers: |x| >= AWAY
EXP_MAX = 3.0
KINK = 1e-3  # relu only where |x| >= KINK


def _integer(rng: random.Random, lo: int, hi: int) -> int:
    return rng.randint(lo, hi)


def _pick(rng: random.Random, options: Sequence[Any]) -> Any:
    return options[rng.randint(0, len(options) - 1)]


# ---- values: what each step computes, in plain Python floats ----


def _is_node(op: str, position: int, arg: Any) -> bool:
    """Is this argument of a step a node? (An int, except a power's exponent.)"""
    return isinstance(arg, int) and not isinstance(arg, bool) and not (op == "pow" and position == 1)


def inputs(step: Sequence[Any]) -> list[int]:
    """The nodes a step uses."""
    op, *args = step
    return [a for p, a in enumerate(args) if _is_node(op, p, a)]


def _operands(op: str, args: Sequence[Any], nodes: Sequence[Any]) -> list[Any]:
    return [nodes[a] if _is_node(op, p, a) else a for p, a in enumerate(args)]


#: the operators of a step, the same on plain floats and on nodes (where the engine's own
#: `__add__`, `__rsub__`, ... run: a number may stand on either side)
ARITHMETIC = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": operator.pow,
    "neg": operator.neg,
}

#: the named functions on plain floats; on nodes they are methods (`x.relu()`, ...)
FLOAT_FUNCTIONS = {
    "relu": lambda v: max(v, 0.0),
    "exp": math.exp,
    "log": math.log,
    "tanh": math.tanh,
    "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)),
    "detach": lambda v: v,
}


def _forward(op: str, args: Sequence[Any], values: list[float]) -> float:
    """The value of one step (raises on a domain error or overflow: the step is unsafe)."""
    if op == "leaf":
        return float(args[0])
    x = _operands(op, args, values)
    if op in ARITHMETIC:
        return ARITHMETIC[op](*x)
    if op in FLOAT_FUNCTIONS:
        return FLOAT_FUNCTIONS[op](x[0])
    raise ValueError(f"unknown step {op!r}")


def _safe(op: str, args: Sequence[Any], values: list[float]) -> float | None:
    """The step's value if the step is safe (see the module docstring), else None."""
    x = _operands(op, args, values)
    if op == "div" and abs(x[1]) < AWAY:
        return None
    if op == "log" and x[0] < AWAY:
        return None
    if op == "exp" and x[0] > EXP_MAX:
        return None
    if op == "relu" and abs(x[0]) < KINK:
        return None
    if op == "pow":
        base, k = x
        if (not float(k).is_integer() and base < AWAY) or (k < 0 and abs(base) < AWAY):
            return None
    try:
        value = _forward(op, args, values)
    except (ArithmeticError, ValueError):
        return None
    return value if math.isfinite(value) and abs(value) <= BOUND else None


def values_of(program: Sequence[tuple]) -> list[float]:
    """Every node's value, in plain Python floats."""
    values: list[float] = []
    for op, *args in program:
        values.append(_forward(op, args, values))
    return values


# ---- the generator ----


def _candidates(i: int, j: int, c: float, k: float, values: list[float]) -> dict[str, list[tuple]]:
    """Safe steps on nodes i, j, number c and exponent k, by kind (kinds in a fixed order)."""
    options: dict[str, list[tuple]] = {}
    for op in BINARY:
        options[op] = [(op, i, j), (op, i, c), (op, c, i)]
    options["pow"] = [("pow", i, k)]
    for op in UNARY:
        options[op] = [(op, i)]
    safe = {
        kind: [s for s in steps if _safe(s[0], s[1:], values) is not None] for kind, steps in options.items()
    }
    return {kind: steps for kind, steps in safe.items() if steps}


def generate(rng: random.Random, max_ops: int = 8) -> list[tuple]:
    """A random program: 1-3 leaves, then up to `max_ops` safe ops, then adds that feed
    every unused node into the output."""
    program: list[tuple] = []
    values: list[float] = []

    def push(step: tuple) -> None:
        values.append(_forward(step[0], step[1:], values))
        program.append(step)

    def leaf() -> tuple:
        return ("leaf", _integer(rng, -300, 300) / 100)

    for _ in range(_integer(rng, 1, 3)):
        push(leaf())
    for _ in range(_integer(rng, 1, max_ops)):
        if _integer(rng, 0, 9) == 9:  # now and then a new leaf (9, not 0: shrinking goes to 0)
            push(leaf())
            continue
        n = len(program)
        # the first operand is one of the three newest nodes, so that the graph grows deep
        i = n - 1 - _integer(rng, 0, min(2, n - 1))
        j = _integer(rng, 0, n - 1)
        options = _candidates(i, j, _pick(rng, NUMBERS), _pick(rng, EXPONENTS), values)
        kinds = [kind for kind in options for _ in range(WEIGHTS.get(kind, 1))]
        push(_pick(rng, options[_pick(rng, kinds)]))
    _join(program, values, push)
    return program


def _join(program: list[tuple], values: list[float], push: Callable[[tuple], None]) -> None:
    """Feed every node that nothing uses into the output, with adds (or subs, when an add
    would leave the bound); a program of leaves only gets one op so it has an output."""
    used = {k for step in program for k in inputs(step)}
    if program[-1][0] == "leaf":
        push(("tanh", len(program) - 1))
    for k in [k for k in range(len(program) - 1) if k not in used]:
        out = len(program) - 1
        # |a + b| or |a - b| is at most max(|a|, |b|): one of the two stays within the bound
        push(("add", out, k) if _safe("add", (out, k), values) is not None else ("sub", out, k))


def fixed_programs(n: int, seed: int, max_ops: int = 8) -> dict[str, list[tuple]]:
    """`n` programs, the same on every run: {"prog0": program, ...} (for `params=`)."""
    rng = random.Random(seed)
    return {f"prog{k}": generate(rng, max_ops) for k in range(n)}


def programs(max_ops: int = 8):
    """A hypothesis strategy of programs; shrinks towards fewer ops and values near 0."""
    return strategy(lambda rng: generate(rng, max_ops))


# ---- running a program ----


def name(program: Sequence[tuple], k: int) -> str:
    """How node k is called: x<k> for a leaf, out for the output, t<k> otherwise."""
    if program[k][0] == "leaf":
        return f"x{k}"
    return "out" if k == len(program) - 1 else f"t{k}"


def _apply(op: str, x: list[Any]) -> Any:
    if op in ARITHMETIC:
        return ARITHMETIC[op](*x)
    return getattr(x[0], op)()  # relu, exp, log, tanh, sigmoid, detach


def build(lib: Any, program: Sequence[tuple]) -> dict[str, Any]:
    """Run `program` on `lib` (no backward): {name: node} for every node, the output as "out"."""
    nodes: list[Any] = []
    for k, (op, *args) in enumerate(program):
        if op == "leaf":
            nodes.append(lib.value(args[0], name(program, k)))
        else:
            nodes.append(_apply(op, _operands(op, args, nodes)))
    return {name(program, k): node for k, node in enumerate(nodes)}


def show(program: Sequence[tuple]) -> str:
    """The program as the Python a student would write with micrograd."""
    lines = []
    for k, (op, *args) in enumerate(program):
        x = [name(program, a) if _is_node(op, p, a) else repr(a) for p, a in enumerate(args)]
        symbol = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}.get(op)
        if op == "leaf":
            text = f"Value({x[0]})"
        elif symbol:
            text = f"{x[0]} {symbol} {x[1]}"
        elif op == "neg":
            text = f"-{x[0]}"
        else:
            text = f"{x[0]}.{op}()"
        lines.append(f"{name(program, k)} = {text}")
    lines.append("out.backward()")
    return "\n".join(lines)


def run_program(lib: Any, program: Sequence[tuple]) -> dict[str, Any]:
    """Build the program, backward from its output, return every node."""
    nodes = build(lib, program)
    lib.backward(nodes["out"])
    return nodes


def program_case(program: Sequence[tuple]) -> Case:
    """A case made on the fly for one program (for hypothesis; worth no points)."""
    import hashlib  # here, not in every sandbox worker's start: OpenSSL's is 4 ms to import

    digest = hashlib.sha256(repr(list(program)).encode()).hexdigest()[:12]
    return Case(
        assignment="micrograd",
        topic="random",
        name="random_program",
        fn=run_program,
        module="hypothesis",
        suite="search",
        points=0.0,
        param_id=digest,
        param=list(program),
    )


def search(max_examples: int, max_ops: int = 8):
    """Decorate an ungraded test that checks `max_examples` more random programs; a failing
    one is shrunk by hypothesis, and its micrograd code ends the failure message."""
    return search_programs(lambda rng: generate(rng, max_ops), program_case, show, max_examples)


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a huge graph is built and differentiated.

    Every micrograd Value is a reference cycle (its `_backward` closure refers to the Value),
    so the collector keeps rescanning the growing graph: on a 10**5-op chain that more than
    doubles the time, for no gain. It runs again afterwards, and frees the graph then.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
