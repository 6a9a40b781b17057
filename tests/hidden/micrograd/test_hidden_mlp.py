"""Hidden: other MLPs, other losses."""

from grader.case import case

XS = [[0.5, -1.0, 2.0, 0.1], [-1.5, 0.3, 0.0, 1.0], [1.0, 1.0, -1.0, -0.5]]
LABELS = [1.0, -1.0, 1.0]


@case("micrograd", topic="forward", points=1)
def test_hidden_mlp_forward(lib):
    """MLP(4, [5, 3, 2]): two outputs per input."""
    model = lib.mlp(4, [5, 3, 2], seed=7)
    return {f"ys{i}": model(x) for i, x in enumerate(XS)}


@case("micrograd", topic="mlp", points=3)
def test_hidden_mlp_hinge_loss(lib):
    """MLP(4, [5, 3, 1]) with micrograd's demo loss: mean hinge loss + 1e-4 * L2."""
    model = lib.mlp(4, [5, 3, 1], seed=8)
    scores = [model(x) for x in XS]
    losses = [(1 + -y * s).relu() for y, s in zip(LABELS, scores, strict=True)]
    data_loss = sum(losses) * (1.0 / len(losses))
    reg_loss = 1e-4 * sum(p * p for p in model.parameters())
    loss = data_loss + reg_loss
    lib.backward(loss)
    return {"loss": loss, "scores": scores, "params": model.parameters()}


@case("micrograd", topic="mlp", points=2)
def test_hidden_mlp_softmax(lib):
    """MLP(2, [4, 3]) logits, cross-entropy of class 2."""
    model = lib.mlp(2, [4, 3], seed=9)
    logits = model([lib.value(-0.3, "x0"), lib.value(1.1, "x1")])
    total = sum(z.exp() for z in logits)
    loss = total.log() - logits[2]
    lib.backward(loss)
    return {"logits": logits, "loss": loss, "params": model.parameters()}
