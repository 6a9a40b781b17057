"""exit() inside backward(), the builtin a student's Python has (the sandbox's worker runs
without `site`, which makes it): the same sys.exit() as everywhere, not a NameError."""

from micrograd.engine import Value


def backward(self):
    exit(3)


Value.backward = backward
