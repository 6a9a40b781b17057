"""Every op's gradient through `backward()`, seeded with a random out_grad."""

import numpy as np

from grader.case import case


def arrays(rng, shapes, kind):
    if kind == "positive":
        return [rng.uniform(0.5, 2.0, s) for s in shapes]
    out = [rng.standard_normal(s) for s in shapes]
    if kind == "zeros":
        for a in out:
            a.reshape(-1)[::4] = 0.0
    return out


# name -> (build from lib and the leaves, leaf shapes, kind of input)
OPS = {
    "add": (lambda lib, a, b: a + b, [(2, 3), (2, 3)], "normal"),
    "add_scalar": (lambda lib, a: a + 1.5, [(2, 3)], "normal"),
    "sub": (lambda lib, a, b: a - b, [(2, 3), (2, 3)], "normal"),
    "rsub": (lambda lib, a: 2.0 - a, [(2, 3)], "normal"),
    "mul": (lambda lib, a, b: a * b, [(3, 2), (3, 2)], "normal"),
    "mul_scalar": (lambda lib, a: a * -2.5, [(3, 2)], "normal"),
    "div": (lambda lib, a, b: a / b, [(2, 3), (2, 3)], "positive"),
    "div_scalar": (lambda lib, a: a / 4.0, [(2, 3)], "normal"),
    "rdiv": (lambda lib, a: 3.0 / a, [(2, 3)], "positive"),
    "pow_scalar": (lambda lib, a: a**3, [(2, 3)], "normal"),
    "pow_tensor": (lambda lib, a, b: a**b, [(2, 3), (2, 3)], "positive"),
    "neg": (lambda lib, a: -a, [(4,)], "normal"),
    "exp": (lambda lib, a: a.exp(), [(2, 3)], "normal"),
    "log": (lambda lib, a: a.log(), [(2, 3)], "positive"),
    "relu": (lambda lib, a: a.relu(), [(3, 4)], "zeros"),
    "tanh": (lambda lib, a: a.tanh(), [(2, 3)], "normal"),
    "matmul": (lambda lib, a, b: a @ b, [(2, 3), (3, 4)], "normal"),
    "sum": (lambda lib, a: a.sum(axes=(1,)), [(2, 3)], "normal"),
    "reshape": (lambda lib, a: a.reshape((3, 2)), [(2, 3)], "normal"),
    "broadcast_to": (lambda lib, a: a.broadcast_to((2, 3)), [(1, 3)], "normal"),
    "transpose": (lambda lib, a: a.transpose(), [(2, 3)], "normal"),
    "helper_power_scalar": (lambda lib, a: lib.power_scalar(a, -2), [(2, 3)], "positive"),
    "helper_divide": (lambda lib, a, b: lib.divide(a, b), [(2, 3), (2, 3)], "positive"),
    "helper_summation": (lambda lib, a: lib.summation(a, None), [(2, 3)], "normal"),
}


@case("needle", topic="ops", points=1, params=list(OPS))
def test_op_backward(lib, name):
    """y = op(inputs); y.backward(out_grad) with a random out_grad."""
    build, shapes, kind = OPS[name]
    rng = np.random.default_rng(20)
    xs = [lib.tensor(a, "abc"[i]) for i, a in enumerate(arrays(rng, shapes, kind))]
    y = build(lib, *xs)
    out_grad = lib.tensor(rng.standard_normal(lib.numpy(y).shape), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"y": y, **{"abc"[i]: x for i, x in enumerate(xs)}}


@case("needle", topic="ops", points=1)
def test_backward_seeds_ones(lib):
    """Without out_grad, backward seeds the output with ones: the gradient of its sum."""
    rng = np.random.default_rng(21)
    a = lib.tensor(rng.standard_normal((2, 3)), "a")
    b = lib.tensor(rng.standard_normal((2, 3)), "b")
    y = (a * b).exp()
    lib.backward(y)
    return {"a": a, "b": b, "y": y}


@case("needle", topic="ops", points=1)
def test_backward_float32(lib):
    """float32 tensors get float32 gradients, within float32's precision."""
    rng = np.random.default_rng(22)
    a = lib.tensor(rng.standard_normal((3, 4)), "a", dtype="float32")
    b = lib.tensor(rng.uniform(0.5, 2.0, (3, 4)), "b", dtype="float32")
    y = (a * b).tanh() / b + a**2
    out_grad = lib.tensor(rng.standard_normal((3, 4)), "out_grad", dtype="float32", requires_grad=False)
    lib.backward(y, out_grad)
    return {"a": a, "b": b, "y": y}
