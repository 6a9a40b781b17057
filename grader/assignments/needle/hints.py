"""What needle's diagnostics tell a student, beyond the numbers: the text of each hint.

`grader.verdict.diagnose` is generic; it takes its words from here. Every assignment's
hints.py has the same names (an empty string where a hint does not apply).
"""

from collections.abc import Sequence
from typing import Any

from grader.assignments.needle import OP_CLASSES as _OP_CLASSES
from grader.assignments.needle.backend import NEEDLE_CLASSES as _CLASSES
from grader.assignments.shared_hints import CALLS_ITSELF, NO_TAPE, RECURSION  # noqa: F401
from grader.case.trace import NodeRef

#: what the assignment's values are: tensors (needle) or scalars (micrograd)
TENSORS = True

#: how the op of a tape step is named in a message: a Tensor operator that builds more than
#: one op is the method the student wrote (`2 - a` runs `a.__rsub__(2)`)
OP_NAMES = {
    "sub": "Tensor.__sub__",
    "rsub": "Tensor.__rsub__",
    "rtruediv": "Tensor.__rtruediv__",
}
#: compound operators: the op classes the contract builds them from, one (class,
#: expression) per part, in the order `backend.compound_parts` probes them ({0}, {1}: the
#: step's inputs). Tensor's operators are given code: a wrong gradient is a part's rule
BUILT_FROM = {
    "sub": (("Negate", "-{1}"), ("EWiseAdd", "{0} + (-{1})")),
    "rsub": (("Negate", "-{0}"), ("AddScalar", "(-{0}) + {1}")),
    "rtruediv": (("PowerScalar", "{0}**-1"), ("MulScalar", "{0}**-1 * {1}")),
}
MLP_RUNS_ON: tuple[tuple[str, str], ...] = ()
PRIMITIVES: tuple[str, ...] = ()

SEED = (
    "backward(out_grad) must set the output's gradient to out_grad (ones when none is given), "
    "replacing the gradient of any earlier backward"
)
SUM = "backward must add up the partial adjoints a node receives from every op that uses it"
BACKWARD = "compute_gradient_of_variables"
ORDER = (
    "backward reached a node before every op that uses it had sent its gradient: "
    "find_topo_sort must put each node after its inputs (post-order), and backward walk it in reverse"
)
REPEATED_BACKWARD = (
    "the contract: backward ran more than once in this case, and each backward assigns the "
    "gradients for its own output, replacing those of an earlier backward, never adding to them"
)
DETACH = "no gradient flows through detach(): the detached tensor is a new leaf, without op or inputs"
NO_GRADIENT = (
    "they have requires_grad = False, so backward gave them no gradient: "
    "Tensor(array) must make a leaf with requires_grad=True unless told otherwise, and keep "
    "the requires_grad it is given"
)
UNHASHABLE = (
    "a Tensor must be hashable, as the graph's sets and dicts of nodes (`visited`, the "
    "gradients' dict) need it: a class that defines __eq__ (a @dataclass does) loses the "
    "__hash__ it had; keep it "
    "(`__hash__ = object.__hash__`, or @dataclass(eq=False)), or drop the __eq__"
)
LAZY = (
    "in lazy mode (LAZY_MODE = True) an op only builds its node; its data is computed when "
    "realize_cached_data() or numpy() asks for it, and must equal eager mode's"
)
#: what a node's data computed before anyone asked for it in lazy mode is laid at: the op
#: building it did not check LAZY_MODE
LAZY_PART = "Value.make_from_op"
HIGHER_ORDER = (
    "this case differentiates a gradient: gradient rules must build their result from the "
    "library's ops (not NumPy on .numpy() or cached_data), so the gradient has a graph to differentiate"
)
#: the parts a case that ran out of time is laid at, where it was stuck in one (each op's rule,
#: backward and the sort): a loop in Tensor's given code is none of them
PARTS = (*_OP_CLASSES, "backward", "find_topo_sort")
ENGINE_CLASS = "Tensor"
MLP = ""


def op_class(op: str, inputs: Sequence[Any]) -> str | None:
    """The needle op class(es) behind a tape step, for messages: `a / b` is EWiseDiv."""
    pair = _CLASSES.get(op)
    if pair is None:
        return None
    nodes = sum(isinstance(r, NodeRef) for r in inputs)
    return pair[0] if nodes >= 2 or len(inputs) == 1 else pair[1]


def function_blame(name: str) -> str:
    """What a failure raised in the submission's function `name` is laid at, as the class
    dashboard counts rules: an op's `X.gradient` is X's rule, `compute_gradient_of_variables`
    and any function nested in it (a walk of its own: `compute_gradient_of_variables.build`)
    is backward, and a function nested in the sort (`find_topo_sort.visit`) is the sort's."""
    if name.endswith(".gradient"):
        return name.removesuffix(".gradient")
    if name == BACKWARD or name.startswith(BACKWARD + "."):
        return "backward"
    return name.split(".")[0] if name.startswith("find_topo_sort.") else name
