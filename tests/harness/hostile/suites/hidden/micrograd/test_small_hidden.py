"""The hidden half of the sandbox tests' small suite."""

from grader.case import case


@case("micrograd", topic="hidden ops", points=1)
def test_sub_div(lib):
    a, b = lib.value(3.0, "a"), lib.value(0.5, "b")
    c = (a - b) / b
    lib.backward(c)
    return {"a": a, "b": b, "c": c}


@case("micrograd", topic="hidden ops", points=1)
def test_tanh_chain(lib):
    a = lib.value(0.3, "a")
    b = (a * 2.0).tanh()
    lib.backward(b)
    return {"a": a, "b": b}
