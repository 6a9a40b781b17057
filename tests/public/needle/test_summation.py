"""Summation over every form of `axes`: None, an int, a one-axis tuple, several axes, all of
them spelled out. Its gradient puts the summed axes back and broadcasts out_grad over them."""

import numpy as np

from grader.case import case

AXES = {
    "none": None,
    "int-first": 0,
    "int-middle": 1,
    "int-last": 2,
    "tuple-one": (1,),
    "tuple-two": (0, 2),
    "tuple-adjacent": (1, 2),
    "tuple-all": (0, 1, 2),
}


@case("needle", topic="summation", points=1, params=list(AXES))
def test_summation_axes(lib, name):
    """x.sum(axes) on a 3-d x, backward with a random out_grad."""
    rng = np.random.default_rng(40)
    x = lib.tensor(rng.standard_normal((2, 3, 4)), "x")
    s = x.sum(axes=AXES[name])
    out_grad = lib.tensor(rng.standard_normal(lib.numpy(s).shape), "out_grad", requires_grad=False)
    lib.backward(s, out_grad)
    return {"x": x, "s": s}


@case("needle", topic="summation", points=1)
def test_summation_chain(lib):
    """Sums of sums, with the helper and the method, then a nonlinearity between them."""
    rng = np.random.default_rng(41)
    x = lib.tensor(rng.standard_normal((3, 4, 5)), "x")
    a = lib.summation(x, (2,))
    b = (a * a).sum(axes=0)
    y = b.exp().sum()
    lib.backward(y)
    return {"x": x, "a": a, "b": b, "y": y}


@case("needle", topic="summation", points=1)
def test_mean_and_variance(lib):
    """Mean and variance along an axis, as a layer norm computes them."""
    rng = np.random.default_rng(42)
    x = lib.tensor(rng.standard_normal((4, 6)), "x")
    mean = (x.sum(axes=(1,)) / 6.0).reshape((4, 1)).broadcast_to((4, 6))
    centered = x - mean
    var = ((centered**2).sum(axes=(1,)) / 6.0).reshape((4, 1)).broadcast_to((4, 6))
    y = centered / (var + 1e-5) ** 0.5
    out_grad = lib.tensor(rng.standard_normal((4, 6)), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"x": x, "y": y}
