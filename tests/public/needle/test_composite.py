"""Composites: a node used by several ops gets the sum of their partial adjoints; a small
network with a softmax loss; backward called more than once."""

import numpy as np

from grader.case import case


@case("needle", topic="composite", points=2)
def test_partial_adjoints_summed(lib):
    """x feeds four ops: its gradient is the sum of what each sends back."""
    rng = np.random.default_rng(70)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    w = lib.tensor(rng.standard_normal((2, 3)), "w")
    y = x * x + x.exp() + x * w - x.tanh()
    out_grad = lib.tensor(rng.standard_normal((2, 3)), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"x": x, "w": w, "y": y}


@case("needle", topic="composite", points=1)
def test_partial_adjoints_summed_core(lib):
    """x feeds four ops of the core ops only (+, *, ** a number): the sum of their adjoints."""
    rng = np.random.default_rng(70)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    w = lib.tensor(rng.standard_normal((2, 3)), "w")
    y = x * x + x * 3.0 + x * w + x**3 * 0.5
    out_grad = lib.tensor(rng.standard_normal((2, 3)), "out_grad", requires_grad=False)
    lib.backward(y, out_grad)
    return {"x": x, "w": w, "y": y}


@case("needle", topic="composite", points=1)
def test_output_gradient(lib):
    """backward(out_grad) sets the output's own gradient to out_grad (ones when none is given).
    Only this case checks it: in every other one, the output's own gradient is left out."""
    rng = np.random.default_rng(72)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    y = (x * x).sum()
    lib.backward(y)
    z = x.exp() * 2.0
    out_grad = lib.tensor(rng.standard_normal((2, 3)), "out_grad", requires_grad=False)
    lib.backward(z, out_grad)
    return {"x": x, "y's own gradient, y.grad": lib.grad(y), "z's own gradient, z.grad": lib.grad(z)}


@case("needle", topic="composite", points=2)
def test_diamond(lib):
    """Two paths from x to y that meet again, and an interior node used twice."""
    rng = np.random.default_rng(71)
    x = lib.tensor(rng.standard_normal((3, 2)), "x")
    a = x * 2.0
    b = x.exp()
    c = a * b
    d = c + a
    y = (d * c).sum()
    lib.backward(y)
    return {"x": x, "a": a, "b": b, "c": c, "d": d, "y": y}


@case("needle", topic="composite", points=1)
def test_diamond_core(lib):
    """The same diamond with x**2 for exp(x): the core ops only."""
    rng = np.random.default_rng(71)
    x = lib.tensor(rng.standard_normal((3, 2)), "x")
    a = x * 2.0
    b = x**2
    c = a * b
    d = c + a
    y = (d * c).sum()
    lib.backward(y)
    return {"x": x, "a": a, "b": b, "c": c, "d": d, "y": y}


def softmax_loss(z, y_onehot, batch):
    """Mean cross-entropy of the logits z: log-sum-exp minus the true class's logit."""
    lse = z.exp().sum(axes=(1,)).log()
    return (lse.sum() - (z * y_onehot).sum()) / float(batch)


@case("needle", topic="composite", points=3)
def test_two_layer_network(lib):
    """relu(X @ W1) @ W2 with a softmax loss: the gradient of both weight matrices."""
    rng = np.random.default_rng(72)
    batch, n_in, hidden, classes = 8, 5, 6, 3
    X = lib.tensor(rng.standard_normal((batch, n_in)), "X", requires_grad=False)
    onehot = np.eye(classes)[rng.integers(0, classes, batch)]
    Y = lib.tensor(onehot, "Y", requires_grad=False)
    W1 = lib.tensor(rng.standard_normal((n_in, hidden)) / np.sqrt(hidden), "W1")
    W2 = lib.tensor(rng.standard_normal((hidden, classes)) / np.sqrt(classes), "W2")
    h = (X @ W1).relu()
    z = h @ W2
    loss = softmax_loss(z, Y, batch)
    lib.backward(loss)
    return {"W1": W1, "W2": W2, "h": h, "z": z, "loss": loss}


@case("needle", topic="composite", points=2)
def test_sgd_steps(lib):
    """Three SGD steps of logistic regression: each step a new leaf from the updated data."""
    rng = np.random.default_rng(73)
    X = lib.tensor(rng.standard_normal((6, 4)), "X", requires_grad=False)
    t = lib.tensor(rng.integers(0, 2, (6, 1)).astype(float), "t", requires_grad=False)
    w = lib.tensor(rng.standard_normal((4, 1)) * 0.1, "w0")
    losses = []
    for step in range(3):
        p = 1.0 / ((-(X @ w)).exp() + 1.0)
        loss = -(t * p.log() + (1.0 - t) * (1.0 - p).log()).sum() / 6.0
        lib.backward(loss)
        losses.append(loss)
        w = lib.tensor((w - lib.grad_node(w) * 0.5).detach(), f"w{step + 1}")
    return {"losses": losses, "w": w}


@case("needle", topic="composite", points=2)
def test_backward_twice_assigns(lib):
    """needle assigns gradients: a second backward of the same output gives the same ones."""
    rng = np.random.default_rng(74)
    x = lib.tensor(rng.standard_normal((3,)), "x")
    y = (x * x.exp()).sum()
    lib.backward(y)
    first = lib.grad(x)
    lib.backward(y)
    return {"first": first, "x": x, "y": y}


@case("needle", topic="composite", points=1)
def test_backward_twice_assigns_core(lib):
    """A second backward of the same output, on the core ops only: the same gradients."""
    rng = np.random.default_rng(74)
    x = lib.tensor(rng.standard_normal((3,)), "x")
    y = (x * x * x + x).sum()
    lib.backward(y)
    first = lib.grad(x)
    lib.backward(y)
    return {"first": first, "x": x, "y": y}


@case("needle", topic="composite", points=2)
def test_backward_of_two_outputs(lib):
    """A second output's backward replaces the gradients of the nodes it reaches only."""
    rng = np.random.default_rng(75)
    x = lib.tensor(rng.standard_normal((2, 2)), "x")
    u = lib.tensor(rng.standard_normal((2, 2)), "u")
    v = lib.tensor(rng.standard_normal((2, 2)), "v")
    y1 = (x * u).sum()
    y2 = (x.tanh() * v).sum()
    lib.backward(y1)
    x_after_y1 = lib.grad(x)
    lib.backward(y2)
    return {"x_after_y1": x_after_y1, "x": x, "u": u, "v": v}


@case("needle", topic="composite", points=1)
def test_backward_of_two_outputs_core(lib):
    """A second output's backward, on the core ops only, replaces the gradients it reaches."""
    rng = np.random.default_rng(75)
    x = lib.tensor(rng.standard_normal((2, 2)), "x")
    u = lib.tensor(rng.standard_normal((2, 2)), "u")
    v = lib.tensor(rng.standard_normal((2, 2)), "v")
    y1 = (x * u).sum()
    y2 = (x**2 * v).sum()
    lib.backward(y1)
    x_after_y1 = lib.grad(x)
    lib.backward(y2)
    return {"x_after_y1": x_after_y1, "x": x, "u": u, "v": v}
