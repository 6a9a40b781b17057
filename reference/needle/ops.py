"""needle's operators.

Each op is a class with two methods and a lowercase helper that applies it:
- `compute(*arrays)` computes the output from NumPy arrays: the forward pass.
- `gradient(out_grad, node)` gets the adjoint of the op's output and returns the
  partial adjoint of each input. It is written only in needle ops on Tensors, never in
  raw NumPy: the gradient is then itself a graph, and it can be differentiated again.
"""

import numpy

from .autograd import NDArray, Tensor, TensorOp


def _keep_float_dtype(result, a):
    """NumPy may widen a float32 array when a scalar joins in (a NumPy float64 scalar,
    or under NumPy 1 a 0-d array); needle keeps a float input's dtype. Integer inputs
    keep NumPy's result, so that 7 / 2 stays 3.5."""
    if numpy.issubdtype(a.dtype, numpy.floating):
        return result.astype(a.dtype, copy=False)
    return result


class EWiseAdd(TensorOp):
    def compute(self, a: NDArray, b: NDArray):
        return a + b

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(a + b)/da = d(a + b)/db = 1
        return out_grad, out_grad
        ### END SOLUTION


def add(a, b):
    return EWiseAdd()(a, b)


class AddScalar(TensorOp):
    def __init__(self, scalar):
        self.scalar = scalar

    def compute(self, a: NDArray):
        return _keep_float_dtype(a + self.scalar, a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: adding a constant does not change the slope
        return out_grad
        ### END SOLUTION


def add_scalar(a, scalar):
    return AddScalar(scalar)(a)


class EWiseMul(TensorOp):
    def compute(self, a: NDArray, b: NDArray):
        return a * b

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: each input's gradient is out_grad times the other input
        lhs, rhs = node.inputs
        return out_grad * rhs, out_grad * lhs
        ### END SOLUTION


def multiply(a, b):
    return EWiseMul()(a, b)


class MulScalar(TensorOp):
    def __init__(self, scalar):
        self.scalar = scalar

    def compute(self, a: NDArray):
        return _keep_float_dtype(a * self.scalar, a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(c * a)/da = c
        return out_grad * self.scalar
        ### END SOLUTION


def mul_scalar(a, scalar):
    return MulScalar(scalar)(a)


class PowerScalar(TensorOp):
    """a ** scalar, for a constant exponent."""

    def __init__(self, scalar):
        self.scalar = scalar

    def compute(self, a: NDArray):
        return _keep_float_dtype(a**self.scalar, a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: the power rule, d(a^n)/da = n * a^(n-1), written with power_scalar
        a = node.inputs[0]
        return out_grad * power_scalar(a, self.scalar - 1) * self.scalar
        ### END SOLUTION


def power_scalar(a, scalar):
    return PowerScalar(scalar)(a)


class EWisePow(TensorOp):
    """a ** b, element-wise, where both are Tensors."""

    def compute(self, a: NDArray, b: NDArray):
        return a**b

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(a^b)/da = b * a^(b-1) and d(a^b)/db = a^b * log(a); node is a^b
        a, b = node.inputs
        return out_grad * b * power(a, b - 1), out_grad * node * log(a)
        ### END SOLUTION


def power(a, b):
    return EWisePow()(a, b)


class EWiseDiv(TensorOp):
    def compute(self, a: NDArray, b: NDArray):
        return a / b

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(a/b)/da = 1/b and d(a/b)/db = -a/b^2
        a, b = node.inputs
        return out_grad / b, -out_grad * a / b**2
        ### END SOLUTION


def divide(a, b):
    return EWiseDiv()(a, b)


class DivScalar(TensorOp):
    def __init__(self, scalar):
        self.scalar = scalar

    def compute(self, a: NDArray):
        return _keep_float_dtype(a / self.scalar, a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(a / c)/da = 1 / c
        return out_grad / self.scalar
        ### END SOLUTION


def divide_scalar(a, scalar):
    return DivScalar(scalar)(a)


class Negate(TensorOp):
    def compute(self, a: NDArray):
        return -a

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(-a)/da = -1
        return negate(out_grad)
        ### END SOLUTION


def negate(a):
    return Negate()(a)


class Exp(TensorOp):
    def compute(self, a: NDArray):
        return numpy.exp(a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: exp is its own derivative, and node already holds exp(a)
        return out_grad * node
        ### END SOLUTION


def exp(a):
    return Exp()(a)


class Log(TensorOp):
    def compute(self, a: NDArray):
        return numpy.log(a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(log a)/da = 1/a
        return out_grad / node.inputs[0]
        ### END SOLUTION


def log(a):
    return Log()(a)


class ReLU(TensorOp):
    def compute(self, a: NDArray):
        return numpy.maximum(a, 0)

    def gradient(self, out_grad: Tensor, node: Tensor):
        # The slope is a constant mask: relu's slope is piecewise constant, so its own
        # derivative is 0 and no gradient needs to flow through the mask.
        ### BEGIN SOLUTION
        # hint: slope 1 where the input is > 0, else 0: a constant Tensor mask
        a = node.inputs[0].realize_cached_data()
        mask = Tensor(a > 0, dtype=a.dtype, requires_grad=False)
        return out_grad * mask
        ### END SOLUTION


def relu(a):
    return ReLU()(a)


class Tanh(TensorOp):
    def compute(self, a: NDArray):
        return numpy.tanh(a)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: d(tanh a)/da = 1 - tanh(a)^2, and node already holds tanh(a)
        return out_grad * (1 - node**2)
        ### END SOLUTION


def tanh(a):
    return Tanh()(a)


class Transpose(TensorOp):
    """Swap two axes: the pair `axes`, or the last two axes when `axes` is None."""

    def __init__(self, axes=None):
        self.axes = axes

    def compute(self, a: NDArray):
        if self.axes is None:
            return numpy.swapaxes(a, -1, -2)
        return numpy.swapaxes(a, *self.axes)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: swapping the same two axes again undoes the swap
        return transpose(out_grad, self.axes)
        ### END SOLUTION


def transpose(a, axes=None):
    return Transpose(axes)(a)


class Reshape(TensorOp):
    def __init__(self, shape):
        self.shape = tuple(shape)

    def compute(self, a: NDArray):
        return numpy.reshape(a, self.shape)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: reshaping only rearranges elements; give out_grad the input's shape back
        return reshape(out_grad, node.inputs[0].shape)
        ### END SOLUTION


def reshape(a, shape):
    return Reshape(shape)(a)


class BroadcastTo(TensorOp):
    def __init__(self, shape):
        self.shape = tuple(shape)

    def compute(self, a: NDArray):
        return numpy.broadcast_to(a, self.shape)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: every copy of an element sends its gradient back to it (_sum_to_shape)
        return _sum_to_shape(out_grad, node.inputs[0].shape)
        ### END SOLUTION


def broadcast_to(a, shape):
    return BroadcastTo(shape)(a)


def _sum_to_shape(x, shape):
    """Undo broadcasting: the gradient of a broadcast input is the sum of the gradients
    of all the copies broadcasting made of it. Used by BroadcastTo and MatMul."""
    ### BEGIN SOLUTION
    # hint: sum over the axes broadcasting added or stretched from 1, then reshape
    lead = len(x.shape) - len(shape)
    stretched = [lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1]
    axes = tuple(range(lead)) + tuple(stretched)
    return reshape(summation(x, axes), shape) if axes else x
    ### END SOLUTION


class Summation(TensorOp):
    """Sum over `axes`: an int, a tuple of ints, or None for all axes."""

    def __init__(self, axes=None):
        self.axes = (axes,) if isinstance(axes, int) else axes

    def compute(self, a: NDArray):
        return numpy.sum(a, axis=self.axes)

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: reshape out_grad to keep summed axes as size 1, then broadcast it back
        in_shape = node.inputs[0].shape
        kept_shape = list(in_shape)
        for axis in range(len(in_shape)) if self.axes is None else self.axes:
            kept_shape[axis] = 1
        return broadcast_to(reshape(out_grad, kept_shape), in_shape)
        ### END SOLUTION


def summation(a, axes=None):
    return Summation(axes)(a)


class MatMul(TensorOp):
    """Matrix product of the last two axes; leading (batch) axes broadcast."""

    def compute(self, a: NDArray, b: NDArray):
        return a @ b

    def gradient(self, out_grad: Tensor, node: Tensor):
        ### BEGIN SOLUTION
        # hint: out_grad @ B^T and A^T @ out_grad, summed back to each input's shape
        a, b = node.inputs
        grad_a = matmul(out_grad, transpose(b))
        grad_b = matmul(transpose(a), out_grad)
        return _sum_to_shape(grad_a, a.shape), _sum_to_shape(grad_b, b.shape)
        ### END SOLUTION


def matmul(a, b):
    return MatMul()(a, b)
