"""backward() never returns."""

from micrograd.engine import Value


def backward(self):
    while True:
        pass


Value.backward = backward
