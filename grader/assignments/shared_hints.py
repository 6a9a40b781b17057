"""The words both assignments' diagnostics use alike: each `hints.py` imports these, so that
every assignment has the same names (see `grader.assignments.micrograd.hints`) and the
words are written once."""

RECURSION = (
    "a deep graph needs iteration, not recursion: one call a node passes Python's limit of about "
    "1000 calls on a chain of 10^5 ops; walk it with a loop and a stack of your own (an iterative "
    "topological sort, and backward a loop over its order)"
)
CALLS_ITSELF = (
    "{function} calls itself again (directly, or through the operators it uses) before it "
    "returns, without end, until Python's recursion limit stops it{why}"
)
NO_TAPE = (
    "this case makes too many nodes to keep a record of each, so it cannot say which rule or "
    "step of backward is wrong: the smaller cases that fail say it (fix those first)"
)
