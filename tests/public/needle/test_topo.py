"""find_topo_sort: post-order depth-first, each node after all of its inputs, in the order
needle's own tests expect. The order is compared as positions of the case's nodes."""

import numpy as np

from grader.case import case


def leaves(lib, seed, *shapes):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.standard_normal(s), "abcdefgh"[i]) for i, s in enumerate(shapes)]


@case("needle", topic="topo", points=1)
def test_topo_chain(lib):
    """A chain: inputs first, in the order the ops name them."""
    a, b = leaves(lib, 80, (2, 3), (2, 3))
    y = ((a + b) * a).exp().sum()
    return {"topological order": lib.topo_order(y)}


@case("needle", topic="topo", points=1)
def test_topo_diamond(lib):
    """Shared nodes appear once, at their first visit's end."""
    a, b, c = leaves(lib, 81, (3,), (3,), (3,))
    d = a * b
    e = d + c
    f = d * e
    y = (f + a).sum()
    return {"topological order": lib.topo_order(y)}


@case("needle", topic="topo", points=1)
def test_topo_same_input_twice(lib):
    """x * x visits x once."""
    (x,) = leaves(lib, 82, (2,))
    y = (x * x) @ x.reshape((2, 1))
    return {"topological order": lib.topo_order(y)}


@case("needle", topic="topo", points=1)
def test_topo_several_outputs(lib):
    """find_topo_sort of several nodes: one DFS after the other, sharing what was visited."""
    a, b, c = leaves(lib, 83, (2, 2), (2, 2), (2, 2))
    y1 = (a @ b).relu()
    y2 = (b + c) * y1
    y3 = c.exp()
    return {"topological order": lib.topo_order([y3, y2, y1])}


@case("needle", topic="topo", points=2, trace=False)
def test_deep_chain(lib):
    """A chain of 3000 ops: deeper than Python's recursion limit."""
    (x,) = leaves(lib, 84, (3,))
    y = x
    for i in range(3000):
        y = y + x if i % 10 == 0 else y * 0.999
    out = y.sum()
    order = lib.topo_order(out)
    lib.backward(out)
    return {"topological order": order, "x": x, "out": out}


@case("needle", topic="topo", points=1, trace=False)
def test_chain_of_a_hundred_thousand(lib):
    """A chain of 10**5 ops (core ops only), a hundred times deeper than a recursive sort survives."""
    # First a 3000-deep chain: a missing or recursive find_topo_sort fails here in a moment,
    # rather than after all the nodes have been built.
    probe = leaves(lib, 86, (3,))[0]
    for _ in range(3000):
        probe = probe * 1.0
    lib.backward(probe.sum())
    (x,) = leaves(lib, 85, (3,))
    y = x
    for i in range(10**5):
        y = y + x if i % 10 == 0 else y * 0.999
    out = y.sum()
    lib.backward(out)
    return {"x": x, "out": out}
