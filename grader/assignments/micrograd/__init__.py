"""micrograd's vocabulary: the ops its cases may need, in its own words, and the files that
mark its package (see `needle`)."""

#: files that make a folder named `micrograd` its package (besides __init__.py)
MARKERS = ("engine.py",)

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
