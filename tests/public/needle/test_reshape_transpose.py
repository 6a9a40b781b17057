"""Reshape and transpose: their gradients undo them."""

import numpy as np

from grader.case import case

RESHAPES = {
    "split": ((6,), (2, 3)),
    "merge": ((2, 3, 4), (6, 4)),
    "flatten": ((2, 3, 4), (24,)),
    "add-unit-axes": ((2, 3), (1, 2, 1, 3)),
    "to-scalar": ((1, 1), ()),
}


@case("needle", topic="reshape-transpose", points=1, params=list(RESHAPES))
def test_reshape(lib, name):
    """x.reshape(shape), then a nonlinearity, backward with a random out_grad."""
    shape, target = RESHAPES[name]
    rng = np.random.default_rng(50)
    x = lib.tensor(rng.standard_normal(shape), "x")
    r = x.reshape(target)
    y = r.tanh()
    out_grad = lib.tensor(rng.standard_normal(target), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"x": x, "r": r, "y": y}


TRANSPOSES = {
    "default-2d": ((3, 4), None),
    "default-3d": ((2, 3, 4), None),
    "axes-01": ((2, 3, 4), (0, 1)),
    "axes-02": ((2, 3, 4), (0, 2)),
    "axes-12": ((2, 3, 4), (1, 2)),
}


@case("needle", topic="reshape-transpose", points=1, params=list(TRANSPOSES))
def test_transpose(lib, name):
    """x.transpose(axes): the default swaps the last two axes, else the pair given."""
    shape, axes = TRANSPOSES[name]
    rng = np.random.default_rng(51)
    x = lib.tensor(rng.standard_normal(shape), "x")
    t = x.transpose(axes)
    w = lib.tensor(rng.standard_normal(lib.numpy(t).shape), "w")
    y = (t * w).sum()
    lib.backward(y)
    return {"x": x, "t": t, "w": w}


@case("needle", topic="reshape-transpose", points=1)
def test_reshape_then_transpose(lib):
    """A reshape and a transpose in a row, then a matmul with the original."""
    rng = np.random.default_rng(52)
    x = lib.tensor(rng.standard_normal((2, 6)), "x")
    t = x.reshape((2, 3, 2)).transpose((0, 1))
    y = (t.reshape((6, 2)) @ x).sum()
    lib.backward(y)
    return {"x": x, "t": t, "y": y}
