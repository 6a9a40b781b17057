"""Hidden: every op again, at other inputs (other signs, zeros, saturation, other exponents)."""

from grader.case import case

# name -> (the op, the leaves' values)
OPS = {
    "add": (lambda a, b: a + b, (-2.25, 0.5)),
    "add-three-times": (lambda a: a + a + a, (1.1,)),
    "add-negative-number": (lambda a: a + -3.5, (0.25,)),
    "mul": (lambda a, b: a * b, (0.0, 7.0)),
    "mul-same-leaf": (lambda a: a * a, (3.0,)),
    "mul-negative-number": (lambda a: a * -0.5, (1.75,)),
    "pow-four": (lambda a: a**4, (-1.2,)),
    "pow-minus-one": (lambda a: a**-1, (-2.0,)),
    "pow-float-two": (lambda a: a**2.0, (-1.5,)),
    "pow-square-at-zero": (lambda a: a**2, (0.0,)),
    "pow-sqrt": (lambda a: a**0.5, (9.0,)),
    "pow-two-and-a-half": (lambda a: a**2.5, (1.3,)),
    "pow-minus-half": (lambda a: a**-0.5, (4.0,)),
    "relu-tiny-positive": (lambda a: a.relu(), (1e-3,)),
    "relu-tiny-negative": (lambda a: a.relu(), (-1e-3,)),
    "relu-zero-computed": (lambda a, b: (a - b).relu(), (0.7, 0.7)),
    "exp-zero": (lambda a: a.exp(), (0.0,)),
    "exp-five": (lambda a: a.exp(), (5.0,)),
    "log-one": (lambda a: a.log(), (1.0,)),
    "log-ten": (lambda a: a.log(), (10.0,)),
    "tanh-negative": (lambda a: a.tanh(), (-2.0,)),
    "tanh-zero": (lambda a: a.tanh(), (0.0,)),
    "tanh-saturated": (lambda a: a.tanh(), (20.0,)),
    "sigmoid-zero": (lambda a: a.sigmoid(), (0.0,)),
    "sigmoid-positive": (lambda a: a.sigmoid(), (1.3,)),
    "sigmoid-huge": (lambda a: a.sigmoid(), (1000.0,)),
    "sigmoid-very-negative": (lambda a: a.sigmoid(), (-40.0,)),
    "neg": (lambda a: -a, (-3.0,)),
    "neg-of-sum": (lambda a, b: -(a + b), (0.4, -1.1)),
    "sub": (lambda a, b: a - b, (-1.0, 2.5)),
    "sub-same-leaf": (lambda a: a - a, (1.5,)),
    "div": (lambda a, b: a / b, (-4.5, 0.25)),
    "div-same-leaf": (lambda a: a / a, (-0.6,)),
    "radd-float": (lambda a: -3.5 + a, (1.0,)),
    "rsub-float": (lambda a: 2.5 - a, (-1.0,)),
    "rsub-int": (lambda a: -1 - a, (0.3,)),
    "rmul-float": (lambda a: -0.5 * a, (4.0,)),
    "rdiv-float": (lambda a: -3.0 / a, (1.5,)),
    "rdiv-int": (lambda a: 1 / a, (-0.8,)),
}

PRIMITIVE_OPS = ("add", "mul", "pow", "relu", "exp", "log", "tanh", "sigmoid")
PRIMITIVES = [name for name in OPS if name.split("-")[0] in PRIMITIVE_OPS]
PRIMITIVES.remove("add-three-times")  # two adds: not one rule
PRIMITIVES.remove("relu-zero-computed")  # a sub, then the relu

# forward is given code: its hidden cases are the ops composed of others, and extremes
FORWARD = [
    "add-three-times",
    "pow-float-two",
    "pow-two-and-a-half",
    "relu-zero-computed",
    "tanh-saturated",
    "sigmoid-huge",
    "sigmoid-very-negative",
    "neg-of-sum",
    "sub-same-leaf",
    "div-same-leaf",
    "rsub-float",
    "rsub-int",
    "rdiv-float",
    "rdiv-int",
]

OUT_GRAD = 0.4


def leaves(lib, values):
    return [lib.value(v, "abc"[i]) for i, v in enumerate(values)]


@case("micrograd", topic="forward", points=1, params=FORWARD)
def test_hidden_forward(lib, name):
    """y = op(inputs): the value only."""
    op, values = OPS[name]
    return {"y": op(*leaves(lib, values))}


@case("micrograd", topic="ops", points=1, params=PRIMITIVES)
def test_hidden_rule(lib, name):
    """The op's own _backward alone, with y.grad = OUT_GRAD."""
    op, values = OPS[name]
    xs = leaves(lib, values)
    y = op(*xs)
    lib.local_backward(y, OUT_GRAD)
    return {"y": y, "xs": xs}


@case("micrograd", topic="ops", points=1, params=list(OPS))
def test_hidden_backward(lib, name):
    """z = op(inputs) * 1.5; z.backward(): the op somewhere inside a graph."""
    op, values = OPS[name]
    xs = leaves(lib, values)
    y = op(*xs)
    z = y * 1.5
    lib.backward(z)
    return {"z": z, "y": y, "xs": xs}
