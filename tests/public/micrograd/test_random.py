"""Random expression graphs (grader/expressions.py), compared with PyTorch node by node.

Each graded case is one fixed program, the same on every run. The last test is not graded:
hypothesis draws new programs on each run and, when one fails, shrinks it to a small one
and prints it as micrograd code you can paste and debug."""

from grader.assignments.micrograd.programs import build, fixed_programs, program_case, search
from grader.case import case

PROGRAMS = fixed_programs(25, seed=1)


@case("micrograd", topic="random", points=1, params=PROGRAMS)
def test_random_expression(lib, program):
    """A random expression: every node's value and gradient."""
    nodes = build(lib, program)
    lib.backward(nodes["out"])
    return nodes


@search(max_examples=50)
def test_hypothesis_search(graded_case, program):
    """Not graded: random programs from hypothesis, a failing one shrunk to a small one."""
    graded_case(program_case(program))
