"""Hidden: whole expressions, including micrograd's own two at other inputs."""

from grader.case import case


@case("micrograd", topic="composite", points=2)
def test_hidden_sanity_check_positive(lib):
    """micrograd's test_sanity_check at x = 3: the relus now pass their input on."""
    x = lib.value(3.0, "x")
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    lib.backward(y)
    return {"x": x, "z": z, "q": q, "h": h, "y": y}


@case("micrograd", topic="composite", points=3)
def test_hidden_more_ops_other_inputs(lib):
    """micrograd's test_more_ops at a = 1.5, b = -2.5."""
    a = lib.value(1.5, "a")
    b = lib.value(-2.5, "b")
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
def test_hidden_logsumexp(lib):
    """log(e**a + e**b + e**c) and the softmax probability of b."""
    a, b, c = lib.value(1.0, "a"), lib.value(-0.5, "b"), lib.value(2.2, "c")
    s = a.exp() + b.exp() + c.exp()
    lse = s.log()
    p = b.exp() / s
    y = lse + p
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "s": s, "lse": lse, "p": p, "y": y}


@case("micrograd", topic="composite", points=2)
def test_hidden_log_sigmoid_loss(lib):
    """Logistic loss -log(sigmoid(w*x + b)) - log(1 - sigmoid(w*x2 + b))."""
    w, b = lib.value(0.8, "w"), lib.value(-0.3, "b")
    p1 = (w * 1.5 + b).sigmoid()
    p2 = (w * -0.7 + b).sigmoid()
    loss = -p1.log() - (1 - p2).log()
    lib.backward(loss)
    return {"w": w, "b": b, "p1": p1, "p2": p2, "loss": loss}


@case("micrograd", topic="composite", points=2)
def test_hidden_rational(lib):
    """(a*b - c) / (a**2 + 1) + c**-1 - b**0.5."""
    a, b, c = lib.value(-1.2, "a"), lib.value(2.0, "b"), lib.value(0.9, "c")
    num = a * b - c
    den = a**2 + 1
    y = num / den + c**-1 - b**0.5
    lib.backward(y)
    return {"a": a, "b": b, "c": c, "num": num, "den": den, "y": y}


@case("micrograd", topic="composite", points=2)
def test_hidden_horner(lib):
    """A polynomial by Horner's rule, 1 + x(2 + x(-3 + x(0.5 + x))), and its tanh."""
    x = lib.value(0.7, "x")
    p = x
    for coeff in (0.5, -3.0, 2.0, 1.0):
        p = coeff + x * p
    y = p.tanh()
    lib.backward(y)
    return {"x": x, "p": p, "y": y}
