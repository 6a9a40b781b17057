"""Random expression graphs (grader/assignments/micrograd/programs.py), compared with PyTorch
node by node.

Each graded case is one fixed program, the same on every run. The last test is not graded:
it checks more programs (the same ones on every run) and, when one fails, hypothesis shrinks
a failing program to a small one, printed as micrograd code you can paste and debug."""

from grader.assignments.micrograd.programs import build, fixed_programs, search
from grader.case import case

PROGRAMS = fixed_programs(15, seed=1)


@case("micrograd", topic="random", points=1, params=PROGRAMS)
def test_random_expression(lib, program):
    """A random expression: every node's value and gradient."""
    nodes = build(lib, program)
    lib.backward(nodes["out"])
    return nodes


@search(max_examples=25)
def test_hypothesis_search(graded_case):
    """Not graded: more random programs, a failing one shrunk to a small one."""
