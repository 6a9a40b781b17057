"""The diagnosis's walks of a case's graph (`grader.verdict.diagnose.Tape`): each is found
the quick way, and must say what the definition says, on any graph."""

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.case.trace import NodeRef, Step
from grader.verdict.diagnose import Tape, _detaches_fed


@st.composite
def graphs(draw) -> list[Step]:
    """A tape's steps in the order they were made: leaves (the first step among them) and ops
    on earlier nodes and constants (a node may be an input twice, as in x * x), some of the
    ops detach()."""
    steps: list[Step] = []
    for i in range(draw(st.integers(1, 20))):
        if i == 0 or draw(st.integers(0, 4)) == 0:
            steps.append(Step("leaf", []))
            continue
        earlier = st.integers(0, i - 1).map(NodeRef)
        inputs = draw(st.lists(st.one_of(earlier, st.floats(-2, 2)), min_size=1, max_size=3))
        steps.append(Step(draw(st.sampled_from(["add", "mul", "detach"])), inputs))
    return steps


def tape_of(steps: list[Step], scope: set[int] | None = None) -> Tape:
    tape = Tape.__new__(Tape)  # the walks read only the steps and the scope
    tape.steps, tape.scope = steps, scope
    return tape


@settings(max_examples=100, deadline=None)
@given(graphs(), st.data())
def test_each_walk_forward_finds_what_asking_every_node_for_its_ancestors_finds(steps, data):
    """A node's descendants, the detach() nodes it feeds (in tape order) and its consumers
    (each once, in tape order, within the scope of a backward() call) are found walking
    forward once; by their definition, each later node is asked for its ancestors."""
    scope = data.draw(st.none() | st.sets(st.integers(0, len(steps) - 1)))
    tape = tape_of(steps, scope)
    ancestors = [tape.ancestors(j) for j in range(len(steps))]
    for i in range(len(steps)):
        assert tape.descendants(i) == {j for j in range(len(steps)) if i in ancestors[j]}
        fed = [j for j, s in enumerate(steps) if s.op == "detach" and i in ancestors[j] and i != j]
        assert _detaches_fed(tape, i) == fed
        refer = [any(isinstance(r, NodeRef) and r.index == i for r in s.inputs) for s in steps]
        uses = [j for j, used in enumerate(refer) if used]
        assert tape.consumers(i) == [j for j in uses if scope is None or j in scope]
