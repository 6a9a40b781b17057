"""A second oracle: on these cases the expected gradients of the leaves come from central
finite differences of the float64 forward pass (not from autograd), and the oracle checks
that autograd agrees with them before any submission is compared."""

import numpy as np

from grader.case import case


@case("needle", topic="finite-differences", points=1)
def test_fd_layer(lib):
    """A dense layer with a broadcast bias, tanh and a weighted sum."""
    rng = np.random.default_rng(120)
    x = lib.tensor(rng.standard_normal((3, 4)), "x")
    w = lib.tensor(rng.standard_normal((4, 2)), "w")
    b = lib.tensor(rng.standard_normal((2,)), "b")

    def f(x, w, b):
        return (x @ w + b.reshape((1, 2)).broadcast_to((3, 2))).tanh().sum(axes=(0,))

    y = lib.differentiate(f, [x, w, b], out_grad=rng.standard_normal((2,)))
    return {"x": x, "w": w, "b": b, "y": y}


@case("needle", topic="finite-differences", points=1)
def test_fd_quotients(lib):
    """Divide, log, power of tensors and a transpose."""
    rng = np.random.default_rng(121)
    a = lib.tensor(rng.uniform(0.5, 2.0, (2, 3)), "a")
    b = lib.tensor(rng.uniform(0.5, 2.0, (3, 2)), "b")

    def f(a, b):
        return (a.log() / b.transpose() + a ** b.transpose() - (a * 2.0).exp() / 10.0).sum()

    y = lib.differentiate(f, [a, b])
    return {"a": a, "b": b, "y": y}


@case("needle", topic="finite-differences", points=1)
def test_fd_softmax_loss(lib):
    """A softmax cross-entropy loss over a batched product."""
    rng = np.random.default_rng(122)
    x = lib.tensor(rng.standard_normal((2, 3, 4)), "x")
    w = lib.tensor(rng.standard_normal((4, 3)), "w")
    onehot = lib.tensor(np.eye(3)[rng.integers(0, 3, (2, 3))], "Y", requires_grad=False)

    def f(x, w, onehot):
        z = x @ w
        return (z.exp().sum(axes=(2,)).log().sum() - (z * onehot).sum()) / 6.0

    y = lib.differentiate(f, [x, w, onehot])
    return {"x": x, "w": w, "y": y}
