"""Matrix products: plain, batched, and with batch axes broadcast. The gradient of an input
whose batch axes were broadcast is summed back to its shape."""

import numpy as np

from grader.case import case

SHAPES = {
    "2d": ((3, 4), (4, 5)),
    "row-times-matrix": ((1, 4), (4, 3)),
    "batched": ((2, 3, 4), (2, 4, 5)),
    "broadcast-rhs": ((2, 3, 4), (4, 5)),
    "broadcast-lhs": ((3, 4), (2, 4, 5)),
    "broadcast-batch-1": ((2, 1, 3, 4), (5, 4, 2)),
}


@case("needle", topic="matmul", points=1, params=list(SHAPES))
def test_matmul(lib, name):
    """a @ b, backward with a random out_grad."""
    sa, sb = SHAPES[name]
    rng = np.random.default_rng(60)
    a = lib.tensor(rng.standard_normal(sa), "a")
    b = lib.tensor(rng.standard_normal(sb), "b")
    c = a @ b
    out_grad = lib.tensor(rng.standard_normal(lib.numpy(c).shape), "out_grad", requires_grad=False)
    lib.backward(c, out_grad)
    return {"a": a, "b": b, "c": c}


@case("needle", topic="matmul", points=1)
def test_matmul_chain(lib):
    """x @ w1 @ w2 with the middle result used again."""
    rng = np.random.default_rng(61)
    x = lib.tensor(rng.standard_normal((4, 3)), "x")
    w1 = lib.tensor(rng.standard_normal((3, 5)), "w1")
    w2 = lib.tensor(rng.standard_normal((5, 2)), "w2")
    h = x @ w1
    y = ((h @ w2).sum() + (h * h).sum()) * 0.5
    lib.backward(y)
    return {"x": x, "w1": w1, "w2": w2, "h": h}


@case("needle", topic="matmul", points=1)
def test_matmul_float32(lib):
    """A batched product of float32 tensors."""
    rng = np.random.default_rng(62)
    a = lib.tensor(rng.standard_normal((3, 4, 5)), "a", dtype="float32")
    b = lib.tensor(rng.standard_normal((5, 2)), "b", dtype="float32")
    c = lib.matmul(a, b)
    out_grad = lib.tensor(rng.standard_normal((3, 4, 2)), "out_grad", dtype="float32", requires_grad=False)
    lib.backward(c, out_grad)
    return {"a": a, "b": b, "c": c}
