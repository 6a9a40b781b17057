"""Every operation of `Value`: its forward value, its gradient rule alone, and through backward().

One table drives three kinds of cases. Each row is an op and the inputs to try it at:

- `forward[...]`: the value only (forward code is given, so these pass from the start);
- `rule[...]`: only the op's own `_backward` closure, with `out.grad` set to OUT_GRAD, run
  twice: the second run adds to what the first left in the inputs' gradients (`+=`)
  (primitives only: these are the closures you write, testable before backward() exists);
- `backward[...]`: `y.backward()` on the op, which also covers the ops built from primitives
  (neg, sub, div and the reflected ones, `2 - a` and friends).

The expected numbers come from PyTorch (float64), run on the very same expression.
"""

from grader.case import case

# name -> (the expression, as a function of its leaves; the leaves' values)
OPS = {
    "add": (lambda a, b: a + b, (1.5, -4.0)),
    "add-same-leaf": (lambda a: a + a, (0.75,)),
    "add-number": (lambda a: a + 2.5, (-1.0,)),
    "mul": (lambda a, b: a * b, (2.0, -3.0)),
    "mul-same-leaf": (lambda a: a * a, (-1.25,)),
    "mul-number": (lambda a: a * 4.0, (0.5,)),
    "pow-int": (lambda a: a**3, (-1.5,)),
    "pow-square": (lambda a: a**2, (2.5,)),
    "pow-negative": (lambda a: a**-2, (0.8,)),
    "pow-fraction": (lambda a: a**0.5, (2.25,)),
    "pow-negative-fraction": (lambda a: a**-1.5, (1.7,)),
    "relu-positive": (lambda a: a.relu(), (3.0,)),
    "relu-negative": (lambda a: a.relu(), (-2.0,)),
    "relu-zero": (lambda a: a.relu(), (0.0,)),
    "exp": (lambda a: a.exp(), (0.7,)),
    "exp-negative": (lambda a: a.exp(), (-2.2,)),
    "log": (lambda a: a.log(), (2.5,)),
    "log-small": (lambda a: a.log(), (0.05,)),
    "tanh": (lambda a: a.tanh(), (0.6,)),
    "tanh-large": (lambda a: a.tanh(), (1000.0,)),
    "tanh-large-negative": (lambda a: a.tanh(), (-1000.0,)),
    "sigmoid": (lambda a: a.sigmoid(), (-0.8,)),
    "sigmoid-large": (lambda a: a.sigmoid(), (40.0,)),
    "sigmoid-large-negative": (lambda a: a.sigmoid(), (-1000.0,)),
    "neg": (lambda a: -a, (1.25,)),
    "sub": (lambda a, b: a - b, (2.0, 5.5)),
    "sub-number": (lambda a: a - 1.5, (0.25,)),
    "div": (lambda a, b: a / b, (3.0, -1.6)),
    "div-number": (lambda a: a / 4.0, (-2.0,)),
    "radd": (lambda a: 2 + a, (0.5,)),
    "rsub": (lambda a: 2 - a, (0.5,)),
    "rmul": (lambda a: 2 * a, (0.5,)),
    "rdiv": (lambda a: 2 / a, (0.5,)),
}

# rows whose op is one primitive, with a `_backward` closure of its own
PRIMITIVE_OPS = ("add", "mul", "pow", "relu", "exp", "log", "tanh", "sigmoid")
PRIMITIVES = [name for name in OPS if name.split("-")[0] in PRIMITIVE_OPS]

OUT_GRAD = -1.75  # not 1, so that a rule that forgets to multiply by out.grad is caught


def leaves(lib, values):
    return [lib.value(v, "abc"[i]) for i, v in enumerate(values)]


def results(xs, y):
    return {"y": y, **{"abc"[i]: x for i, x in enumerate(xs)}}


@case("micrograd", topic="forward", points=1, params=list(OPS))
def test_forward(lib, name):
    """y = op(inputs): the value only."""
    op, values = OPS[name]
    xs = leaves(lib, values)
    return {"y": op(*xs)}


@case("micrograd", topic="ops", points=1, params=PRIMITIVES)
def test_rule(lib, name):
    """The op's own _backward alone, twice: y.grad = OUT_GRAD, then y._backward(); again."""
    op, values = OPS[name]
    xs = leaves(lib, values)
    y = op(*xs)
    lib.local_backward(y, OUT_GRAD)
    lib.local_backward(y, OUT_GRAD)
    return results(xs, y)


@case("micrograd", topic="ops", points=1, params=list(OPS))
def test_backward(lib, name):
    """y = op(inputs); y.backward()."""
    op, values = OPS[name]
    xs = leaves(lib, values)
    y = op(*xs)
    lib.backward(y)
    return results(xs, y)
