"""Blame that names the real cause, on engines written the way real students write them.

Each engine is a copy of reference/ with textual edits (as in the bug banks). A correct
engine built differently from the reference must pass; a buggy one must fail with a message
that names the part to fix, and not a part the student never wrote or that is right. Run this
file to print, for every bug of the banks on every case, what its failures are laid at:

    python -m tests.harness.test_blame
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.assignments.needle import hints as needle_hints
from grader.case.define import Case, collect
from grader.pipeline import REPO, run_in_process, score
from grader.report.model import CaseResult
from grader.verdict.oracle import Oracle
from tests.harness.bugs import Bug, materialize
from tests.harness.bugs.micrograd import BY_NAME
from tests.harness.bugs.needle import BUGS as NEEDLE_BANK

ENGINE = "micrograd/engine.py"
NN = "micrograd/nn.py"
AUTOGRAD = "needle/autograd.py"
OPS = "needle/ops.py"

TANH_RULE = """\
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward():
            ### BEGIN SOLUTION
            # hint: d(tanh x)/dx = 1 - tanh(x)**2, written with out.data so that it cannot overflow
            self.grad += (1.0 - out.data**2) * out.grad
            ### END SOLUTION

        out._backward = _backward
        return out
"""


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return collect(REPO / "tests", ["micrograd", "needle"], ["public", "hidden"])


def chosen(cases: list[Case], pattern: str) -> list[Case]:
    """Cases whose id (`assignment/module::name[param]`) matches `pattern` (a regex) somewhere."""
    found = [c for c in cases if re.search(pattern, c.id)]
    assert found, f"no case matches {pattern!r}"
    return found


def run(bug: Bug, cases: list[Case], oracle: Oracle, tmp_path) -> dict[str, CaseResult]:
    submission = materialize(bug, tmp_path / bug.name)
    results = score(cases, oracle, run_in_process(submission, cases), {})
    return {r.id: r for r in results}


def failed(results: dict[str, CaseResult]) -> dict[str, str]:
    return {i: r.message for i, r in results.items() if not r.passed}


# ---- a correct op built from other ops passes ----

TANH_FROM_EXP = Bug(
    "tanh-from-exp",
    "a correct tanh built from other ops, (e - n) / (e + n) with e = exp(x), n = exp(-x)",
    [(ENGINE, TANH_RULE, "        e, n = self.exp(), (-self).exp()\n        return (e - n) / (e + n)\n")],
)


def test_a_correct_tanh_built_from_other_ops_passes(cases, oracle, tmp_path):
    """Its rule-alone cases run every node tanh created, not only the output's _backward.
    (At x = +-1000 exp overflows: that failure is real, and says so.)"""
    results = run(TANH_FROM_EXP, chosen(cases, r"^micrograd/.*tanh"), oracle, tmp_path)
    assert any("rule[tanh" in i for i in results) and any("backward[tanh" in i for i in results)
    wrong = {i: m for i, m in failed(results).items() if "OverflowError" not in m}
    assert wrong == {}
    overflow = [i for i in failed(results)]
    assert overflow and all("large" in i for i in overflow), overflow


# ---- a wrong rule is named, not the `+=` of a node with several consumers ----


def first_lines(results: dict[str, CaseResult], cases: list[Case]) -> dict[str, str]:
    """The first line of every failure of a traced case (an untraced one has no tape)."""
    traced = {c.id for c in cases if c.trace}
    return {i: m.splitlines()[0] for i, m in failed(results).items() if i in traced}


def test_a_wrong_tanh_rule_is_named_even_on_a_node_with_two_consumers(cases, oracle, tmp_path):
    bug = BY_NAME["tanh-no-square"]
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    lines = first_lines(run(bug, micrograd, oracle, tmp_path), micrograd)
    assert len(lines) > 10
    assert {i: line for i, line in lines.items() if not line.startswith("wrong gradient from tanh")} == {}


def test_a_wrong_pow_rule_is_named_not_the_division_built_on_it(cases, oracle, tmp_path):
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    results = run(BY_NAME["pow-off-by-one"], micrograd, oracle, tmp_path)
    lines = first_lines(results, micrograd)
    assert "micrograd/test_ops::backward[div]" in lines and "micrograd/test_ops::backward[rdiv]" in lines
    assert {i: line for i, line in lines.items() if not line.startswith("wrong gradient from pow")} == {}
    division = failed(results)["micrograd/test_ops::backward[div]"]
    assert "b**-1" in division and "a / b is built from" in division, division


ADD_DOUBLES_SELF = Bug(
    "add-doubles-self",
    "add's rule sends its first input twice out.grad",
    [(ENGINE, "            self.grad += out.grad\n", "            self.grad += 2 * out.grad\n")],
)


@pytest.mark.parametrize(
    ("bug", "case", "culprit", "innocent"),
    [
        (BY_NAME["mul-own-input"], "micrograd/test_ops::backward[div-number]", "mul", "pow"),
        (ADD_DOUBLES_SELF, "micrograd/test_ops::backward[sub-number]", "add", "mul"),
    ],
    ids=["division", "subtraction"],
)
def test_a_number_operand_runs_no_rule_that_could_be_blamed(
    bug, case, culprit, innocent, cases, oracle, tmp_path
):
    """`a / 4.0` is `a * 0.25` and `a - 1.5` is `a + (-1.5)`: the number's power and its
    negation are computed by Python, by no rule of the engine, so the one rule that ran is
    named, and only its part is said to build the op."""
    message = failed(run(bug, chosen(cases, re.escape(case)), oracle, tmp_path))[case]
    assert message.startswith(f"wrong gradient from {culprit}:"), message
    built = message.split("built from", 1)[1].split("\n")[0]
    assert f"from {innocent}" not in message and " and " not in built, message


def blames(bug: Bug, cases: list[Case], oracle: Oracle, tmp_path) -> dict[str, str]:
    """What each failure is laid at, by case id."""
    return {i: r.blame for i, r in run(bug, cases, oracle, tmp_path).items() if not r.passed}


#: assignment/bug -> (the cases, by regex, where its failures were laid at the wrong part
#: or at no one, what they are laid at)
LAID_AT = {
    # the rules are right but ran in the wrong order: a detached leaf, or a node deep in a
    # chain, had no gradient yet when its rule read it
    "micrograd/closures-in-topological-order": (r"micrograd/.*(detach|deep::chain_5000)", {"backward"}),
    # detach() returned its input: `x2.detach() * x2` gave both one gradient
    # parameters() without the biases: the grader found it building the MLP, in its own code
    # (once "ValueError: MLP(3, [4, 4, 1]) has 32 parameters, expected 41", laid at no part)
    "micrograd/bias-not-a-parameter": (r"micrograd/.*(mlp|zero_grad)", {"Neuron.parameters"}),
    "micrograd/mlp-parameters-skip-last-layer": (r"micrograd/.*(mlp|zero_grad)", {"MLP.parameters"}),
    "micrograd/layer-parameters-first-neuron": (r"micrograd/.*(mlp|zero_grad)", {"Layer.parameters"}),
    "micrograd/detach-returns-self": (r"micrograd/.*(detach|random_expression\[prog10\])", {"detach"}),
    # the MLP's neurons ran the rule (at inputs below 0), which the tape does not see
    "micrograd/relu-no-mask": (r"micrograd/.*mlp", {"relu"}),
    "micrograd/add-assigns": (r"micrograd/test_hidden_mlp", {"add"}),
    # right to a millionth at each node: the 5000-node chain compounds it
    "micrograd/tanh-uses-input": (r"micrograd/test_deep::chain_5000$", {"tanh"}),
    "micrograd/zero-grad-does-nothing": (r"micrograd/.*zero_grad", {"Module.zero_grad"}),
    # reversed, it makes 1 - p negative; log then raises on it, but rsub is what is wrong
    "micrograd/rsub-reversed": (r"micrograd/.*hidden_log_sigmoid_loss", {"Value.__rsub__"}),
    # -x built from x's number: a - b (the given a + (-b)) sends b nothing, at __neg__'s fault
    "micrograd/neg-outside-the-graph": (r"micrograd/test_(ops|hidden_ops)::.*(neg|sub)", {"Value.__neg__"}),
    # raised in a rule's closure (ZeroDivisionError), or in the sort nested in backward()
    "micrograd/log-divides-by-output": (r"micrograd/test_(ops|hidden_ops)::", {"log"}),
    "micrograd/recursive-topo": (r"micrograd/test_deep::", {"backward"}),
    # the TypeError surfaces where a set of nodes is made; the __eq__ that lost the hash is at fault
    "micrograd/value-eq-unhashable": (r"micrograd/test_ops::", {"Value.__eq__"}),
    "needle/tensor-eq-unhashable": (r"needle/test_ops::", {"Tensor.__eq__"}),
    # a gradient of the wrong shape with the right numbers: flattened, its probe looked right
    "needle/reshape-gradient-wrong-shape": (r"needle/test_(broadcast|random::)", {"Reshape"}),
    # `a - b` is `a + (-b)` and `2 - a` is `(-a) + 2` (Tensor's operators, given code): the
    # rule of the part that is wrong, wherever they run (before: Tensor.__sub__, __rsub__)
    "needle/negate-sign-lost": (
        r"needle/test_(ops::op_backward\[r?sub\]|composite::|finite_diff)",
        {"Negate"},
    ),
    # the sort listed a node twice, and backward added adjoints again: where the gradients are
    # whole multiples, laid at the sort (its own cases show the node listed twice); the chain
    # of 10**5 ops, a node used twice at each step, times out
    "needle/topo-without-visited": (
        r"needle/test_(topo::(?!chain_of)|broadcast::broadcast_twice)",
        {"find_topo_sort"},
    ),
    # the next rule, or backward's sum, raised on the wrong-shaped gradient a rule returned
    "needle/summation-not-broadcast-back": (
        r"needle/test_(matmul::matmul_chain|reshape_transpose::reshape_then_transpose)",
        {"Summation"},
    ),
    "needle/transpose-ignores-axes": (r"needle/test_hidden_shapes::hidden_transpose_twice", {"Transpose"}),
    # the gradient a training step read (w.grad) was wrong: the rule backward ran, not backward
    # MatMul.compute raised, but MatMul.gradient was running and handed it the factors
    "needle/matmul-gradient-factors-swapped": (r"needle/test_matmul::", {"MatMul"}),
    # the detached node kept its op and inputs: probed alone on a node that has an op, detach()
    # lets a gradient through (the cases that keep a tape; a leaf's detach has nothing to keep)
    "needle/detach-keeps-inputs": (
        r"needle/test_(detach::(no_gradient|detached_is|detach_mid)|hidden_graph::hidden_detach_target)",
        {"detach"},
    ),
    # every node of the first graph carried its gradient into the backward through a gradient
    "needle/grads-accumulate-across-backward": (r"needle/test_(higher_order|hidden_graph)::", {"backward"}),
    # a gradient differentiated again was wrong from the first backward on: PyTorch keeps no
    # gradient of the first graph's interior nodes, so each rule is probed with a fixed out_grad
    "needle/tanh-derivative": (r"needle/test_higher_order::", {"Tanh"}),
    "needle/exp-uses-input": (r"needle/test_(higher_order|hidden_graph)::", {"Exp"}),
    # (where the only multiply on the tape is gW * gW, whose swap changes nothing, the swapped
    # rule runs inside PowerScalar's gradient, off the tape: laid where the other cases are)
    "needle/mul-gradients-swapped": (r"needle/test_(composite::sgd_steps|higher_order::)", {"EWiseMul"}),
    # every rule right on its own, the gradient read in the case wrong: backward's sum
    "needle/adjoints-overwritten": (r"needle/test_(higher_order::|composite::sgd_steps)", {"backward"}),
    # backward handed each rule the output's out_grad: where a rule raised on it (a Reshape, a
    # BroadcastTo, a MatMul), laid at backward, not at the rule (every rule is right alone)
    "needle/backward-passes-its-out-grad": (
        r"needle/test_(broadcast|composite|matmul|reshape_transpose)::",
        {"backward"},
    ),
    # a Reshape rule that leaves out_grad as it is: in a case that differentiates a gradient,
    # the next rule raised on what it returned, off the tape (inside Summation's gradient);
    # run alone, Reshape's rule returns the wrong shape (once laid at Summation)
    "needle/reshape-gradient-unchanged": (r"needle/test_(reshape_transpose|hidden_graph)::", {"Reshape"}),
    # the sort raised, given the output where it takes a list: backward called it so
    "needle/sort-given-the-output": (r"needle/test_(broadcast|composite)::", {"backward"}),
    # only lazy mode's flags differ, each saying a node was computed before anyone asked
    "needle/lazy-mode-ignored": (r"needle/test_(lazy::|hidden_graph::hidden_lazy)", {"Value.make_from_op"}),
    # backward raised a KeyError walking a pre-order list in reverse: the sort's own cases say
    # it lists nodes before their inputs, so the sort is what is wrong
    "needle/topo-pre-order": (r"needle/test_(topo|broadcast|hidden_graph)::", {"find_topo_sort"}),
    # a float64 mask: the hidden network's tape cannot tell which rule made the float64, but
    # the public probe of ReLU's rule can
    "needle/relu-mask-float64": (r"needle/test_(op_gradients::op_gradient_float32|hidden_graph)", {"ReLU"}),
    # MulScalar's rule without its scalar: in a case that scales by 0.25 twice, the gradient
    # the later backward left happened to be PyTorch's plus the (wrong) earlier one (once laid
    # at backward, as if it added to an earlier gradient)
    # backward stored each node's list of partial adjoints as its grad: reading it raised in
    # the grader (once laid at no part, saying "float() argument must be ... not 'Tensor'")
    "needle/grad-stored-as-list": (r"needle/test_(broadcast|composite|higher_order)::", {"backward"}),
    # backward kept every gradient in a local: a case that reads a gradient as a node raised
    # the adapter's "x.grad is not set" (once laid at no part)
    "needle/gradients-not-stored": (r"needle/test_(higher_order|hidden_graph)::", {"backward"}),
    # the sort lists no leaf, so backward never came to one: where the sort's own cases find
    # nodes left out, the sort is what is wrong (once laid at backward)
    "needle/topo-skips-leaves": (r"needle/test_(ops::op_backward|topo::topo_chain)", {"find_topo_sort"}),
    # backward skips the leaves before storing: "x.grad is not set" in a case that reads it, once
    # laid at no part; and a leaf that feeds a detach() and got nothing, once laid at detach
    # an input got another's gradient, of another shape: a later op raised (once laid at that
    # op's compute or rule), or it fed a detach() (once laid at detach)
    "needle/backward-pairs-reversed": (
        r"needle/test_(lazy::lazy_backward|detach::detach_mid_graph|hidden_graph::hidden_mixed_partials)",
        {"backward"},
    ),
    "needle/backward-skips-leaves": (
        r"needle/test_(composite::sgd_steps|detach::detach_mid_graph)",
        {"backward"},
    ),
    # its own walk (a function nested in backward) recursed past Python's limit on the deep
    # chains: backward's, as micrograd's build_topo is (once laid at `...variables.build`)
    "needle/backward-walks-its-own-order": (
        r"needle/test_(topo::(deep_chain|chain_of)|hidden_graph::hidden_deep)",
        {"backward"},
    ),
    # a backward that recursed once per node: Python's limit stopped it inside MulScalar's rule,
    # where the failure was laid (the rule is right); the recursing function is backward's
    "needle/backward-recursive-push": (
        r"needle/test_(topo::(deep_chain|chain_of)|hidden_graph::hidden_deep)",
        {"backward"},
    ),
    "needle/mulscalar-passes-unchanged": (r"needle/test_hidden_graph::hidden_mixed_partials", {"MulScalar"}),
}


@pytest.mark.parametrize("name", LAID_AT)
def test_each_failure_is_laid_at_the_part_that_is_wrong(name, cases, oracle, tmp_path):
    """As the class dashboard counts them: no failure of these bugs is laid at a part that
    is right (where an exception surfaced, say) or at no one; each once was."""
    pattern, culprits = LAID_AT[name]
    assignment, bug = name.split("/")
    bank = BY_NAME if assignment == "micrograd" else {b.name: b for b in NEEDLE_BANK}
    laid = blames(bank[bug], chosen(cases, pattern), oracle, tmp_path)
    assert laid and set(laid.values()) == culprits, laid


WALKS_FORWARD = Bug(
    "backward-walks-forward",
    "backward walks find_topo_sort's list from its first node, not in reverse",
    [
        (
            AUTOGRAD,
            "    for node in reversed(find_topo_sort([output_tensor])):\n",
            "    for node in find_topo_sort([output_tensor]):\n",
        )
    ],
)


def test_backward_tripping_over_the_order_is_laid_at_the_sort_only_when_the_sort_is_wrong(
    cases, oracle, tmp_path
):
    """backward's KeyError for a node no op has sent adjoints yet says only that the order it
    walked was wrong, and the message says so whichever is wrong. Where find_topo_sort's own
    cases find a node listed before its inputs, it is laid at the sort (a public case only by
    public ones); where the sort is right, backward walked it the wrong way, and it stays
    laid at backward."""
    pre_order_sort = {b.name: b for b in NEEDLE_BANK}["topo-pre-order"]
    picked = chosen(cases, r"^needle/test_(topo|broadcast)::")
    pre_order = run(pre_order_sort, picked, oracle, tmp_path / "pre")
    forward = run(WALKS_FORWARD, picked, oracle, tmp_path / "forward")
    tripped = {i for i, r in forward.items() if r.slip == "reached-too-early"}
    assert tripped and {i for i, r in pre_order.items() if r.slip == "reached-too-early"} == tripped
    assert {pre_order[i].blame for i in tripped} == {"find_topo_sort"}
    assert {forward[i].blame for i in tripped} == {"backward"}
    assert "find_topo_sort" not in {r.blame for r in forward.values() if not r.passed}, forward
    said = {run_[i].message.split("\n")[1].strip() for run_ in (pre_order, forward) for i in tripped}
    assert said == {needle_hints.ORDER}, said
    # the sort's only failing cases hidden: the public cases stay laid at backward
    no_public_sort = run(
        pre_order_sort, chosen(cases, r"^needle/test_(broadcast|hidden_graph)::"), oracle, tmp_path
    )
    public = {r.blame for r in no_public_sort.values() if not r.passed and not r.hidden}
    assert public == {"backward"}, no_public_sort


def test_a_case_without_a_tape_says_why_it_names_no_rule(cases, oracle, tmp_path):
    """A case too big to record its nodes (`trace=False`) can only list the results that
    differ: it says so, and where to look; a case with a tape names the rule instead."""
    from grader.assignments.micrograd import hints

    deep, small = "hidden_graph::hidden_deep_mixed_chain", "accumulation::(mul_self|leaf_on_many)"
    picked = chosen(cases, rf"^micrograd/test_({deep}|{small})")
    untraced = {c.id for c in picked if not c.trace}
    messages = failed(run(BY_NAME["mul-assigns"], picked, oracle, tmp_path))
    assert untraced and untraced < set(messages), messages
    assert all((hints.NO_TAPE in m) == (i in untraced) for i, m in messages.items()), messages


def test_a_case_without_a_tape_is_laid_where_the_smaller_ones_are(cases, oracle, tmp_path):
    """For the class's counts: where the failing cases with a tape all name one part, a
    failing case without one is laid there too, but a public case only by public ones."""
    deep = "micrograd/test_deep::chain_of_a_hundred_thousand"
    bug = BY_NAME["pow-off-by-one"]
    public, hidden = chosen(cases, r"^micrograd/test_ops::"), chosen(cases, r"^micrograd/test_hidden_ops::")
    by_public = blames(bug, [*chosen(cases, deep), *public], oracle, tmp_path / "public")
    assert by_public[deep] == "pow" and set(by_public.values()) == {"pow"}, by_public
    by_hidden = blames(bug, [*chosen(cases, deep), *hidden], oracle, tmp_path / "hidden")
    assert by_hidden[deep] == "" and set(by_hidden.values()) == {"pow", ""}, by_hidden


#: backward() runs every closure but ReLU's: the tape's own ReLU cases say backward() ran
#: a right rule wrongly, but an MLP's ReLUs are inside its neurons, off the tape
SKIPS_RELU = Bug(
    "backward-skips-relu",
    "backward() runs no ReLU node's closure",
    [
        (
            ENGINE,
            "        for node in reversed(topo):\n            node._backward()\n",
            "        for node in reversed(topo):\n"
            '            if node._op != "ReLU":\n'
            "                node._backward()\n",
        )
    ],
)


def test_a_failure_its_tape_cannot_explain_is_laid_where_the_others_are(cases, oracle, tmp_path):
    """An MLP's neurons are off its tape: a backward() that skips the ReLUs fails the MLP
    cases with no rule run wrong on the tape, and the walk probe (no ReLU in it) sees nothing
    wrong either. Where the assignment's other failing cases name one part, these are laid
    there too, but a public case only by public ones."""
    mlp = "micrograd/test_mlp::mlp_backward"
    public = chosen(cases, r"^micrograd/test_accumulation::")
    hidden = chosen(cases, r"^micrograd/test_hidden_ops::.*relu")
    by_public = blames(SKIPS_RELU, [*chosen(cases, mlp), *public], oracle, tmp_path / "public")
    assert by_public[mlp] == "backward" and set(by_public.values()) == {"backward"}, by_public
    by_hidden = blames(SKIPS_RELU, [*chosen(cases, mlp), *hidden], oracle, tmp_path / "hidden")
    assert by_hidden[mlp] == "" and set(by_hidden.values()) == {"backward", ""}, by_hidden


@pytest.mark.parametrize(
    ("bug", "slip", "says", "pattern"),
    [
        ("breadth-first-order", "breadth-first", "breadth first", r"test_(mlp|accumulation)::"),
        ("topo-without-visited", "walked-again", "once for each path", r"test_(mlp|composite)::"),
    ],
)
def test_a_wrong_walk_is_named_on_the_mlp_cases_too(bug, slip, says, pattern, cases, oracle, tmp_path):
    """The MLP's neurons are off the tape, but backward()'s walk is probed on a graph of its
    own: every case a breadth-first walk, or a sort that lists a node once for each path to
    it, fails (the MLP's among them) names it and is laid at backward(), without the MLP's
    contract (the MLP is right)."""
    picked = chosen(cases, "^micrograd/" + pattern)
    results = run(BY_NAME[bug], picked, oracle, tmp_path)
    wrong = {i: r for i, r in results.items() if not r.passed}
    assert "micrograd/test_mlp::mlp_backward" in wrong and len(wrong) > 3, sorted(wrong)
    for i, r in wrong.items():
        assert (r.slip, r.blame) == (slip, "backward"), (i, r.slip, r.blame, r.message)
        assert says in r.message and "MLP(nin, nouts)" not in r.message, (i, r.message)


# ---- leaves that do not require a gradient ----

NO_GRAD_LEAVES = Bug(
    "leaves-without-requires-grad",
    "Value(data) makes a leaf with requires_grad=False, and backward() skips such nodes",
    [
        (
            ENGINE,
            '    def __init__(self, data, _children=(), _op="", label=""):\n',
            '    def __init__(self, data, _children=(), _op="", label="", requires_grad=False):\n'
            "        self.requires_grad = requires_grad or any(c.requires_grad for c in _children)\n",
        ),
        (
            ENGINE,
            "        for node in reversed(topo):\n            node._backward()\n",
            "        for node in reversed(topo):\n"
            "            if node.requires_grad:\n"
            "                node._backward()\n",
        ),
    ],
)


def test_leaves_made_without_requires_grad_are_said_to_get_no_gradient(cases, oracle, tmp_path):
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random))")
    lines = first_lines(run(NO_GRAD_LEAVES, micrograd, oracle, tmp_path), micrograd)
    assert len(lines) > 20
    assert {i: line for i, line in lines.items() if not line.endswith("received no gradient")} == {}
    message = failed(run(NO_GRAD_LEAVES, chosen(cases, r"test_ops::backward\[add\]"), oracle, tmp_path))
    assert message["micrograd/test_ops::backward[add]"].startswith("the leaves a, b received no gradient")
    assert "requires_grad = False" in message["micrograd/test_ops::backward[add]"]


# ---- repeated backward(): the tape of each call says which one went wrong ----

DETACH_AND_TWO_OUTPUTS = '''
from grader.case import case


@case("micrograd", topic="accumulation", points=1)
def test_two_outputs_and_a_detach(lib):
    """backward() from y1, then from y2 = h + h.detach(): h is an interior node of both."""
    a = lib.value(0.5, "a")
    h = a * 3.0
    y1 = h * h
    lib.backward(y1)
    y2 = h + h.detach()
    lib.backward(y2)
    return {"a": a, "h": h, "y1": y1, "y2": y2}
'''


def test_interior_gradients_not_reset_are_blamed_on_backward(oracle, tmp_path):
    """h feeds a detach(), whose rule is not probed: the snapshot after each backward() call
    shows h holding its first gradient plus its second, which is backward()'s doing."""
    suite = tmp_path / "suites" / "public" / "micrograd"
    suite.mkdir(parents=True)
    (suite / "test_repeated.py").write_text(DETACH_AND_TWO_OUTPUTS)
    mine = collect(tmp_path / "suites", ["micrograd"], ["public"])
    assert run(TANH_FROM_EXP, mine, Oracle(), tmp_path)[mine[0].id].passed  # a right engine passes
    message = failed(run(BY_NAME["double-counting"], mine, Oracle(), tmp_path))[mine[0].id]
    assert message.startswith("wrong gradient of h from backward()"), message
    assert "start the interior nodes' gradients from zero" in message and "`+=`" not in message


# ---- an MLP's failures state the MLP's contract ----

MLP_BUGS = [
    Bug(
        "mlp-last-layer-relu",
        "every layer of the MLP applies ReLU, the last one too",
        [(NN, "nonlin=i != len(nouts) - 1", "nonlin=True")],
    ),
    Bug(
        "mlp-tanh-hidden",
        "hidden neurons apply tanh instead of ReLU",
        [(NN, "return act.relu() if self.nonlin else act", "return act.tanh() if self.nonlin else act")],
    ),
    Bug(
        "mlp-other-signature",
        "MLP(nouts, nin): the arguments the other way round",
        [(NN, "    def __init__(self, nin, nouts):\n", "    def __init__(self, nouts, nin):\n")],
    ),
]


@pytest.mark.parametrize("bug", MLP_BUGS, ids=lambda bug: bug.name)
def test_every_mlp_failure_states_the_contract(bug, cases, oracle, tmp_path):
    mlp = chosen(cases, r"^micrograd/.*(mlp|zero_grad)")
    messages = failed(run(bug, mlp, oracle, tmp_path))
    assert messages
    for text in ("MLP(nin, nouts)", "called on a list", "hidden layer applies ReLU", "last layer is linear"):
        assert {i: m for i, m in messages.items() if text not in m} == {}, text


# ---- needle: the adjoint sum, an operator the student wrote, a gradient's type ----

NEEDLE_BUGS = {bug.name: bug for bug in NEEDLE_BANK}

RSUB_REVERSED = Bug(
    "rsub-reversed",
    "`2 - a` computed as `a - 2`",
    [
        (
            AUTOGRAD,
            "        return ops.AddScalar(other)(ops.Negate()(self))",
            "        return ops.AddScalar(-other)(self)",
        )
    ],
)
NUMPY_GRADIENT = Bug(
    "mul-gradient-returns-numpy",
    "EWiseMul.gradient returns NumPy arrays",
    [
        (
            OPS,
            "        lhs, rhs = node.inputs\n        return out_grad * rhs, out_grad * lhs",
            "        lhs, rhs = node.inputs\n"
            "        return out_grad.numpy() * rhs.numpy(), out_grad.numpy() * lhs.numpy()",
        )
    ],
)


def test_needle_adjoints_not_summed_are_blamed_on_the_sum(cases, oracle, tmp_path):
    needle = chosen(cases, r"^needle/(?!.*(random|deep))")
    results = run(NEEDLE_BUGS["adjoints-overwritten"], needle, oracle, tmp_path)
    messages = {i: m for i, m in failed(results).items() if i in {c.id for c in needle if c.trace}}
    assert len(messages) > 20
    blamed = {i: m.splitlines()[0] for i, m in messages.items() if m.startswith("wrong gradient from")}
    assert blamed == {}
    for wrong in ("no gradient flows through detach()", "backward ran more than once"):
        assert {i: m for i, m in messages.items() if wrong in m} == {}
    for case_id in ("needle/test_composite::partial_adjoints_summed", "needle/test_detach::detach_mid_graph"):
        assert "from compute_gradient_of_variables" in messages[case_id].splitlines()[0], messages[case_id]
        assert "only one of the partial adjoints" in messages[case_id]


def test_a_reversed_rsub_is_blamed_on_rsub(cases, oracle, tmp_path):
    rsub = [c for c in chosen(cases, r"^needle/.*rsub") if c.trace]
    messages = failed(run(RSUB_REVERSED, rsub, oracle, tmp_path))
    assert set(messages) == {c.id for c in rsub}
    for message in messages.values():
        first = message.splitlines()[0]
        assert first.startswith("wrong value from Tensor.__rsub__") and "AddScalar" not in first, message


ONE_GRADIENT = Bug(
    "mul-gradient-returns-one",
    "EWiseMul.gradient returns one gradient for its two inputs",
    [
        (
            OPS,
            "        lhs, rhs = node.inputs\n        return out_grad * rhs, out_grad * lhs",
            "        return out_grad * 1",
        )
    ],
)

#: EWiseAdd's rule returns out_grad alone: a backward through a gradient also walks the adds
#: that backward's sums of partial adjoints built, off the tape
ADD_ONE_GRADIENT = Bug(
    "add-gradient-returns-one",
    "EWiseAdd.gradient returns one gradient for its two inputs",
    [(OPS, "        return out_grad, out_grad\n", "        return out_grad\n")],
)


@pytest.mark.parametrize(
    ("bug", "op", "said"),
    [
        (NUMPY_GRADIENT, "EWiseMul", "EWiseMul.gradient returned numpy.ndarray; return Tensors"),
        (ONE_GRADIENT, "EWiseMul", "EWiseMul.gradient returned 1 gradient for its 2 inputs"),
        (ADD_ONE_GRADIENT, "EWiseAdd", "EWiseAdd.gradient returned 1 gradient for its 2 inputs"),
    ],
    ids=["numpy", "one-of-two", "one-of-two-off-the-tape"],
)
def test_a_gradient_of_the_wrong_kind_is_named_wherever_it_surfaces(bug, op, said, cases, oracle, tmp_path):
    """A rule that returns NumPy arrays, or one gradient for two inputs, is found out by the
    grader wherever the case stopped (in backward's pairing of gradients with inputs, say,
    through a gradient whose graph holds the rule's op where the case's own graph does not):
    the message says what the rule returned, and the failure is laid at that rule."""
    needle = chosen(cases, r"^needle/(?!.*(random|deep))")
    results = {i: r for i, r in run(bug, needle, oracle, tmp_path).items() if not r.passed}
    assert f"needle/test_op_gradients::op_gradient[{op}]" in results  # its own case too
    assert len(results) > 20
    assert {i: r.message for i, r in results.items() if not r.message.startswith(said)} == {}
    assert {r.blame for r in results.values()} == {op}


NEEDLE_LEAVES_WITHOUT_GRAD = Bug(
    "tensor-drops-requires-grad",
    "Tensor(array, requires_grad=True) makes a leaf with requires_grad = False",
    [
        (
            AUTOGRAD,
            "        self._init(None, [], cached_data=cached_data, requires_grad=requires_grad)",
            "        self._init(None, [], cached_data=cached_data, requires_grad=False)",
        )
    ],
)


def test_needle_leaves_without_requires_grad_are_said_to_get_no_gradient(cases, oracle, tmp_path):
    needle = [c for c in chosen(cases, r"^needle/(?!.*(random|deep))") if c.trace]
    messages = failed(run(NEEDLE_LEAVES_WITHOUT_GRAD, needle, oracle, tmp_path))
    assert len(messages) > 50
    assert {i: m for i, m in messages.items() if "requires_grad = False" not in m} == {}
    assert {i: m for i, m in messages.items() if m.startswith("wrong gradient from")} == {}
    add = messages["needle/test_ops::op_backward[add]"]
    assert add.startswith("the leaves a, b received no gradient"), add


# ---- the words: one hints.py per assignment, the same names in each ----


def test_every_assignment_has_the_same_hints():
    from grader.assignments import NAMES
    from grader.assignments.micrograd.backend import ProbeLeaf, composite_parts
    from grader.verdict.diagnose import hints_for

    public = {
        name: {
            n
            for n in vars(hints_for(name))
            if (n.isupper() and not n.startswith("_")) or n in ("op_class", "function_blame")
        }
        for name in NAMES
    }
    assert len({frozenset(names) for names in public.values()}) == 1, public
    built = hints_for("micrograd").BUILT_FROM
    for op, parts in built.items():
        x, y = ProbeLeaf(0, 2.0), ProbeLeaf(1, 3.0)
        probed = composite_parts(op, [x, y]) or composite_parts(op, [x, 3.0])
        assert [p for p, _ in probed] == [p for p, _ in parts], op


# ---- an engine that keeps its gradients as NumPy arrays ----

GRADS_AS_ARRAYS = Bug(
    "grads-as-arrays",
    "a correct engine whose gradients are 0-d NumPy arrays, and whose add rule reads their shape",
    [
        (ENGINE, "import math\n", "import math\n\nimport numpy as np\n"),
        (ENGINE, "        self.grad = 0.0\n", "        self.grad = np.zeros(())\n"),
        (ENGINE, "                node.grad = 0.0\n", "                node.grad = np.zeros(())\n"),
        (ENGINE, "        self.grad = 1.0\n", "        self.grad = np.ones(())\n"),
        (
            ENGINE,
            "            self.grad += out.grad\n            other.grad += out.grad\n",
            "            self.grad += out.grad.reshape(self.grad.shape)\n"
            "            other.grad += out.grad.reshape(other.grad.shape)\n",
        ),
        (NN, "import random\n", "import random\n\nimport numpy as np\n"),
        (NN, "            p.grad = 0.0\n", "            p.grad = np.zeros(())\n"),
    ],
)


def test_gradients_are_probed_in_the_engines_own_type(cases, oracle, tmp_path):
    """The rule probes and the rule cases set a gradient as the engine keeps it (here a 0-d
    array), so a correct engine that reads its gradients' shape passes."""
    micrograd = chosen(cases, r"^micrograd/(?!.*(deep|random|mlp))")
    assert failed(run(GRADS_AS_ARRAYS, micrograd, oracle, tmp_path)) == {}


def test_detach_is_hinted_only_where_it_is_at_fault(cases, oracle, tmp_path):
    """A wrong rule upstream of a detach() is named without the detach() hint; a detach()
    that keeps its inputs, behind rules that are right, is blamed on detach()."""
    mid = chosen(cases, r"^needle/test_detach::detach_mid_graph$")
    tanh = failed(run(NEEDLE_BUGS["tanh-derivative"], mid, oracle, tmp_path / "tanh"))
    assert tanh and all("from tanh" in m and "detach()" not in m for m in tanh.values()), tanh
    results = run(NEEDLE_BUGS["detach-keeps-inputs"], mid, oracle, tmp_path / "detach")
    assert [r.blame for r in results.values() if not r.passed] == ["detach"]


def test_the_higher_order_hint_is_given_only_where_a_rule_is_not_differentiable(cases, oracle, tmp_path):
    """Backward through a gradient went wrong, but every rule's result was differentiated
    again fine (the probe): telling the student to build gradients from needle's ops misleads."""
    from grader.assignments.needle.hints import HIGHER_ORDER

    bug = NEEDLE_BUGS["grads-accumulate-across-backward"]
    messages = failed(run(bug, chosen(cases, r"needle/test_higher_order::"), oracle, tmp_path))
    assert messages and not [i for i, m in messages.items() if HIGHER_ORDER in m], messages


def test_a_value_gone_wrong_before_an_exception_is_named_in_the_sandbox_too(cases, oracle, tmp_path):
    """The worker reads a case's tape up to where it raised, when asked: log raised on the
    negative number rsub made, and rsub is named, the exception after it."""
    from tests.harness.grading import grade

    submission = materialize(BY_NAME["rsub-reversed"], tmp_path / "rsub")
    loss = lambda case: case.id.endswith("hidden_log_sigmoid_loss")  # noqa: E731
    [result] = grade(submission, "hidden", ("micrograd",), oracle=oracle, keep=loss).results
    assert result.message.startswith("wrong value from Value.__rsub__"), result.message
    assert "and then the case raised: ValueError in Value.log" in result.message


@pytest.mark.parametrize("sandbox", [False, True], ids=["in-process", "sandbox"])
def test_an_exception_in_given_code_names_the_students_line_that_called_it(cases, oracle, tmp_path, sandbox):
    """Reshape.compute, which the template gives whole, raises on the shape a helper of the
    student's handed it (`_sum_to_shape`, which BroadcastTo's and MatMul's rules share): the
    message keeps the place it was raised and names the student's own line that called it,
    with the rule that was running. It named only the given line and the rule, not the
    helper where the mistake is."""
    from tests.harness.grading import grade

    submission = materialize(NEEDLE_BUGS["broadcast-axes-from-the-left"], tmp_path / "left")
    ids = (
        "needle/test_broadcast::broadcast_gradient[prepend]",
        "needle/test_finite_differences::fd_softmax_loss",
    )
    report = grade(
        submission, "public", ("needle",), oracle=oracle, sandbox=sandbox, keep=lambda c: c.id in ids
    )
    messages = {r.id: r.message for r in report.results if not r.passed}
    assert messages.keys() == set(ids), messages
    helper = re.compile(
        r"^ValueError in Reshape\.compute \(ops\.py, line \d+\): cannot reshape .* \(called from "
        r"_sum_to_shape, ops\.py line \d+, while running (\w+)\.gradient, ops\.py line \d+\)$"
    )
    running = {i: helper.match(m.splitlines()[0]) for i, m in messages.items()}
    assert {i: m and m[1] for i, m in running.items()} == dict(
        zip(ids, ("BroadcastTo", "MatMul"), strict=True)
    ), messages


def survey() -> int:
    """Every bug of both banks graded on every case of its assignment: what its failures are
    laid at (the rule the class dashboard counts each under; "-" for no one), one line a bug."""
    import collections
    import tempfile

    oracle = Oracle()
    for assignment, bank in (("micrograd", list(BY_NAME.values())), ("needle", NEEDLE_BANK)):
        every = collect(REPO / "tests", [assignment], ["public", "hidden"])
        oracle.prepare(every)
        for bug in bank:
            with tempfile.TemporaryDirectory() as tmp:
                laid = blames(bug, every, oracle, Path(tmp))
            counts = collections.Counter(blame or "-" for blame in laid.values())
            print(f"{assignment:9} {bug.name:34} {len(laid):4} failed, laid at {dict(counts.most_common())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(survey())
