"""Hidden: broadcasting, summation, reshape, transpose and matmul on other shapes."""

import numpy as np

from grader.case import case

BROADCASTS = {
    "prepend-three": ((2,), (3, 2, 4, 2)),
    "stretch-two": ((3, 1, 1), (3, 2, 5)),
    "zero-dim-to-3d": ((), (2, 2, 3)),
    "one-by-one": ((1, 1), (3, 4)),
    "square-prepend": ((4,), (4, 4)),
}


@case("needle", topic="broadcast", points=1, params=list(BROADCASTS))
def test_hidden_broadcast(lib, name):
    """broadcast_to then a non-linear use of the copies."""
    shape, target = BROADCASTS[name]
    rng = np.random.default_rng(2010)
    x = lib.tensor(rng.standard_normal(shape), "x")
    w = lib.tensor(rng.standard_normal(target), "w")
    b = x.broadcast_to(target)
    y = ((b * w).tanh() * b).sum()
    lib.backward(y)
    return {"x": x, "w": w, "b": b}


@case("needle", topic="summation", points=1, params={"4d-int": 3, "4d-pair": (0, 3), "4d-three": (0, 1, 2)})
def test_hidden_summation(lib, axes):
    """x.sum(axes) on a 4-d x, squared and summed."""
    rng = np.random.default_rng(2020)
    x = lib.tensor(rng.standard_normal((2, 3, 2, 2)), "x")
    s = x.sum(axes=axes)
    y = (s * s).sum()
    lib.backward(y)
    return {"x": x, "s": s}


@case("needle", topic="summation", points=1)
def test_hidden_softmax(lib):
    """Softmax along the last axis of a 3-d tensor."""
    rng = np.random.default_rng(2021)
    x = lib.tensor(rng.standard_normal((2, 3, 4)), "x")
    e = x.exp()
    p = e / e.sum(axes=(2,)).reshape((2, 3, 1)).broadcast_to((2, 3, 4))
    out_grad = lib.tensor(rng.standard_normal((2, 3, 4)), "out_grad", requires_grad=False)
    lib.backward(p, out_grad)
    return {"x": x, "p": p}


@case("needle", topic="reshape-transpose", points=1, params={"02": (0, 2), "10": (1, 0), "default": None})
def test_hidden_transpose_twice(lib, axes):
    """Transpose, reshape, transpose back, on a 3-d tensor."""
    rng = np.random.default_rng(2030)
    x = lib.tensor(rng.standard_normal((2, 3, 4)), "x")
    t = x.transpose(axes)
    r = t.reshape((4, 6)).reshape(lib.numpy(t).shape)
    u = r.transpose(axes)
    w = lib.tensor(rng.standard_normal((2, 3, 4)), "w")
    y = ((u * w).exp() * x).sum()
    lib.backward(y)
    return {"x": x, "t": t, "u": u, "w": w}


MATMULS = {
    "batched-4d": ((2, 2, 3, 4), (2, 2, 4, 1)),
    "broadcast-both": ((2, 1, 3, 2), (1, 4, 2, 3)),
    "outer": ((3, 1), (1, 4)),
}


@case("needle", topic="matmul", points=1, params=list(MATMULS))
def test_hidden_matmul(lib, name):
    """a @ b then tanh, backward with a random out_grad."""
    sa, sb = MATMULS[name]
    rng = np.random.default_rng(2040)
    a = lib.tensor(rng.standard_normal(sa), "a")
    b = lib.tensor(rng.standard_normal(sb), "b")
    c = (a @ b).tanh()
    out_grad = lib.tensor(rng.standard_normal(lib.numpy(c).shape), "out_grad", requires_grad=False)
    lib.backward(c, out_grad)
    return {"a": a, "b": b, "c": c}


@case("needle", topic="matmul", points=1)
def test_hidden_attention(lib):
    """Scaled dot-product attention weights for a batch of two."""
    rng = np.random.default_rng(2041)
    q = lib.tensor(rng.standard_normal((2, 3, 4)), "q")
    k = lib.tensor(rng.standard_normal((2, 3, 4)), "k")
    v = lib.tensor(rng.standard_normal((2, 3, 4)), "v")
    scores = (q @ k.transpose()) / 2.0
    e = scores.exp()
    weights = e / e.sum(axes=(2,)).reshape((2, 3, 1)).broadcast_to((2, 3, 3))
    out = weights @ v
    out_grad = lib.tensor(rng.standard_normal((2, 3, 4)), "out_grad", requires_grad=False)
    lib.backward(out, out_grad)
    return {"q": q, "k": k, "v": v, "weights": weights}
