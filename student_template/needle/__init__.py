"""needle: a tensor library with reverse-mode automatic differentiation, on NumPy.

`autograd.py` holds the graph (Tensor, Op) and backpropagation; `ops.py` the
operators, each with its forward `compute` and its `gradient`; `init.py` functions
that make new Tensors. The ops' helpers are available at the top: `needle.exp(x)`.
"""

from . import autograd, init, ops  # noqa: F401
from .autograd import Tensor, cpu  # noqa: F401
from .ops import *  # noqa: F403
