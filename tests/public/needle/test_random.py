"""Random expressions over random broadcastable shapes (grader/assignments/needle/programs.py).

Each graded case is one fixed program, drawn from its seed: the same program every run. Every
node's value and gradient is compared, so a failure names the first op whose rule is wrong.
The last test is not graded: it checks more programs (the same ones on every run) and, when
one fails, hypothesis shrinks a failing program to a small one, printed as needle code."""

from grader.assignments.needle.programs import random_program, run, search
from grader.case import case


@case("needle", topic="random", points=1, params=range(10))
def test_random_program(lib, seed):
    """A random program of broadcasts, element-wise ops, sums, reshapes and matmuls."""
    return run(lib, random_program(seed))


@search(max_examples=15)
def test_hypothesis_search(graded_case):
    """Not graded: more random programs, a failing one shrunk to a small one."""
