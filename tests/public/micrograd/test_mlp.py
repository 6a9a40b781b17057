"""nn.py: an MLP with fixed weights (the same on both engines), its output and its gradients."""

from grader.case import case

XS = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]
TARGETS = [1.0, -1.0, -1.0, 1.0]


@case("micrograd", topic="forward", points=1)
def test_mlp_forward(lib):
    """MLP(3, [4, 4, 1]) on four inputs: the outputs only."""
    model = lib.mlp(3, [4, 4, 1], seed=1)
    return {"ys": [model(x) for x in XS]}


@case("micrograd", topic="mlp", points=3)
def test_mlp_backward(lib):
    """MLP(3, [4, 4, 1]), squared loss over four inputs: every parameter's gradient."""
    model = lib.mlp(3, [4, 4, 1], seed=1)
    ys = [model(x) for x in XS]
    loss = sum((y - t) ** 2 for y, t in zip(ys, TARGETS, strict=True))
    lib.backward(loss)
    return {"loss": loss, "ys": ys, "params": model.parameters()}


@case("micrograd", topic="mlp", points=2)
def test_mlp_input_gradient(lib):
    """MLP(2, [3, 2]) on Value inputs, two outputs: gradients reach the inputs too."""
    model = lib.mlp(2, [3, 2], seed=2)
    x = [lib.value(0.7, "x0"), lib.value(-1.2, "x1")]
    y0, y1 = model(x)
    out = y0 * y1 + y0
    lib.backward(out)
    return {"x": x, "out": out, "params": model.parameters()}
