"""Hidden: accumulation, backward more than once, zero_grad, detach and deep graphs."""

from grader.assignments.micrograd.programs import paused_gc
from grader.case import case


@case("micrograd", topic="accumulation", points=1)
def test_hidden_triple_use(lib):
    """b = a * a; c = b + b + b; y = c * b."""
    a = lib.value(-0.7, "a")
    b = a * a
    c = b + b + b
    y = c * b
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "y": y}


@case("micrograd", topic="accumulation", points=2)
def test_hidden_backward_three_times(lib):
    """Three backward() calls: leaf gradients triple, interior ones stay the same."""
    a, b = lib.value(0.3, "a"), lib.value(2.0, "b")
    c = a.exp() * b
    d = c.tanh() + a * c
    lib.backward(d)
    once = {"a after one": lib.grad(a), "c after one": lib.grad(c)}
    lib.backward(d)
    twice = {"a after two": lib.grad(a), "c after two": lib.grad(c)}
    lib.backward(d)
    return {"a": a, "b": b, "c": c, "d": d, **once, **twice}


@case("micrograd", topic="accumulation", points=1)
def test_hidden_backward_three_times_core(lib):
    """Three backward() calls on a graph of the core ops only."""
    a, b = lib.value(0.3, "a"), lib.value(2.0, "b")
    c = a * a * b
    d = c * c + a * c
    lib.backward(d)
    once = {"a after one": lib.grad(a), "c after one": lib.grad(c)}
    lib.backward(d)
    twice = {"a after two": lib.grad(a), "c after two": lib.grad(c)}
    lib.backward(d)
    return {"a": a, "b": b, "c": c, "d": d, **once, **twice}


@case("micrograd", topic="accumulation", points=2)
def test_hidden_backward_from_two_outputs(lib):
    """backward() from y1, then from y2 sharing nodes with it: leaf gradients add up."""
    a, b = lib.value(1.2, "a"), lib.value(-0.4, "b")
    shared = a * b + a
    y1 = shared.tanh()
    y2 = shared * shared + b
    lib.backward(y1)
    first = {"a after y1": lib.grad(a), "b after y1": lib.grad(b)}
    lib.backward(y2)
    return {"a": a, "b": b, "shared": shared, "y2": y2, **first}


@case("micrograd", topic="accumulation", points=1)
def test_hidden_backward_from_two_outputs_core(lib):
    """backward() from y1 = shared**3, then from y2: the core ops only."""
    a, b = lib.value(1.2, "a"), lib.value(-0.4, "b")
    shared = a * b + a
    y1 = shared**3
    y2 = shared * shared + b
    lib.backward(y1)
    first = {"a after y1": lib.grad(a), "b after y1": lib.grad(b)}
    lib.backward(y2)
    return {"a": a, "b": b, "shared": shared, "y2": y2, **first}


@case("micrograd", topic="accumulation", points=2)
def test_hidden_ladder(lib):
    """y <- y * sigmoid(y) + y, 10 times: short and long paths to every node."""
    x = lib.value(-0.6, "x")
    y = x
    for _ in range(10):
        y = y * y.sigmoid() + y
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="accumulation", points=1)
def test_hidden_ladder_core(lib):
    """y <- y * (0.2 y + 0.5) + y, 10 times: short and long paths, the core ops only."""
    x = lib.value(-0.6, "x")
    y = x
    for _ in range(10):
        y = y * (y * 0.2 + 0.5) + y
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="accumulation", points=2)
def test_hidden_zero_grad_between_steps(lib):
    """Two training steps of MLP(3, [2, 1]) with zero_grad before each backward."""
    model = lib.mlp(3, [2, 1], seed=11)
    params = model.parameters()
    lib.backward(model([0.5, -1.0, 2.0]) ** 2)
    model.zero_grad()
    lib.backward((model([1.0, 0.0, -0.5]) + -2.0) ** 2)
    first = {f"p{i} after step 2": lib.grad(p) for i, p in enumerate(params)}
    model.zero_grad()
    cleared = {f"p{i} after zero_grad": lib.grad(p) for i, p in enumerate(params)}
    return {**cleared, **first}


@case("micrograd", topic="detach", points=1)
def test_hidden_detach_twice(lib):
    """d = a.detach().detach(): still a leaf with a's data, still no gradient to a."""
    a = lib.value(-1.5, "a")
    d = a.detach().detach()
    y = d * a + d.exp()
    lib.backward(y)
    return {"a": a, "d": d, "y": y}


@case("micrograd", topic="detach", points=1)
def test_hidden_detach_normalizer(lib):
    """y = a / s.detach() with s = a + b: the normalizer is a constant for backward."""
    a, b = lib.value(2.0, "a"), lib.value(3.0, "b")
    s = a + b
    y = a / s.detach() + b * 0.1
    lib.backward(y)
    return {"a": a, "b": b, "s": s, "y": y}


@case("micrograd", topic="detach", points=1)
def test_hidden_detach_leaf_keeps_gradient(lib):
    """A detached node used twice collects its own gradient like any leaf."""
    x = lib.value(0.9, "x")
    t = (x * 2).tanh()
    u = t.detach()
    y = u * u + t
    lib.backward(y)
    return {"x": x, "t": t, "u": u, "y": y}


@case("micrograd", topic="deep", points=2, trace=False)
def test_hidden_deep_mixed_chain(lib):
    """6000 ops, y <- tanh(y * w) + 0.1: a deep chain through mul, tanh and add (six times as deep
    as a recursive sort survives)."""
    probe = lib.value(1.0, "probe")  # a 3000-deep chain first: a recursive sort fails fast
    for _ in range(3000):
        probe = probe * 1.0
    lib.backward(probe)
    x = lib.value(0.2, "x")
    w = lib.value(1.01, "w")
    with paused_gc():
        y = x
        for _ in range(2000):
            y = (y * w).tanh() + 0.1
        lib.backward(y)
    return {"x": x, "w": w, "y": y}


@case("micrograd", topic="deep", points=1, trace=False)
def test_hidden_deep_mixed_chain_core(lib):
    """6000 ops, y <- y * w * 0.5 + 0.1: a deep chain of the core ops only."""
    probe = lib.value(1.0, "probe")  # a 3000-deep chain first: a recursive sort fails fast
    for _ in range(3000):
        probe = probe * 1.0
    lib.backward(probe)
    x = lib.value(0.2, "x")
    w = lib.value(1.01, "w")
    with paused_gc():
        y = x
        for _ in range(2000):
            y = y * w * 0.5 + 0.1
        lib.backward(y)
    return {"x": x, "w": w, "y": y}
