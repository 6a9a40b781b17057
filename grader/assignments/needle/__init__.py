"""needle's vocabulary: the ops and features its cases may need, in its own words, and the
files that mark its package. Kept apart from `backend` (which needs numpy): reading a scope
file, or finding which packages a folder holds, imports nothing heavy."""

#: files that make a folder named `needle` its package (besides __init__.py)
MARKERS = ("autograd.py",)

#: the functions the template gives whole (no solution to write): a case stuck in one of them
#: (a rule that loops on `out_grad + 0.0` is interrupted inside Tensor's constructor) was
#: stuck in the student's code that called it (`grader.case.hang.where`)
GIVEN = frozenset(
    {
        # autograd.py
        "CPUDevice.__repr__", "CPUDevice.__eq__", "CPUDevice.__hash__", "cpu", "Op.__call__",
        "Op.compute", "Op.gradient", "Op.gradient_as_tuple", "TensorOp.__call__",
        "Value.realize_cached_data", "Value.is_leaf", "Value.__del__", "Value._init",
        "Value.make_const", "Value.make_from_op", "Tensor.__init__", "Tensor.data",
        "Tensor.detach", "Tensor.shape", "Tensor.dtype", "Tensor.device", "Tensor.numpy",
        "Tensor.backward", "Tensor.__repr__", "Tensor.__str__", "Tensor.__add__",
        "Tensor.__mul__", "Tensor.__pow__", "Tensor.__sub__", "Tensor.__rsub__",
        "Tensor.__truediv__", "Tensor.__rtruediv__", "Tensor.__matmul__", "Tensor.__rmatmul__",
        "Tensor.matmul", "Tensor.__neg__", "Tensor.sum", "Tensor.broadcast_to", "Tensor.reshape",
        "Tensor.transpose", "sum_node_list",
        # init.py
        "rand", "randn", "constant", "ones", "zeros", "randb", "one_hot", "zeros_like", "ones_like",
        # ops.py: every op's forward computation and its function
        "_keep_float_dtype", "EWiseAdd.compute", "add", "AddScalar.__init__", "AddScalar.compute",
        "add_scalar", "EWiseMul.compute", "multiply", "MulScalar.__init__", "MulScalar.compute",
        "mul_scalar", "PowerScalar.__init__", "PowerScalar.compute", "power_scalar",
        "EWisePow.compute", "power", "EWiseDiv.compute", "divide", "DivScalar.__init__",
        "DivScalar.compute", "divide_scalar", "Negate.compute", "negate", "Exp.compute", "exp",
        "Log.compute", "log", "ReLU.compute", "relu", "Tanh.compute", "tanh",
        "Transpose.__init__", "Transpose.compute", "transpose", "Reshape.__init__",
        "Reshape.compute", "reshape", "BroadcastTo.__init__", "BroadcastTo.compute",
        "broadcast_to", "Summation.__init__", "Summation.compute", "summation",
        "MatMul.compute", "matmul",
    }
)  # fmt: skip

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
