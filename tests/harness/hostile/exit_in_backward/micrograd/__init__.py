"""sys.exit inside backward(): the cases that call it must score zero, not end grading."""

import sys

from micrograd.engine import Value


def backward(self):
    sys.exit(3)


Value.backward = backward
