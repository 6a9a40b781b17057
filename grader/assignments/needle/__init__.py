"""needle's vocabulary: the ops and features its cases may need, in its own words, and the
files that mark its package. Kept apart from `backend` (which needs numpy): reading a scope
file, or finding which packages a folder holds, imports nothing heavy."""

#: files that make a folder named `needle` its package (besides __init__.py)
MARKERS = ("autograd.py",)

#: needle's op classes, by the name a case gives `lib.op_gradient`
OP_CLASSES = (
    "EWiseAdd",
    "AddScalar",
    "EWiseMul",
    "MulScalar",
    "PowerScalar",
    "EWisePow",
    "EWiseDiv",
    "DivScalar",
    "Negate",
    "Exp",
    "Log",
    "ReLU",
    "Tanh",
    "Transpose",
    "Reshape",
    "BroadcastTo",
    "Summation",
    "MatMul",
)

#: Tensor's reflected operators that build ops of their own (`2 - a` runs `a.__rsub__(2)`):
#: a course whose Tensor has neither (CMU's hw1 skeleton) leaves them out of its scope
REFLECTED = ("__rsub__", "__rtruediv__")
#: the ops a needle case may need: its op classes and the reflected operators (what a scope
#: file lists, and what "not graded: needs Tanh" or "needs __rsub__" names)
OPS = OP_CLASSES + REFLECTED
#: what every case about accumulation, depth and higher-order gradients can be written with
CORE = ("EWiseAdd", "AddScalar", "EWiseMul", "MulScalar", "PowerScalar", "Summation", "MatMul")
#: the grader's own accounts of an exception a case raised (the adapter's exception classes,
#: made by `explain_exception`): each says its cause in full, so a report shows its message
#: alone and the verdict reads no tape for it (`grader.verdict.compare.FINDINGS`)
ACCOUNTS = (
    "GradientTypeError",
    "GradientCountError",
    "GradientShapeError",
    "OutGradShapeError",
    "SortGivenANodeError",
    "NoGradientError",
    "NotDifferentiableError",
    "NumpyOperandError",
    "GradientListError",
    "GradientNotStoredError",
    "GradientSkippedError",
    "SortLeftOutError",
    "AdjointsMisroutedError",
    "SeedMissingError",
)
#: what a needle case may rely on besides its op classes: `int-axes` is a Summation whose
#: axes are an int (`x.sum(axes=1)`) rather than a tuple (`axes=(1,)`)
FEATURES = ("int-axes",)
