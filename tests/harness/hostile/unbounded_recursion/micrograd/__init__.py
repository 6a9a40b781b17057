"""Lifts the recursion limit and recurses forever in backward, through C (map), so that
the C stack overflows and the worker dies of SIGSEGV."""

import sys

from micrograd.engine import Value

sys.setrecursionlimit(10**9)


def backward(self):
    return list(map(backward, [self]))


Value.backward = backward
