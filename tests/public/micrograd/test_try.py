from grader.cases import case

@case("micrograd", topic="ops", points=1, params={"pos": (2.0, -3.0), "zero": (0.0, 5.0)})
def test_mul(lib, p):
    a, b = lib.value(p[0], "a"), lib.value(p[1], "b")
    c = a * b
    d = c.tanh()
    lib.backward(d)
    return {"a": a, "b": b, "c": c, "d": d}

@case("micrograd", topic="composite", points=2)
def test_more_ops(lib):
    a = lib.value(-4.0, "a"); b = lib.value(2.0, "b")
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
    return {"a": a, "b": b, "g": g}

@case("micrograd", topic="ops", points=1)
def test_mul_rule(lib):
    a, b = lib.value(2.0, "a"), lib.value(-3.0, "b")
    c = a * b
    lib.local_backward(c, 0.5)
    return {"a": a, "b": b, "c": c}
