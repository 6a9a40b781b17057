"""detach(): a new leaf sharing the data, with no op and no inputs. No gradient flows
through it, and a loop that detaches its running state keeps the graph from growing."""

import numpy as np

from grader.case import case


@case("needle", topic="detach", points=1)
def test_no_gradient_through_detach(lib):
    """y = detach(x * x) * x: x.grad is x * x, as if the first factor were a constant."""
    rng = np.random.default_rng(100)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    d = (x * x).detach()
    y = (d * x).sum()
    lib.backward(y)
    return {"x": x, "d": d, "y": y}


@case("needle", topic="detach", points=1)
def test_detached_is_a_leaf(lib):
    """The detached tensor has no op and no inputs; the original keeps both."""
    rng = np.random.default_rng(101)
    x = lib.tensor(rng.standard_normal((3,)), "x")
    y = (x * 2.0).exp()
    d = y.detach()
    return {
        "d": d,
        "d has an op": lib.has_op(d),
        "nodes d reaches": lib.count_nodes(d),
        "y has an op": lib.has_op(y),
        "nodes y reaches": lib.count_nodes(y),
    }


@case("needle", topic="detach", points=2, trace=False)
def test_accumulation_loop(lib):
    """3000 steps of acc = detach(acc + x): the graph of the result stays three nodes deep."""
    rng = np.random.default_rng(102)
    x = lib.tensor(rng.standard_normal((3,)) * 1e-3, "x")
    acc = lib.tensor(np.zeros(3), "acc0", requires_grad=False)
    for _ in range(3000):
        acc = (acc + x).detach()
    y = (acc * x).sum()
    lib.backward(y)
    return {"acc": acc, "x": x, "y": y, "nodes y reaches": lib.count_nodes(y)}


@case("needle", topic="detach", points=1)
def test_detach_mid_graph(lib):
    """Two paths from x, one of them detached: only the other carries a gradient."""
    rng = np.random.default_rng(103)
    x = lib.tensor(rng.standard_normal((2, 2)), "x")
    w = lib.tensor(rng.standard_normal((2, 2)), "w")
    h = (x @ w).tanh()
    y = (h * h.detach() + h.detach().exp() * x).sum()
    lib.backward(y)
    return {"x": x, "w": w, "h": h, "y": y}
