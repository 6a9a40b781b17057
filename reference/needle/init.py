"""Functions that make new Tensors: random, constant, and shaped like another Tensor.

They are leaves that do not require gradients unless asked (`requires_grad=True`).
Random numbers come from NumPy's global generator, so `numpy.random.seed` fixes them.
"""

import numpy

from .autograd import Tensor


def rand(*shape, low=0.0, high=1.0, device=None, dtype="float32", requires_grad=False):
    """Uniform random numbers in [low, high)."""
    array = numpy.random.rand(*shape) * (high - low) + low
    return Tensor(array, device=device, dtype=dtype, requires_grad=requires_grad)


def randn(*shape, mean=0.0, std=1.0, device=None, dtype="float32", requires_grad=False):
    """Normally distributed random numbers."""
    array = numpy.random.randn(*shape) * std + mean
    return Tensor(array, device=device, dtype=dtype, requires_grad=requires_grad)


def constant(*shape, c=1.0, device=None, dtype="float32", requires_grad=False):
    """A tensor filled with `c`."""
    array = numpy.full(shape, c, dtype=dtype)
    return Tensor(array, device=device, dtype=dtype, requires_grad=requires_grad)


def ones(*shape, device=None, dtype="float32", requires_grad=False):
    return constant(*shape, c=1.0, device=device, dtype=dtype, requires_grad=requires_grad)


def zeros(*shape, device=None, dtype="float32", requires_grad=False):
    return constant(*shape, c=0.0, device=device, dtype=dtype, requires_grad=requires_grad)


def randb(*shape, p=0.5, device=None, dtype="bool", requires_grad=False):
    """Random booleans, each True with probability p."""
    array = numpy.random.rand(*shape) <= p
    return Tensor(array, device=device, dtype=dtype, requires_grad=requires_grad)


def one_hot(n, i, device=None, dtype="float32", requires_grad=False):
    """Rows of the n x n identity picked by the indices `i` (a Tensor or array-like)."""
    indices = i.numpy() if isinstance(i, Tensor) else numpy.asarray(i)
    array = numpy.eye(n, dtype=dtype)[indices]
    return Tensor(array, device=device, requires_grad=requires_grad)


def zeros_like(array, *, device=None, requires_grad=False):
    return zeros(*array.shape, dtype=array.dtype, device=device, requires_grad=requires_grad)


def ones_like(array, *, device=None, requires_grad=False):
    return ones(*array.shape, dtype=array.dtype, device=device, requires_grad=requires_grad)
