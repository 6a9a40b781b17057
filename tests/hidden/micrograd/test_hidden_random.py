"""Hidden: more and longer random expression graphs."""

from grader.assignments.micrograd.programs import build, fixed_programs
from grader.case import case


@case("micrograd", topic="random", points=1, params=fixed_programs(8, seed=2, max_ops=14))
def test_hidden_random_expression(lib, program):
    """A random expression: every node's value and gradient."""
    nodes = build(lib, program)
    lib.backward(nodes["out"])
    return nodes
