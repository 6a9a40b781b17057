"""Hidden: op rules in isolation and through backward, on other shapes, exponents and axes."""

import numpy as np

from grader.case import case


def array(rng, shape, kind):
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    a = rng.standard_normal(shape)
    if kind == "zeros":
        a.reshape(-1)[1::2] = 0.0
    return a


# name -> (op class, input shapes, kind, op arguments, output shape)
RULES = {
    "AddScalar-negative": ("AddScalar", [(4,)], "normal", {"scalar": -3.0}, (4,)),
    "MulScalar-zero-d": ("MulScalar", [()], "normal", {"scalar": 2.5}, ()),
    "PowerScalar-square": ("PowerScalar", [(3, 2)], "normal", {"scalar": 2}, (3, 2)),
    "PowerScalar-negative": ("PowerScalar", [(3, 2)], "positive", {"scalar": -1.5}, (3, 2)),
    "PowerScalar-fraction": ("PowerScalar", [(2, 2, 2)], "positive", {"scalar": 0.5}, (2, 2, 2)),
    "EWisePow-3d": ("EWisePow", [(2, 2, 2), (2, 2, 2)], "positive", {}, (2, 2, 2)),
    "EWiseDiv-3d": ("EWiseDiv", [(2, 1, 3), (2, 1, 3)], "positive", {}, (2, 1, 3)),
    "DivScalar-negative": ("DivScalar", [(5,)], "normal", {"scalar": -0.5}, (5,)),
    "ReLU-many-zeros": ("ReLU", [(4, 4)], "zeros", {}, (4, 4)),
    "Exp-0d": ("Exp", [()], "normal", {}, ()),
    "Log-3d": ("Log", [(2, 3, 2)], "positive", {}, (2, 3, 2)),
    "Tanh-4d": ("Tanh", [(2, 1, 2, 3)], "normal", {}, (2, 1, 2, 3)),
    "Transpose-axes-02": ("Transpose", [(2, 3, 4)], "normal", {"axes": (0, 2)}, (4, 3, 2)),
    "Transpose-axes-12": ("Transpose", [(2, 3, 4)], "normal", {"axes": (1, 2)}, (2, 4, 3)),
    "Transpose-default-4d": ("Transpose", [(2, 1, 3, 4)], "normal", {"axes": None}, (2, 1, 4, 3)),
    "Reshape-flatten": ("Reshape", [(2, 3, 2)], "normal", {"shape": (12,)}, (12,)),
    "Reshape-unit-axes": ("Reshape", [(6,)], "normal", {"shape": (1, 2, 1, 3)}, (1, 2, 1, 3)),
    "BroadcastTo-row": ("BroadcastTo", [(1, 3)], "normal", {"shape": (2, 4, 3)}, (2, 4, 3)),
    "BroadcastTo-two-stretched": ("BroadcastTo", [(2, 1, 1)], "normal", {"shape": (2, 3, 4)}, (2, 3, 4)),
    "BroadcastTo-square": ("BroadcastTo", [(3,)], "normal", {"shape": (3, 3)}, (3, 3)),
    "Summation-int-first": ("Summation", [(3, 2, 2)], "normal", {"axes": 0}, (2, 2)),
    "Summation-tuple-last-two": ("Summation", [(2, 3, 4)], "normal", {"axes": (1, 2)}, (2,)),
    "Summation-tuple-all": ("Summation", [(2, 3)], "normal", {"axes": (0, 1)}, ()),
    "MatMul-broadcast-lhs": ("MatMul", [(3, 4), (2, 4, 5)], "normal", {}, (2, 3, 5)),
    "MatMul-broadcast-batch": ("MatMul", [(2, 1, 3, 4), (3, 4, 2)], "normal", {}, (2, 3, 3, 2)),
    "MatMul-square": ("MatMul", [(3, 3), (3, 3)], "normal", {}, (3, 3)),
}


@case("needle", topic="op-gradients", points=1, params=list(RULES))
def test_hidden_op_gradient(lib, name):
    """The op's gradient for each input, from a random out_grad."""
    op, shapes, kind, args, out_shape = RULES[name]
    rng = np.random.default_rng(1010)
    xs = [lib.tensor(array(rng, s, kind), "abc"[i]) for i, s in enumerate(shapes)]
    out_grad = lib.tensor(rng.standard_normal(out_shape), "out_grad", requires_grad=False)
    grads = lib.op_gradient(op, xs, out_grad, **args)
    return {f"gradient for {x_name}": g for x_name, g in zip("abc", grads, strict=False)}


@case(
    "needle", topic="op-gradients", points=1, params=["Summation-tuple-last-two", "BroadcastTo-row", "Log-3d"]
)
def test_hidden_op_gradient_float32(lib, name):
    """The same rules on float32 tensors."""
    op, shapes, kind, args, out_shape = RULES[name]
    rng = np.random.default_rng(1011)
    xs = [lib.tensor(array(rng, s, kind), "abc"[i], dtype="float32") for i, s in enumerate(shapes)]
    out_grad = lib.tensor(rng.standard_normal(out_shape), "out_grad", dtype="float32", requires_grad=False)
    grads = lib.op_gradient(op, xs, out_grad, **args)
    return {f"gradient for {x_name}": g for x_name, g in zip("abc", grads, strict=False)}


# name -> (build from lib and the leaves, leaf shapes, kind)
CHAINS = {
    "scalar-ops": (lambda lib, a: ((a + 2.0) * 3.0 - 1.0) / 2.0, [(3, 2)], "normal"),
    "reflected": (lambda lib, a: 2.0 - 1.0 / a + 3.0 * a, [(2, 3)], "positive"),
    "helpers": (
        lambda lib, a, b: lib.divide(lib.multiply(a, b), lib.add_scalar(lib.power_scalar(b, 2), 1.0)),
        [(2, 2), (2, 2)],
        "normal",
    ),
    "negate-exp-log": (lambda lib, a: lib.log(lib.exp(lib.negate(a)) + 1.0), [(4,)], "normal"),
    "pow-of-pow": (lambda lib, a, b: (a**b) ** 2.0, [(3,), (3,)], "positive"),
    "relu-tanh": (lambda lib, a: lib.relu(a) * lib.tanh(a), [(3, 3)], "zeros"),
    "sum-then-broadcast": (
        lambda lib, a: a.sum(axes=(0,)).reshape((1, 3)).broadcast_to((4, 3)) * a,
        [(4, 3)],
        "normal",
    ),
    "transpose-matmul": (lambda lib, a, b: lib.transpose(a) @ lib.matmul(a, b), [(3, 2), (2, 2)], "normal"),
}


@case("needle", topic="ops", points=1, params=list(CHAINS))
def test_hidden_chain_backward(lib, name):
    """A short chain of ops, backward with a random out_grad."""
    build, shapes, kind = CHAINS[name]
    rng = np.random.default_rng(1020)
    xs = [lib.tensor(array(rng, s, kind), "abc"[i]) for i, s in enumerate(shapes)]
    y = build(lib, *xs)
    out_grad = lib.tensor(rng.standard_normal(lib.numpy(y).shape), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"y": y, **{"abc"[i]: x for i, x in enumerate(xs)}}


@case("needle", topic="forward", points=1)
def test_hidden_forward_float32(lib):
    """Every op's forward on float32 inputs, in one expression."""
    rng = np.random.default_rng(1030)
    a = lib.tensor(rng.uniform(0.5, 2.0, (2, 3, 4)), "a", dtype="float32")
    b = lib.tensor(rng.standard_normal((4, 2)), "b", dtype="float32")
    h = (a.log() * a**0.5 - a / 3.0).transpose((0, 1)) @ b
    out = lib.summation(h.relu() + (-h).exp() + h.tanh(), (0, 2)).reshape((1, 2)).broadcast_to((3, 2))
    return {"h": h, "out": out}
