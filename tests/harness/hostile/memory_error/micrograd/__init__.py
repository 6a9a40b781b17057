"""Asks for far more memory than the limit at once in backward: MemoryError."""

from micrograd.engine import Value


def backward(self):
    self._hoard = bytearray(1 << 40)


Value.backward = backward
