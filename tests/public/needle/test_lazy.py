"""Lazy mode: with needle.autograd.LAZY_MODE on, an op builds its node without computing it;
the data is computed when asked for (realize_cached_data, numpy), and equals eager mode's."""

import numpy as np

from grader.case import case


@case("needle", topic="lazy", points=1)
def test_nothing_computed_until_asked(lib):
    """Built lazily, nothing is computed; realizing y computes y and what it was made from."""
    rng = np.random.default_rng(110)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    w = lib.tensor(rng.standard_normal((3, 2)), "w")
    with lib.lazy():
        h = x @ w
        y = (h * 2.0).exp()
        other = h.tanh()
        before = {"x": lib.computed(x), "h": lib.computed(h), "y": lib.computed(y)}
        lib.realize(y)
        after = {"h": lib.computed(h), "y": lib.computed(y), "other": lib.computed(other)}
    return {
        **{f"computed {k} before": v for k, v in before.items()},
        **{f"computed {k} after": v for k, v in after.items()},
    }


@case("needle", topic="lazy", points=1)
def test_lazy_equals_eager(lib):
    """The same expression, built eagerly and lazily: equal values."""
    rng = np.random.default_rng(111)
    x = lib.tensor(rng.standard_normal((3, 4)), "x")
    b = lib.tensor(rng.standard_normal((4,)), "b")

    def f():
        z = x + b.reshape((1, 4)).broadcast_to((3, 4))
        return (z.relu() * z.tanh()).sum(axes=(0,)) / 3.0

    eager = f()
    with lib.lazy():
        lazy = f()
        computed_before = lib.computed(lazy)
        value = lib.numpy(lazy)
        computed_after = lib.computed(lazy)
    return {
        "eager": eager,
        "lazy": value,
        "computed before numpy()": computed_before,
        "computed after numpy()": computed_after,
    }


@case("needle", topic="lazy", points=1)
def test_lazy_constants_stay_ops(lib):
    """Lazily, even a result that needs no gradient keeps its op until computed."""
    rng = np.random.default_rng(112)
    c = lib.tensor(rng.standard_normal((2,)), "c", requires_grad=False)
    with lib.lazy():
        d = c * 3.0
        result = {"computed d": lib.computed(d), "d has an op": lib.has_op(d)}
    return {**result, "d": d}


@case("needle", topic="lazy", points=2)
def test_lazy_backward(lib):
    """Backward on a lazily built graph gives the same gradients as on an eager one."""
    rng = np.random.default_rng(113)
    x = lib.tensor(rng.standard_normal((2, 3)), "x")
    w = lib.tensor(rng.standard_normal((3, 3)), "w")
    with lib.lazy():
        y = ((x @ w).tanh() * x).sum()
        lib.backward(y)
    return {"x": x, "w": w, "y": y}
