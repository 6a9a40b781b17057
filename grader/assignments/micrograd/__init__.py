"""micrograd's vocabulary: the ops its cases may need, in its own words, and the files that
mark its package (see `needle`)."""

#: files that make a folder named `micrograd` its package (besides __init__.py)
MARKERS = ("engine.py",)

#: the functions the template gives whole (no solution to write): a case stuck in one of them
#: was stuck in the student's code that called it (`grader.case.hang.where`)
GIVEN = frozenset(
    {
        "Value.__init__", "Value.detach", "Value.__neg__", "Value.__radd__", "Value.__sub__",
        "Value.__rsub__", "Value.__rmul__", "Value.__truediv__", "Value.__rtruediv__",
        "Value.__repr__", "Module.zero_grad", "Module.parameters", "Neuron.__init__",
        "Neuron.__call__", "Neuron.parameters", "Neuron.__repr__", "Layer.__init__",
        "Layer.__call__", "Layer.parameters", "Layer.__repr__", "MLP.__init__", "MLP.__call__",
        "MLP.parameters", "MLP.__repr__",
    }
)  # fmt: skip

#: The ops a micrograd case may need, named as the case writes them (`rsub` is `2 - a`,
#: `Value.__rsub__`): what a scope file lists and what "not graded: needs tanh" names.
OPS = (
    "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "neg",
    "relu", "exp", "log", "tanh", "sigmoid", "detach",
)  # fmt: skip
#: what every case about accumulation, depth and repeated backward can be written with
CORE = ("add", "radd", "mul", "rmul", "pow")
#: a micrograd case relies on nothing but ops
FEATURES: tuple[str, ...] = ()
#: the grader's own accounts of an exception a case raised (the adapter's exception classes):
#: each says its cause in full (`grader.verdict.compare.FINDINGS`)
ACCOUNTS = ("ParameterCountError",)
