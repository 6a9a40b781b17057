"""Hidden: composites, topological order, higher-order gradients, detach and lazy mode."""

import numpy as np

from grader.case import case


def leaves(lib, seed, *shapes, dtype="float64"):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s), "abcdefgh"[i], dtype=dtype) for i, s in enumerate(shapes)]


@case("needle", topic="composite", points=2)
def test_hidden_shared_weights(lib):
    """One weight matrix used by two layers, and an input that feeds three ops."""
    x, w = leaves(lib, 3010, (3, 3), (3, 3))
    h1 = (x @ w).tanh()
    h2 = (h1 @ w + x).relu()
    y = (h2 * x).sum() + (h1 * h1).sum()
    lib.backward(y)
    return {"x": x, "w": w, "h1": h1, "h2": h2}


@case("needle", topic="composite", points=2)
def test_hidden_network_float32(lib):
    """A two-layer network with a softmax loss, in float32."""
    rng = np.random.default_rng(3011)
    X = lib.tensor(rng.standard_normal((10, 6)), "X", dtype="float32", requires_grad=False)
    Y = lib.tensor(np.eye(4)[rng.integers(0, 4, 10)], "Y", dtype="float32", requires_grad=False)
    W1 = lib.tensor(rng.standard_normal((6, 5)) / 3.0, "W1", dtype="float32")
    b1 = lib.tensor(rng.standard_normal((5,)) / 3.0, "b1", dtype="float32")
    W2 = lib.tensor(rng.standard_normal((5, 4)) / 3.0, "W2", dtype="float32")
    h = (X @ W1 + b1.reshape((1, 5)).broadcast_to((10, 5))).relu()
    z = h @ W2
    loss = (z.exp().sum(axes=(1,)).log().sum() - (z * Y).sum()) / 10.0
    lib.backward(loss)
    return {"W1": W1, "b1": b1, "W2": W2, "loss": loss}


@case("needle", topic="topo", points=1)
def test_hidden_topo_wide(lib):
    """Many nodes on one level, all reaching the output."""
    xs = leaves(lib, 3020, (2,), (2,), (2,), (2,), (2,))
    total = xs[0]
    for x in xs[1:]:
        total = total + x * xs[0]
    y = total.exp().sum()
    return {"topological order": lib.topo_order(y)}


@case("needle", topic="topo", points=1)
def test_hidden_topo_output_reused(lib):
    """A sort from an interior node and from the output, together."""
    a, b = leaves(lib, 3021, (2, 2), (2, 2))
    c = a @ b
    d = (c + a).tanh()
    e = d * c
    return {"topological order": lib.topo_order([c, e]), "topological order from d": lib.topo_order(d)}


@case("needle", topic="topo", points=2, trace=False)
def test_hidden_deep_backward(lib):
    """Backward through a chain of 3000 ops (Python's recursion limit is 1000)."""
    (x,) = leaves(lib, 3022, (2, 2))
    y = x
    for _ in range(1500):
        y = (y * 0.999).tanh()
    out = y.sum()
    lib.backward(out)
    return {"x": x, "y": y}


@case("needle", topic="topo", points=1, trace=False)
def test_hidden_deep_backward_core(lib):
    """Backward through a chain of 3000 core ops: y <- y * 0.999 + 0.001."""
    (x,) = leaves(lib, 3022, (2, 2))
    y = x
    for _ in range(1500):
        y = y * 0.999 + 0.001
    out = y.sum()
    lib.backward(out)
    return {"x": x, "y": y}


@case("needle", topic="higher-order", points=2)
def test_hidden_third_order(lib):
    """Three backward passes: d3/dx3 of sum(x**4) along v."""
    (x,) = leaves(lib, 3030, (3,))
    v = lib.tensor(np.array([0.5, -1.0, 2.0]), "v", requires_grad=False)
    lib.backward((x**4).sum())
    g1 = lib.grad_node(x)
    lib.backward((g1 * v).sum())
    g2 = lib.grad_node(x)
    lib.backward((g2 * v).sum())
    return {"x": x, "g1": g1, "g2": g2}


@case("needle", topic="higher-order", points=2)
def test_hidden_softmax_second_order(lib):
    """The squared gradient of a softmax loss with respect to the logits."""
    rng = np.random.default_rng(3031)
    z = lib.tensor(rng.standard_normal((2, 3)), "z")
    Y = lib.tensor(np.eye(3)[[0, 2]], "Y", requires_grad=False)
    loss = (z.exp().sum(axes=(1,)).log().sum() - (z * Y).sum()) / 2.0
    lib.backward(loss)
    g = lib.grad_node(z)
    lib.backward((g * g).sum())
    return {"z": z, "g": g}


@case("needle", topic="higher-order", points=1)
def test_hidden_softmax_second_order_core(lib):
    """The squared gradient of a cubic loss with respect to the logits (core ops only)."""
    rng = np.random.default_rng(3031)
    z = lib.tensor(rng.standard_normal((2, 3)), "z")
    Y = lib.tensor(np.eye(3)[[0, 2]], "Y", requires_grad=False)
    loss = (z * z * Y).sum() + (z**3).sum() * 0.1
    lib.backward(loss)
    g = lib.grad_node(z)
    lib.backward((g * g).sum())
    return {"z": z, "g": g}


@case("needle", topic="higher-order", points=2)
def test_hidden_mixed_partials(lib):
    """The gradient with respect to one input, differentiated with respect to another."""
    a, b = leaves(lib, 3032, (2, 3), (3, 2))
    y = ((a @ b).exp() / 4.0).sum()
    lib.backward(y)
    ga = lib.grad_node(a)
    lib.backward((ga * a).sum())
    return {"a": a, "b": b, "ga": ga}


@case("needle", topic="higher-order", points=1)
def test_hidden_mixed_partials_core(lib):
    """The gradient with respect to one input, differentiated with respect to another (core ops)."""
    a, b = leaves(lib, 3032, (2, 3), (3, 2))
    y = ((a @ b) ** 2 * 0.25).sum()
    lib.backward(y)
    ga = lib.grad_node(a)
    lib.backward((ga * a).sum())
    return {"a": a, "b": b, "ga": ga}


@case("needle", topic="detach", points=1)
def test_hidden_detach_target(lib):
    """A target computed from the prediction and detached: only the prediction's path counts."""
    x, w = leaves(lib, 3040, (4, 3), (3, 1))
    pred = x @ w
    target = (pred * 0.5 + 1.0).detach()
    y = ((pred - target) ** 2).sum()
    lib.backward(y)
    return {"x": x, "w": w, "target": target, "target has an op": lib.has_op(target)}


@case("needle", topic="detach", points=2, trace=False)
def test_hidden_moving_average(lib):
    """3000 steps of an exponential moving average, detached each step: a small graph."""
    (x,) = leaves(lib, 3041, (2, 2))
    avg = lib.tensor(np.zeros((2, 2)), "avg0", requires_grad=False)
    for _ in range(3000):
        avg = (avg * 0.99 + x).detach()
    y = (avg * x).sum()
    lib.backward(y)
    return {"avg": avg, "x": x, "nodes y reaches": lib.count_nodes(y), "topological order": lib.topo_order(y)}


@case("needle", topic="lazy", points=1)
def test_hidden_lazy_partial_realize(lib):
    """Realizing one branch computes that branch only."""
    a, b = leaves(lib, 3050, (2, 3), (2, 3))
    with lib.lazy():
        s = a + b
        left = s.exp()
        right = (s * b).sum(axes=(1,))
        top = left.sum(axes=(1,)) + right
        lib.realize(right)
        flags = {
            name: lib.computed(n) for name, n in [("s", s), ("left", left), ("right", right), ("top", top)]
        }
    return {**{f"computed {k}": v for k, v in flags.items()}, "top": top}


@case("needle", topic="lazy", points=2)
def test_hidden_lazy_higher_order(lib):
    """A second-order gradient with the graph built lazily: same as eager."""
    (x,) = leaves(lib, 3051, (3,))
    with lib.lazy():
        y = (x.tanh() * x).sum()
        lib.backward(y)
    g = lib.grad_node(x)
    lib.backward((g * g).sum())
    return {"x": x, "y": y}


@case("needle", topic="lazy", points=1)
def test_hidden_lazy_higher_order_core(lib):
    """A second-order gradient of a graph built lazily from the core ops: same as eager."""
    (x,) = leaves(lib, 3051, (3,))
    with lib.lazy():
        y = (x * x * x).sum()
        lib.backward(y)
    g = lib.grad_node(x)
    lib.backward((g * g).sum())
    return {"x": x, "y": y}
