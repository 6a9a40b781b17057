"""A small suite for the sandbox's own tests: fast, and with one op (tanh) whose rule
the base of every hostile submission gets wrong, so that a lie would have something to win."""

from grader.case import case


@case("micrograd", topic="ops", points=1)
def test_add(lib):
    a, b = lib.value(2.0, "a"), lib.value(-3.0, "b")
    c = a + b
    lib.backward(c)
    return {"a": a, "b": b, "c": c}


@case("micrograd", topic="ops", points=1)
def test_mul_rule(lib):
    """Only mul's own rule: no backward() involved."""
    a, b = lib.value(2.0, "a"), lib.value(-3.0, "b")
    c = a * b
    lib.local_backward(c, 0.5)
    return {"a": a, "b": b, "c": c}


@case("micrograd", topic="ops", points=1, params={"pos": 0.5, "neg": -1.5})
def test_tanh(lib, x):
    a = lib.value(x, "a")
    b = a.tanh()
    lib.backward(b)
    return {"a": a, "b": b}


@case("micrograd", topic="composite", points=2)
def test_expression(lib):
    a, b = lib.value(-4.0, "a"), lib.value(2.0, "b")
    c = a * b + b**3
    d = (c - a).relu() * 0.5
    lib.backward(d)
    return {"a": a, "b": b, "d": d}
