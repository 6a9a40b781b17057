"""What micrograd's diagnostics tell a student, beyond the numbers: the text of each hint.

`grader.verdict.diagnose` is generic; it takes its words from here. Every assignment's
hints.py has the same names (an empty string where a hint does not apply), so a third
assignment brings its own hints and nothing else changes.
"""

from collections.abc import Sequence
from typing import Any

from grader.assignments.micrograd import OPS as _OPS
from grader.assignments.shared_hints import CALLS_ITSELF, NO_TAPE, RECURSION  # noqa: F401

#: what the assignment's values are: tensors (needle) or scalars (micrograd)
TENSORS = False

#: how the op of a tape step is named in a message (the function the student wrote)
OP_NAMES = {
    "neg": "Value.__neg__",
    "sub": "Value.__sub__",
    "rsub": "Value.__rsub__",
    "radd": "Value.__radd__",
    "rmul": "Value.__rmul__",
    "truediv": "Value.__truediv__",
    "rtruediv": "Value.__rtruediv__",
}
#: composite ops: what the contract builds them from, one (primitive, expression) per part,
#: in the order the backend probes the parts ({0}, {1}: the step's inputs)
BUILT_FROM = {
    "neg": (("mul", "{0} * -1"),),
    "sub": (("mul", "{1} * -1"), ("add", "{0} + (-{1})")),
    "rsub": (("mul", "{0} * -1"), ("add", "{1} + (-{0})")),
    "truediv": (("pow", "{1}**-1"), ("mul", "{0} * {1}**-1")),
    "rtruediv": (("pow", "{0}**-1"), ("mul", "{1} * {0}**-1")),
    "radd": (("add", "{0} + {1}"),),
    "rmul": (("mul", "{0} * {1}"),),
}
#: the rules an MLP's neurons run on, each (primitive, expression), in the order the backend
#: probes them alone (at numbers of the grader's choosing: the tape does not see inside)
MLP_RUNS_ON = (("mul", "w * x"), ("add", "w + b"), ("relu", "relu(x) at x > 0"), ("relu", "relu(x) at x < 0"))
#: the primitive ops, each written as a `_backward` closure under its forward computation
PRIMITIVES = ("add", "mul", "pow", "relu", "exp", "log", "tanh", "sigmoid")

SEED = (
    "backward() must seed the output's gradient with 1, once it has reset the interior nodes' "
    "gradients (the output's among them)"
)
#: a node's gradient is the sum of what its consumers send: how that sum is made
SUM = "each rule must add its contribution (`+=`); assigning with `=` keeps only the last one"
#: where the rules are run in order and their contributions summed
BACKWARD = "backward()"
ORDER = (
    "backward() must run a node's _backward only after every node that uses it has run its own "
    "(reverse topological order), so that out.grad is complete when the rule reads it"
)
REPEATED_BACKWARD = (
    "the contract: backward() ran more than once in this case, and each call must start the interior nodes' "
    "gradients from zero (leaves keep accumulating, as in PyTorch), or it pushes the earlier "
    "calls' gradients through again; and each call runs the rules in reverse topological order"
)
DETACH = "detach() must return a new leaf Value with the same data: no gradient flows through it"
NO_GRADIENT = (
    "they have requires_grad = False, so backward() gave them nothing: the contract's Value(data) "
    "is a leaf that receives its gradient, and so is every node made from it (drop requires_grad, "
    "or make it default to True)"
)
UNHASHABLE = (
    "a Value must be hashable, as the graph's sets and dicts of nodes (`_prev`, `visited`) need it: a class "
    "that defines __eq__ (a @dataclass does) loses the __hash__ it had; keep it "
    "(`__hash__ = object.__hash__`, or @dataclass(eq=False)), or drop the __eq__"
)
LAZY = ""
LAZY_PART = ""
HIGHER_ORDER = ""
#: the parts a case that ran out of time is laid at, where it was stuck in one (each op's rule,
#: and backward()): a loop in the engine's given code is none of them
PARTS = (*_OPS, "backward")
#: the engine's node class: an exception raised in its methods is the engine's, not an MLP's
ENGINE_CLASS = "Value"
MLP = (
    "the MLP contract: MLP(nin, nouts) (e.g. MLP(3, [4, 4, 1])) is called on a list of nin "
    "numbers or Values, model(x); each hidden layer applies ReLU, the last layer is linear; it "
    "returns one Value when the last layer has one neuron, else a list; parameters() lists, layer "
    "by layer and neuron by neuron, each neuron's weights then its bias"
)


def op_class(op: str, inputs: Sequence[Any]) -> str | None:
    """The library class behind a tape step, for messages: micrograd has one class, Value."""
    return None


def function_blame(name: str) -> str:
    """What a failure raised in the submission's function `name` is laid at, as the class
    dashboard counts rules: an op's `_backward` closure is that op's rule
    (`Value.__mul__._backward`: mul), and everything inside `Value.backward` is backward's."""
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "Value" and parts[2] == "_backward":
        return parts[1].strip("_")
    if parts[:2] == ["Value", "backward"]:
        return "backward"
    return name
