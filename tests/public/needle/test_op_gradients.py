"""Every op's gradient rule in isolation: `op.gradient_as_tuple(out_grad, node)` against
`torch.autograd.grad`, with a random out_grad (ones would hide a rule that forgets it).

These need no working backward(): a wrong rule is named here even when backward fails.
"""

import numpy as np

from grader.case import case


def array(rng, shape, kind):
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    a = rng.standard_normal(shape)
    if kind == "zeros":  # relu's gradient at exactly 0 is 0
        a.reshape(-1)[::3] = 0.0
    return a


# name -> (op class, input shapes, kind of input, op arguments, output shape)
RULES = {
    "EWiseAdd": ("EWiseAdd", [(2, 3), (2, 3)], "normal", {}, (2, 3)),
    "AddScalar": ("AddScalar", [(2, 3)], "normal", {"scalar": 1.5}, (2, 3)),
    "EWiseMul": ("EWiseMul", [(2, 3), (2, 3)], "normal", {}, (2, 3)),
    "MulScalar": ("MulScalar", [(3, 2)], "normal", {"scalar": -1.5}, (3, 2)),
    "PowerScalar": ("PowerScalar", [(2, 3)], "normal", {"scalar": 3}, (2, 3)),
    "EWisePow": ("EWisePow", [(2, 3), (2, 3)], "positive", {}, (2, 3)),
    "EWiseDiv": ("EWiseDiv", [(2, 3), (2, 3)], "positive", {}, (2, 3)),
    "DivScalar": ("DivScalar", [(2, 3)], "normal", {"scalar": 4.0}, (2, 3)),
    "Negate": ("Negate", [(2, 3)], "normal", {}, (2, 3)),
    "Exp": ("Exp", [(2, 3)], "normal", {}, (2, 3)),
    "Log": ("Log", [(2, 3)], "positive", {}, (2, 3)),
    "ReLU": ("ReLU", [(3, 4)], "zeros", {}, (3, 4)),
    "Tanh": ("Tanh", [(2, 3)], "normal", {}, (2, 3)),
    "Transpose-default": ("Transpose", [(2, 3, 4)], "normal", {"axes": None}, (2, 4, 3)),
    "Transpose-axes": ("Transpose", [(2, 3, 4)], "normal", {"axes": (0, 1)}, (3, 2, 4)),
    "Reshape": ("Reshape", [(2, 3, 4)], "normal", {"shape": (4, 6)}, (4, 6)),
    "BroadcastTo-prepend": ("BroadcastTo", [(3,)], "normal", {"shape": (2, 3)}, (2, 3)),
    "BroadcastTo-stretch": ("BroadcastTo", [(3, 1)], "normal", {"shape": (2, 3, 4)}, (2, 3, 4)),
    "BroadcastTo-0d": ("BroadcastTo", [()], "normal", {"shape": (2, 3)}, (2, 3)),
    "Summation-all": ("Summation", [(2, 3, 4)], "normal", {"axes": None}, ()),
    "Summation-int": ("Summation", [(2, 3, 4)], "normal", {"axes": 1}, (2, 4)),
    "Summation-tuple": ("Summation", [(2, 3, 4)], "normal", {"axes": (0, 2)}, (3,)),
    "MatMul": ("MatMul", [(2, 3), (3, 4)], "normal", {}, (2, 4)),
    "MatMul-batched": ("MatMul", [(2, 3, 4), (2, 4, 5)], "normal", {}, (2, 3, 5)),
    "MatMul-broadcast": ("MatMul", [(2, 3, 4), (4, 5)], "normal", {}, (2, 3, 5)),
}


@case("needle", topic="op-gradients", points=1, params=list(RULES))
def test_op_gradient(lib, name):
    """The op's gradient for each input, from a random out_grad."""
    op, shapes, kind, args, out_shape = RULES[name]
    rng = np.random.default_rng(10)
    xs = [lib.tensor(array(rng, s, kind), "abc"[i]) for i, s in enumerate(shapes)]
    out_grad = lib.tensor(rng.standard_normal(out_shape), "out_grad", requires_grad=False)
    grads = lib.op_gradient(op, xs, out_grad, **args)
    return {f"gradient for {x_name}": g for x_name, g in zip("abc", grads, strict=False)}


@case("needle", topic="op-gradients", points=1, params=["EWiseMul", "Tanh", "ReLU", "MatMul-batched"])
def test_op_gradient_float32(lib, name):
    """The same rules on float32 tensors: each gradient float32 too."""
    op, shapes, kind, args, out_shape = RULES[name]
    rng = np.random.default_rng(11)
    xs = [lib.tensor(array(rng, s, kind), "abc"[i], dtype="float32") for i, s in enumerate(shapes)]
    out_grad = lib.tensor(rng.standard_normal(out_shape), "out_grad", dtype="float32", requires_grad=False)
    grads = lib.op_gradient(op, xs, out_grad, **args)
    return {f"gradient for {x_name}": g for x_name, g in zip("abc", grads, strict=False)}
