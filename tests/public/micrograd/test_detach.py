"""detach(): a new leaf with the same number; no gradient flows through it to its source."""

from grader.case import case


@case("micrograd", topic="detach", points=1)
def test_detach_is_a_new_leaf(lib):
    """d = a.detach(): same data, its own gradient, and none of it reaches a."""
    a = lib.value(2.5, "a")
    d = a.detach()
    y = d * 3 + a
    lib.backward(y)
    return {"a": a, "d": d, "y": y}


@case("micrograd", topic="detach", points=1)
def test_detach_stops_gradient(lib):
    """y = c * a + b with c = (a * a).detach(): a gets the gradient from b's path only."""
    a = lib.value(1.5, "a")
    b = a * a
    c = b.detach()
    y = c * a + b
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "y": y}


@case("micrograd", topic="detach", points=1)
def test_detach_in_a_chain(lib):
    """x -> tanh -> detach -> exp, times x: only the direct path reaches x."""
    x = lib.value(-0.4, "x")
    t = x.tanh()
    u = t.detach()
    y = u.exp() * x
    lib.backward(y)
    return {"x": x, "t": t, "u": u, "y": y}
