"""Deep graphs: backward() must not recurse once per node (Python stops at ~1000 frames).

Build the topological order with a loop and an explicit stack."""

from grader.assignments.micrograd.programs import paused_gc
from grader.case import case


@case("micrograd", topic="deep", points=1)
def test_chain_5000(lib):
    """y = tanh(...tanh(x * 0.5)...): 5000 ops, already too deep for a recursive sort."""
    x = lib.value(0.8, "x")
    y = x * 0.5
    for _ in range(4999):
        y = y.tanh()
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="deep", points=1)
def test_chain_5000_core(lib):
    """y <- y * 0.999 + 0.001, 2500 times: 5000 ops of the core ops only."""
    x = lib.value(0.8, "x")
    y = x * 0.5
    for _ in range(2500):
        y = y * 0.999 + 0.001
    lib.backward(y)
    return {"x": x, "y": y}


@case("micrograd", topic="deep", points=2, trace=False)
def test_chain_of_a_hundred_thousand(lib):
    """y = (...((x * 1.5) ** 1) ** 1 ...) ** 1: a chain of 10**5 ops (core ops only), a hundred
    times deeper than a recursive sort survives."""
    # First a 3000-deep chain: a missing or recursive backward() fails here in a moment,
    # rather than after all the nodes have been built.
    probe = lib.value(1.0, "probe")
    for _ in range(3000):
        probe = probe * 1.0
    lib.backward(probe)
    x = lib.value(0.5, "x")
    with paused_gc():
        y = lib.repeat(x * 1.5, "pow", 1, times=10**5 - 1)  # y = y**1, 99999 times
        lib.backward(y)
    return {"x": x, "y": y}
