"""Hidden: more random programs, some in float32, and finite differences as the oracle."""

import numpy as np

from grader.assignments.needle.programs import random_program, run
from grader.case import case


@case("needle", topic="random", points=1, params=range(100, 115))
def test_hidden_random_program(lib, seed):
    """A random program (longer than the public ones)."""
    return run(lib, random_program(seed, steps=8))


@case("needle", topic="random", points=1, params=range(200, 205))
def test_hidden_random_float32(lib, seed):
    """A random program on float32 tensors."""
    return run(lib, random_program(seed), dtype="float32")


@case("needle", topic="finite-differences", points=1)
def test_hidden_fd_normalize(lib):
    """Normalizing rows by their norm, then a weighted sum: gradients by finite differences."""
    rng = np.random.default_rng(4010)
    x = lib.tensor(rng.standard_normal((3, 4)), "x")
    w = lib.tensor(rng.standard_normal((3, 4)), "w")

    def f(x, w):
        norm = ((x * x).sum(axes=(1,)) + 1e-3) ** 0.5
        return (x / norm.reshape((3, 1)).broadcast_to((3, 4)) * w).sum(axes=(0,))

    y = lib.differentiate(f, [x, w], out_grad=rng.standard_normal((4,)))
    return {"x": x, "w": w, "y": y}


@case("needle", topic="finite-differences", points=1)
def test_hidden_fd_batched(lib):
    """A batched product with a transpose and an element-wise power."""
    rng = np.random.default_rng(4011)
    a = lib.tensor(rng.standard_normal((2, 3, 2)), "a")
    b = lib.tensor(rng.uniform(0.5, 1.5, (2, 2, 3)), "b")

    def f(a, b):
        return (a @ b).tanh().sum() + (b.transpose((1, 2)) ** a).sum()

    y = lib.differentiate(f, [a, b])
    return {"a": a, "b": b, "y": y}
