"""Broadcasting in needle is explicit (`broadcast_to`), and its gradient sums the copies back:
over prepended axes, over size-1 axes that were stretched, and over everything for a 0-d input."""

import numpy as np

from grader.case import case

# name -> (input shape, target shape)
SHAPES = {
    "prepend": ((3,), (4, 3)),
    "prepend-two": ((3,), (2, 4, 3)),
    "stretch-last": ((3, 1), (3, 4)),
    "stretch-first": ((1, 4), (3, 4)),
    "stretch-middle": ((2, 1, 4), (2, 3, 4)),
    "prepend-and-stretch": ((3, 1), (2, 3, 4)),
    "zero-dim": ((), (2, 3)),
    "size-one": ((1,), (2, 3)),
    "identity": ((2, 3), (2, 3)),
}


@case("needle", topic="broadcast", points=1, params=list(SHAPES))
def test_broadcast_gradient(lib, name):
    """x.broadcast_to(shape), times a random tensor, summed: x.grad has x's shape."""
    shape, target = SHAPES[name]
    rng = np.random.default_rng(30)
    x = lib.tensor(rng.standard_normal(shape), "x")
    w = lib.tensor(rng.standard_normal(target), "w")
    b = x.broadcast_to(target)
    y = (b * w).sum()
    lib.backward(y)
    return {"x": x, "w": w, "b": b, "y": y}


@case("needle", topic="broadcast", points=1)
def test_bias_add(lib):
    """A bias row added to every row of a batch: b.reshape((1, n)).broadcast_to((m, n))."""
    rng = np.random.default_rng(31)
    x = lib.tensor(rng.standard_normal((5, 3)), "x")
    bias = lib.tensor(rng.standard_normal((3,)), "bias")
    y = (x + bias.reshape((1, 3)).broadcast_to((5, 3))).tanh()
    out_grad = lib.tensor(rng.standard_normal((5, 3)), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"x": x, "bias": bias, "y": y}


@case("needle", topic="broadcast", points=1)
def test_broadcast_twice(lib):
    """Broadcasting the broadcast: both gradients are summed back in turn."""
    rng = np.random.default_rng(32)
    x = lib.tensor(rng.standard_normal((1, 3)), "x")
    b1 = x.broadcast_to((4, 3))
    b2 = b1.reshape((4, 1, 3)).broadcast_to((2, 4, 5, 3))
    y = (b2 * b2).sum() + b1.exp().sum()
    lib.backward(y)
    return {"x": x, "b1": b1, "b2": b2}


@case("needle", topic="broadcast", points=1)
def test_scalar_times_matrix(lib):
    """A 0-d tensor scaling a matrix: its gradient is one number."""
    rng = np.random.default_rng(33)
    s = lib.tensor(rng.standard_normal(()), "s")
    m = lib.tensor(rng.standard_normal((3, 4)), "m")
    y = ((s.broadcast_to((3, 4)) * m).tanh() * s.broadcast_to((3, 4))).sum()
    lib.backward(y)
    return {"s": s, "m": m, "y": y}
