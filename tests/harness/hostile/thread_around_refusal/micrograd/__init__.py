"""Gets round the worker's refusal of threads (a fresh `_thread` module made by `_imp`) in
the first backward() and leaves a thread rewriting every gradient to 1.0 for good. The
grader sees the extra thread in the live worker and faults the case that started it, the
same in every run; nothing it does may raise the score."""

import _imp
import importlib.machinery
import time

from micrograd.engine import Value

_made = []
_init = Value.__init__
_backward = Value.backward
_started = []


def __init__(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    _made.append(self)


def _rewrite():
    while True:
        for v in list(_made):
            v.grad = 1.0
        time.sleep(0.001)


def backward(self):
    if not _started:
        _started.append(True)
        fresh = _imp.create_builtin(importlib.machinery.ModuleSpec("_thread", None))
        fresh.start_new_thread(_rewrite, ())
    _backward(self)


Value.__init__ = __init__
Value.backward = backward
