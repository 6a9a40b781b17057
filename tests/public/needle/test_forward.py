"""Forward values of every needle op, through Tensor's operators and through the helpers.

Forward computation is given in the template, so these pass on it untouched.
"""

import numpy as np

from grader.case import case


def arrays(seed, *shapes, kind="normal"):
    rng = np.random.default_rng(seed)
    if kind == "positive":
        return [rng.uniform(0.5, 2.0, shape) for shape in shapes]
    return [rng.standard_normal(shape) for shape in shapes]


def leaves(lib, seed, *shapes, kind="normal", dtype="float64"):
    return [lib.tensor(a, "abc"[i], dtype=dtype) for i, a in enumerate(arrays(seed, *shapes, kind=kind))]


# name -> (build from lib and the leaves, leaf shapes, kind of input)
FORWARD = {
    "add": (lambda lib, a, b: a + b, [(2, 3), (2, 3)], "normal"),
    "add_scalar": (lambda lib, a: a + 1.5, [(2, 3)], "normal"),
    "radd": (lambda lib, a: 1.5 + a, [(2, 3)], "normal"),
    "sub": (lambda lib, a, b: a - b, [(2, 3), (2, 3)], "normal"),
    "sub_scalar": (lambda lib, a: a - 0.5, [(2, 3)], "normal"),
    "rsub": (lambda lib, a: 2.0 - a, [(2, 3)], "normal"),
    "mul": (lambda lib, a, b: a * b, [(3, 2), (3, 2)], "normal"),
    "mul_scalar": (lambda lib, a: a * -2.5, [(3, 2)], "normal"),
    "rmul": (lambda lib, a: 0.5 * a, [(3, 2)], "normal"),
    "div": (lambda lib, a, b: a / b, [(2, 3), (2, 3)], "positive"),
    "div_scalar": (lambda lib, a: a / 4.0, [(2, 3)], "normal"),
    "rdiv": (lambda lib, a: 3.0 / a, [(2, 3)], "positive"),
    "pow_scalar": (lambda lib, a: a**3, [(2, 3)], "normal"),
    "pow_fraction": (lambda lib, a: a**0.5, [(2, 3)], "positive"),
    "pow_tensor": (lambda lib, a, b: a**b, [(2, 3), (2, 3)], "positive"),
    "neg": (lambda lib, a: -a, [(4,)], "normal"),
    "exp": (lambda lib, a: a.exp(), [(2, 3)], "normal"),
    "log": (lambda lib, a: a.log(), [(2, 3)], "positive"),
    "relu": (lambda lib, a: a.relu(), [(3, 3)], "normal"),
    "tanh": (lambda lib, a: a.tanh(), [(2, 3)], "normal"),
    "matmul": (lambda lib, a, b: a @ b, [(2, 3), (3, 4)], "normal"),
    "sum_all": (lambda lib, a: a.sum(), [(2, 3)], "normal"),
    "sum_axis": (lambda lib, a: a.sum(axes=1), [(2, 3)], "normal"),
    "reshape": (lambda lib, a: a.reshape((3, 2)), [(2, 3)], "normal"),
    "broadcast_to": (lambda lib, a: a.broadcast_to((2, 3)), [(1, 3)], "normal"),
    "transpose": (lambda lib, a: a.transpose(), [(2, 3)], "normal"),
    "transpose_axes": (lambda lib, a: a.transpose((0, 2)), [(2, 3, 4)], "normal"),
    # the ops' helpers: ndl.add_scalar(a, 1.5), ...
    "helper_add": (lambda lib, a, b: lib.add(a, b), [(2, 3), (2, 3)], "normal"),
    "helper_add_scalar": (lambda lib, a: lib.add_scalar(a, 1.5), [(2, 3)], "normal"),
    "helper_multiply": (lambda lib, a, b: lib.multiply(a, b), [(2, 3), (2, 3)], "normal"),
    "helper_mul_scalar": (lambda lib, a: lib.mul_scalar(a, 3.0), [(2, 3)], "normal"),
    "helper_power_scalar": (lambda lib, a: lib.power_scalar(a, 2), [(2, 3)], "normal"),
    "helper_power": (lambda lib, a, b: lib.power(a, b), [(2, 3), (2, 3)], "positive"),
    "helper_divide": (lambda lib, a, b: lib.divide(a, b), [(2, 3), (2, 3)], "positive"),
    "helper_divide_scalar": (lambda lib, a: lib.divide_scalar(a, 2.0), [(2, 3)], "normal"),
    "helper_negate": (lambda lib, a: lib.negate(a), [(2, 3)], "normal"),
    "helper_exp": (lambda lib, a: lib.exp(a), [(2, 3)], "normal"),
    "helper_log": (lambda lib, a: lib.log(a), [(2, 3)], "positive"),
    "helper_relu": (lambda lib, a: lib.relu(a), [(2, 3)], "normal"),
    "helper_tanh": (lambda lib, a: lib.tanh(a), [(2, 3)], "normal"),
    "helper_transpose": (lambda lib, a: lib.transpose(a, (1, 2)), [(2, 3, 4)], "normal"),
    "helper_reshape": (lambda lib, a: lib.reshape(a, (6,)), [(2, 3)], "normal"),
    "helper_broadcast_to": (lambda lib, a: lib.broadcast_to(a, (4, 2, 3)), [(2, 3)], "normal"),
    "helper_summation": (lambda lib, a: lib.summation(a, (0, 2)), [(2, 3, 4)], "normal"),
    "helper_matmul": (lambda lib, a, b: lib.matmul(a, b), [(2, 2, 3), (2, 3, 2)], "normal"),
}


@case("needle", topic="forward", points=0.5, params=list(FORWARD))
def test_op_forward(lib, name):
    """The op's output, on random inputs."""
    build, shapes, kind = FORWARD[name]
    xs = leaves(lib, 1, *shapes, kind=kind)
    return {"out": build(lib, *xs)}


@case("needle", topic="forward", points=1)
def test_forward_float32(lib):
    """float32 inputs give float32 results within float32's precision."""
    a, b, c = leaves(lib, 2, (3, 4), (4, 5), (5,), dtype="float32")
    out = ((a @ b).tanh() * 2.0 + c.reshape((1, 5)).broadcast_to((3, 5))).exp().sum(axes=(1,)) / 3.0
    return {"out": out}


@case("needle", topic="forward", points=1)
def test_forward_zero_dim(lib):
    """0-d tensors work like scalars, and broadcast to any shape."""
    (s,) = leaves(lib, 3, ())
    (a,) = leaves(lib, 4, (2, 3))
    out = s.broadcast_to((2, 3)) * a + (s.exp() - s * s).broadcast_to((2, 3))
    return {"s": s, "out": out, "total": (out * 0.5).sum()}


@case("needle", topic="forward", points=1)
def test_forward_expression(lib):
    """A longer expression: every op's forward, chained."""
    x, w = leaves(lib, 5, (4, 3), (3, 2))
    h = (x @ w).relu() + (x @ w).tanh() * 0.5
    out = (h.transpose() @ h).reshape((4,)).broadcast_to((2, 4)).sum(axes=0) ** 2
    return {"h": h, "out": out}
