"""breakpoint() inside backward(), as debugging left behind: the debugger meets end of file
on stdin and quits, and each case that called it says a debugger stop was left in."""

from micrograd.engine import Value

_backward = Value.backward


def backward(self):
    breakpoint()
    _backward(self)


Value.backward = backward
