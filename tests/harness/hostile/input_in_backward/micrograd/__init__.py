"""input() inside backward(), as debugging left behind: the submission's stdin is not the
grader's pipe but /dev/null, so it meets end of file at once and its cases fail with that
EOFError, instead of each waiting on the grader's pipe until its time is up."""

from micrograd.engine import Value

_backward = Value.backward


def backward(self):
    input("press Enter to run backward() ")
    _backward(self)


Value.backward = backward
