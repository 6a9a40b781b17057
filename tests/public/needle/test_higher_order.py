"""Higher-order gradients: a gradient is a Tensor built from needle ops, so it has a graph and
backward can run through it. Checked against torch.autograd.grad(create_graph=True).

Each case runs backward once, takes x.grad as a node, builds a new output from it and runs
backward again: the leaves' gradients are then second derivatives."""

import numpy as np

from grader.case import case


@case("needle", topic="higher-order", points=2)
def test_power_second_derivative(lib):
    """y = sum(x**3): x.grad = 3x**2; backward of sum(x.grad * v) gives 6x * v."""
    rng = np.random.default_rng(90)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    v = lib.tensor(rng.standard_normal((2, 3)), "v", requires_grad=False)
    y = (x**3).sum()
    lib.backward(y)
    g = lib.grad_node(x)
    z = (g * v).sum()
    lib.backward(z)
    return {"x": x, "g": g, "z": z}


@case("needle", topic="higher-order", points=2)
def test_gradient_norm(lib):
    """The squared norm of a gradient, differentiated: tanh and exp of a product."""
    rng = np.random.default_rng(91)
    x = lib.tensor(rng.standard_normal((3,)), "x")
    w = lib.tensor(rng.standard_normal((3,)), "w")
    y = ((x * w).tanh() * x.exp()).sum()
    lib.backward(y)
    gx = lib.grad_node(x)
    z = (gx * gx).sum()
    lib.backward(z)
    return {"x": x, "w": w, "gx": gx, "z": z}


@case("needle", topic="higher-order", points=1)
def test_gradient_norm_core(lib):
    """The squared norm of a gradient, differentiated, on the core ops only."""
    rng = np.random.default_rng(91)
    x = lib.tensor(rng.standard_normal((3,)), "x")
    w = lib.tensor(rng.standard_normal((3,)), "w")
    y = ((x * w) ** 2 * x).sum()
    lib.backward(y)
    gx = lib.grad_node(x)
    z = (gx * gx).sum()
    lib.backward(z)
    return {"x": x, "w": w, "gx": gx, "z": z}


@case("needle", topic="higher-order", points=2)
def test_matmul_second_order(lib):
    """Through a matmul, a broadcast bias and a summation of each row (inside the graph, so
    that its gradient is differentiated too): the gradient of W, squared."""
    rng = np.random.default_rng(92)
    X = lib.tensor(rng.standard_normal((4, 3)), "X")
    W = lib.tensor(rng.standard_normal((3, 2)), "W")
    b = lib.tensor(rng.standard_normal((2,)), "b")
    h = (X @ W + b.reshape((1, 2)).broadcast_to((4, 2))).tanh()
    y = (h * h.sum(axes=(1,)).reshape((4, 1)).broadcast_to((4, 2))).sum()
    lib.backward(y)
    gW = lib.grad_node(W)
    z = (gW * gW).sum()
    lib.backward(z)
    return {"X": X, "W": W, "b": b, "gW": gW, "z": z}


@case("needle", topic="higher-order", points=1)
def test_matmul_second_order_core(lib):
    """Through a matmul and a power: the gradient of W, squared (core ops only)."""
    rng = np.random.default_rng(92)
    X = lib.tensor(rng.standard_normal((4, 3)), "X")
    W = lib.tensor(rng.standard_normal((3, 2)), "W")
    y = ((X @ W) ** 3).sum()
    lib.backward(y)
    gW = lib.grad_node(W)
    z = (gW * gW).sum()
    lib.backward(z)
    return {"X": X, "W": W, "gW": gW, "z": z}


@case("needle", topic="higher-order", points=2)
def test_division_and_log(lib):
    """Second derivatives through divide, log and a power of a tensor."""
    rng = np.random.default_rng(93)
    a = lib.tensor(rng.uniform(0.5, 2.0, (2, 2)), "a")
    b = lib.tensor(rng.uniform(0.5, 2.0, (2, 2)), "b")
    y = (a.log() / b + a**b).sum()
    lib.backward(y)
    ga = lib.grad_node(a)
    z = (ga * b).sum()
    lib.backward(z)
    return {"a": a, "b": b, "ga": ga, "z": z}


@case("needle", topic="higher-order", points=1)
def test_division_and_log_core(lib):
    """Second derivatives through a**-1 and products of two inputs (core ops only)."""
    rng = np.random.default_rng(93)
    a = lib.tensor(rng.uniform(0.5, 2.0, (2, 2)), "a")
    b = lib.tensor(rng.uniform(0.5, 2.0, (2, 2)), "b")
    y = (a**-1 * b + a * a * b).sum()
    lib.backward(y)
    ga = lib.grad_node(a)
    z = (ga * b).sum()
    lib.backward(z)
    return {"a": a, "b": b, "ga": ga, "z": z}


@case("needle", topic="higher-order", points=2)
def test_hessian_vector_product(lib):
    """H v for y = sum(relu(x) * x * x + tanh(x)): the gradient dotted with v, differentiated."""
    rng = np.random.default_rng(94)
    x = lib.tensor(rng.standard_normal((5,)), "x")
    v = lib.tensor(rng.standard_normal((5,)), "v", requires_grad=False)
    y = (x.relu() * x * x + x.tanh()).sum()
    lib.backward(y)
    g = lib.grad_node(x)
    lib.backward((g * v).sum())
    return {"x": x, "g": g}


@case("needle", topic="higher-order", points=1)
def test_hessian_vector_product_core(lib):
    """H v for y = sum(x * x * x + 0.5 x**2): the core ops only."""
    rng = np.random.default_rng(94)
    x = lib.tensor(rng.standard_normal((5,)), "x")
    v = lib.tensor(rng.standard_normal((5,)), "v", requires_grad=False)
    y = (x * x * x + x**2 * 0.5).sum()
    lib.backward(y)
    g = lib.grad_node(x)
    lib.backward((g * v).sum())
    return {"x": x, "g": g}
