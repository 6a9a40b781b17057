"""Whole expressions: micrograd's own two tests (karpathy/micrograd, test/test_engine.py),
and a neuron. Every returned node's value and gradient is compared with PyTorch's."""

from grader.case import case


@case("micrograd", topic="composite", points=1)
def test_output_gradient(lib):
    """backward() seeds the output's own gradient with 1. Only this case checks it: in every
    other one, the output's own gradient is left out."""
    x = lib.value(1.5, "x")
    y = x * x + x
    lib.backward(y)
    return {"x": x, "y's own gradient, y.grad": lib.grad(y)}


@case("micrograd", topic="composite", points=2)
def test_sanity_check(lib):
    """micrograd's test_sanity_check: x used on many paths, relu on both sides of 0."""
    x = lib.value(-4.0, "x")
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    lib.backward(y)
    return {"x": x, "z": z, "q": q, "h": h, "y": y}


@case("micrograd", topic="composite", points=3)
def test_more_ops(lib):
    """micrograd's test_more_ops: every operator, numbers on both sides, nodes reused."""
    a = lib.value(-4.0, "a")
    b = lib.value(2.0, "b")
    c = a + b
    d = a * b + b**3
    c += c + 1
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    lib.backward(g)
    return {"a": a, "b": b, "c": c, "d": d, "e": e, "f": f, "g": g}


@case("micrograd", topic="composite", points=2)
def test_neuron(lib):
    """o = tanh(x1*w1 + x2*w2 + b), the neuron of micrograd's lecture."""
    x1, x2 = lib.value(2.0, "x1"), lib.value(0.0, "x2")
    w1, w2 = lib.value(-3.0, "w1"), lib.value(1.0, "w2")
    b = lib.value(6.8813735870195432, "b")
    n = x1 * w1 + x2 * w2 + b
    o = n.tanh()
    lib.backward(o)
    return {"x1": x1, "x2": x2, "w1": w1, "w2": w2, "b": b, "n": n, "o": o}


@case("micrograd", topic="composite", points=2)
def test_tanh_from_exp(lib):
    """The same neuron with tanh written out: (e**2n - 1) / (e**2n + 1)."""
    x1, x2 = lib.value(2.0, "x1"), lib.value(0.0, "x2")
    w1, w2 = lib.value(-3.0, "w1"), lib.value(1.0, "w2")
    b = lib.value(6.8813735870195432, "b")
    n = x1 * w1 + x2 * w2 + b
    e = (2 * n).exp()
    o = (e - 1) / (e + 1)
    lib.backward(o)
    return {"x1": x1, "w1": w1, "b": b, "n": n, "e": e, "o": o}
