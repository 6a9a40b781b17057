"""Gradients add up: a node used several times gets the sum of every use's contribution.

Also what happens when backward() runs twice on one graph (as PyTorch with
retain_graph=True: the leaves' gradients double, the interior ones are recomputed, not
counted twice), and Module.zero_grad()."""

from grader.case import case


@case("micrograd", topic="accumulation", points=1)
def test_add_twice(lib):
    """b = a + a; c = b + b: a.grad is 4."""
    a = lib.value(3.0, "a")
    b = a + a
    c = b + b
    lib.backward(c)
    return {"a": a, "b": b, "c": c}


@case("micrograd", topic="accumulation", points=1)
def test_mul_self(lib):
    """y = a * a * a: the same node on both sides of a mul."""
    a = lib.value(-1.5, "a")
    b = a * a
    y = b * a
    lib.backward(y)
    return {"a": a, "b": b, "y": y}


@case("micrograd", topic="accumulation", points=2)
def test_leaf_on_many_paths(lib):
    """a feeds seven different ops."""
    a, b = lib.value(0.8, "a"), lib.value(-1.3, "b")
    y = a * b + a.exp() + a**2 - a / b + a.tanh() * a + (3 - a).relu() + a.sigmoid()
    lib.backward(y)
    return {"a": a, "b": b, "y": y}


@case("micrograd", topic="accumulation", points=1)
def test_leaf_on_many_paths_core(lib):
    """The same with the core ops only (+, *, ** a number): a feeds seven different ops."""
    a, b = lib.value(0.8, "a"), lib.value(-1.3, "b")
    y = a * b + a**2 + 3 * a + (a + b) * a + a**-1 * b + 2 + a
    lib.backward(y)
    return {"a": a, "b": b, "y": y}


@case("micrograd", topic="accumulation", points=1)
def test_leaf_used_fifty_times(lib):
    """s = a + 1a + 2a + ... + 49a."""
    a = lib.value(0.1, "a")
    s = a
    for k in range(1, 50):
        s = s + a * k
    lib.backward(s)
    return {"a": a, "s": s}


@case("micrograd", topic="accumulation", points=2)
def test_reverse_topological_order(lib):
    """y <- y + tanh(0.9 y), 12 times: every node reaches the output along a short and a long
    path, so a node's rule may run only after all the rules of the nodes that use it."""
    x = lib.value(0.3, "x")
    y = x
    for _ in range(12):
        y = y + (y * 0.9).tanh()
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="accumulation", points=1)
def test_reverse_topological_order_core(lib):
    """y <- y + 0.1 (0.9 y)**2, 12 times: the same order, with the core ops only."""
    x = lib.value(0.3, "x")
    y = x
    for _ in range(12):
        y = y + (y * 0.9) ** 2 * 0.1
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="accumulation", points=2)
def test_backward_twice(lib):
    """Two backward() calls: leaf gradients double, interior ones are the same each time."""
    a, b = lib.value(1.5, "a"), lib.value(-0.5, "b")
    c = a * b
    d = c + a
    y = d.tanh() + c
    lib.backward(y)
    first = {"a.grad after one backward": lib.grad(a), "c.grad after one backward": lib.grad(c)}
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "d": d, "y": y, **first}


@case("micrograd", topic="accumulation", points=1)
def test_backward_twice_core(lib):
    """Two backward() calls on a graph of the core ops only: leaves double, interiors do not."""
    a, b = lib.value(1.5, "a"), lib.value(-0.5, "b")
    c = a * b
    d = c + a
    y = d * d + c
    lib.backward(y)
    first = {"a.grad after one backward": lib.grad(a), "c.grad after one backward": lib.grad(c)}
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "d": d, "y": y, **first}


@case("micrograd", topic="accumulation", points=2)
def test_zero_grad(lib):
    """model.zero_grad() resets every parameter; the next backward starts from zero."""
    model = lib.mlp(2, [3, 1], seed=4)
    params = model.parameters()
    loss = (model([1.0, -2.0]) + -1.0) ** 2
    lib.backward(loss)
    model.zero_grad()
    cleared = {f"p{i}.grad after zero_grad": lib.grad(p) for i, p in enumerate(params)}
    loss2 = (model([0.5, 0.25]) + 0.5) ** 2
    lib.backward(loss2)
    return {**cleared, "loss2": loss2, "params": params}
