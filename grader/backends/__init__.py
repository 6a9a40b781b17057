"""Backends: the same case runs on a submission's engine and on PyTorch.

A backend is the `lib` a case is written against. It creates leaves, applies operations
(recording them on the tape), runs backward and turns results into plain `Quantity`s.
"""

from grader.backends.base import Backend, UnknownOp

__all__ = ["Backend", "UnknownOp"]
