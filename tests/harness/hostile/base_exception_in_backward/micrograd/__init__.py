"""backward() raises the submission's own subclass of BaseException, which `except
Exception` does not catch: still the case's failure, in the sandbox and in process alike."""

from micrograd.engine import Value


class Stop(BaseException):
    pass


def backward(self):
    raise Stop("not finished")


Value.backward = backward
