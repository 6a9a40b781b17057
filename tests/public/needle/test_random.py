"""Random expressions over random broadcastable shapes (grader/expressions_needle.py).

Each case is one fixed program, drawn from its seed: the same program every run. Every node's
value and gradient is compared, so a failure names the first op whose rule is wrong."""

from grader.assignments.needle.programs import random_program, run
from grader.case import case


@case("needle", topic="random", points=1, params=range(10))
def test_random_program(lib, seed):
    """A random program of broadcasts, element-wise ops, sums, reshapes and matmuls."""
    return run(lib, random_program(seed))
