"""Messages that name the slip, not only the place.

Each bug of the banks (tests/harness/bugs/) carries, beside `says` (the place: the op, the
function), `slip`: the words that name the mistake itself and its fix, as the assignment's
catalogue of slips (`grader/assignments/<name>/slips.py`) writes them. `named` grades every
bug's `caught_by` cases and counts the messages that carry those words; run this file to
print the count:

    python -m tests.harness.test_slips
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from grader.case.define import Case, collect
from grader.case.limits import Limits
from grader.pipeline import REPO, run_in_process, score
from grader.verdict.diagnose import slips_for
from grader.verdict.oracle import Oracle
from tests.harness.bugs import Bug, materialize
from tests.harness.bugs.micrograd import BUGS as MICROGRAD
from tests.harness.bugs.micrograd import BY_NAME
from tests.harness.bugs.needle import BUGS as NEEDLE

BANKS = {"micrograd": MICROGRAD, "needle": NEEDLE}


def key(case: Case) -> str:
    """How a bug's `caught_by` patterns name a case: `module::name[param]`."""
    return case.id.split("/", 1)[1]


def caught_by(bug: Bug, cases: list[Case]) -> list[Case]:
    """The cases a bug's `caught_by` patterns (`*` a wildcard) select, each once."""
    chosen: list[Case] = []
    for pattern in bug.caught_by:
        rx = re.compile(".*".join(re.escape(part) for part in pattern.split("*")))
        chosen += [c for c in cases if rx.fullmatch(key(c)) and c not in chosen]
    return chosen


def names_slip(bug: Bug, message: str) -> bool:
    """Does the message carry the words that name the bug's slip (case aside)?"""
    return bool(bug.slip) and all(words.lower() in message.lower() for words in bug.slip)


@dataclass
class Count:
    """Over one bank: the messages of the failing cases of its bugs that make a slip, and
    those naming it."""

    messages: int = 0
    naming: int = 0
    #: bug -> (messages naming its slip, its messages)
    by_bug: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the catalogued slips the messages named (`CaseResult.slip`)
    slips: set[str] = field(default_factory=set)
    #: (bug, case) whose message names a slip and still repeats a hint the slip replaces
    repeated: list[tuple[str, str]] = field(default_factory=list)


def named(assignment: str, oracle: Oracle, workdir: Path, bugs: list[Bug] | None = None) -> Count:
    """Grade each bug's `caught_by` cases (in this process) and count the messages of its
    failing cases that name its slip."""
    cases = collect(REPO / "tests", [assignment], ["public", "hidden"])
    catalogue = {slip.name: slip for slip in slips_for(assignment)}
    count = Count()
    for bug in BANKS[assignment] if bugs is None else bugs:
        chosen = caught_by(bug, cases)
        submission = materialize(bug, workdir / bug.name)
        failed = [r for r in score(chosen, oracle, run_in_process(submission, chosen), {}) if not r.passed]
        naming = sum(names_slip(bug, r.message) for r in failed)
        count.by_bug[bug.name] = (naming, len(failed))
        if bug.slip:  # (a bug of a rule's own arithmetic makes no slip to name)
            count.messages += len(failed)
            count.naming += naming
        count.slips |= {r.slip for r in failed if r.slip}
        count.repeated += [
            (bug.name, r.id)
            for r in failed
            if r.slip and any(hint in r.message for hint in catalogue[r.slip].replaces)
        ]
    return count


@pytest.mark.parametrize("assignment", sorted(BANKS))
def test_each_catalogued_slip_is_named_where_it_is_made(assignment, oracle, tmp_path):
    """Each bug that makes a catalogued slip, applied to the reference, fails with a message
    naming the slip, and not repeating it in a hint's vaguer words; and every slip of the
    catalogue is made by some bug of the bank."""
    count = named(assignment, oracle, tmp_path)
    silent = {
        bug.name: count.by_bug[bug.name]
        for bug in BANKS[assignment]
        if bug.slip and count.by_bug[bug.name][0] != count.by_bug[bug.name][1]
    }
    assert not silent, f"messages that do not name the slip (naming/failed): {silent}"
    assert set(count.slips) == {slip.name for slip in slips_for(assignment)}
    assert not count.repeated, f"a slip's line, then a hint that says it again: {count.repeated}"


def test_the_mlp_contract_is_stated_only_when_the_mlp_is_at_fault(oracle, tmp_path):
    """A wrong rule that an MLP runs on is named, without the MLP's contract (the student's
    nn.py is right), and so is an exception raised in Value's own methods as the MLP runs
    them; a wrong MLP gets the contract."""
    cases = [c for c in collect(REPO / "tests", ["micrograd"], ["public"]) if "test_mlp::" in c.id]
    rule = materialize(BY_NAME["mul-assigns"], tmp_path / "rule")
    failed = [r for r in score(cases, oracle, run_in_process(rule, cases), {}) if not r.passed]
    assert failed and all(r.blame == "mul" and "MLP contract" not in r.message for r in failed)
    assert all("(`+=`)" in r.message for r in failed)
    unhashable = materialize(BY_NAME["value-eq-unhashable"], tmp_path / "unhashable")
    failed = [r for r in score(cases, oracle, run_in_process(unhashable, cases), {}) if not r.passed]
    assert failed and all(r.blame == "Value.__eq__" and "MLP contract" not in r.message for r in failed)
    mlp = materialize(BY_NAME["hidden-layers-linear"], tmp_path / "mlp")
    failed = [r for r in score(cases, oracle, run_in_process(mlp, cases), {}) if not r.passed]
    assert failed and all("MLP contract" in r.message for r in failed)


def test_a_slip_laid_at_another_rule_is_named_first(oracle, tmp_path):
    """A detach() the gradient flows through shows as a wrong gradient from the op that uses
    the detached node: the first line names detach, and where it showed comes after."""
    bug = BY_NAME["detach-returns-self"]
    chosen = caught_by(bug, collect(REPO / "tests", ["micrograd"], ["public", "hidden"]))
    submission = materialize(bug, tmp_path / bug.name)
    failed = [r for r in score(chosen, oracle, run_in_process(submission, chosen), {}) if not r.passed]
    firsts = [r.message.splitlines()[0] for r in failed]
    assert any("where it shows: wrong gradient from mul" in r.message for r in failed)
    assert [f for f in firsts if f.startswith("wrong gradient from") and "from detach" not in f] == []


#: (bug, case) where what the bug's rule sends, probed alone, is also what another slip's rule
#: sends: sigmoid(40) is 1, so `out.data * out.grad` is out.grad unchanged; exp's input is 1
#: in logsumexp's exp(x - max), where `x` and `exp(x)` are the same; and at 0 * 7, mul's rule
#: that gives self its own value sends nothing, as a rule that never runs
CONFUSABLE = [
    ("sigmoid-factor-left-out", "micrograd/test_ops::rule[sigmoid-large]"),
    ("exp-uses-input", "micrograd/test_hidden_composite::hidden_logsumexp"),
    ("mul-own-input", "micrograd/test_hidden_ops::hidden_rule[mul]"),
]


@pytest.mark.parametrize(("name", "case_id"), CONFUSABLE)
def test_a_fingerprint_two_slips_share_names_neither(name, case_id, oracle, tmp_path):
    """Where a rule's probe fits two slips, the message names no slip: a wrong name sends a
    student to fix what is right. The place and the numbers still say what differs."""
    cases = [c for c in collect(REPO / "tests", ["micrograd"], ["public", "hidden"]) if c.id == case_id]
    submission = materialize(BY_NAME[name], tmp_path / name)
    (result,) = score(cases, oracle, run_in_process(submission, cases), {})
    assert not result.passed
    assert not result.slip or names_slip(BY_NAME[name], result.message), result.message


#: (bug, case) where the bug's numbers are also another slip's, and the line says both: at
#: n = -1, PowerScalar's gradient without its factor n is PyTorch's with the sign flipped
SAME_NUMBERS = [
    ("power-scalar-factor-left-out", "needle/test_ops::op_backward[rdiv]", "or has its sign flipped"),
]


@pytest.mark.parametrize(("name", "case_id", "both"), SAME_NUMBERS)
def test_where_two_slips_give_the_same_numbers_the_line_says_both(name, case_id, both, oracle, tmp_path):
    """3.0 / a runs PowerScalar at n = -1: a rule that leaves out the factor n and one that
    loses a minus sign send the same gradient there. The line names the slip the exponent
    makes likelier and says that the other fits too, not the sign alone (a student who left
    out n would hunt for a minus sign that is not missing)."""
    bug = next(b for b in NEEDLE if b.name == name)
    cases = [c for c in collect(REPO / "tests", ["needle"], ["public", "hidden"]) if c.id == case_id]
    submission = materialize(bug, tmp_path / name)
    (result,) = score(cases, oracle, run_in_process(submission, cases), {})
    assert result.slip == "power-factor-left-out" and result.blame == "PowerScalar", result.message
    assert names_slip(bug, result.message) and both in result.message, result.message


#: micrograd's backward() with every gradient right but the output's own, zeroed after the pass
OUTPUT_GRAD_ZEROED = Bug(
    "output-grad-zeroed",
    "backward() zeroes the output's own gradient once the closures have run",
    [
        (
            "micrograd/engine.py",
            "        for node in reversed(topo):\n            node._backward()\n",
            "        for node in reversed(topo):\n            node._backward()\n        self.grad = 0.0\n",
        )
    ],
)
OUTPUT_GRAD_BUGS = {
    "micrograd": OUTPUT_GRAD_ZEROED,
    "needle": next(bug for bug in NEEDLE if bug.name == "output-grad-unset"),
}


@pytest.mark.parametrize("assignment", sorted(BANKS))
def test_the_output_gradient_costs_one_case(assignment, oracle, tmp_path):
    """A backward() that gets every gradient right but the output's own fails the one case
    that checks it, and no case without a tape (a 10**5-op chain), which knows its output
    all the same."""
    cases = collect(REPO / "tests", [assignment], ["public", "hidden"])
    chosen = [c for c in cases if not c.trace or c.name == "output_gradient"]
    assert len(chosen) > 3
    submission = materialize(OUTPUT_GRAD_BUGS[assignment], tmp_path / assignment)
    results = score(chosen, oracle, run_in_process(submission, chosen), {})
    assert [r.id for r in results if not r.passed] == [f"{assignment}/test_composite::output_gradient"]


def _detach_and_order(lib):
    """A graph with a detach(), whose topological order is the result."""
    a = lib.tensor(np.array([[1.0, 2.0]]), "a")
    b = lib.tensor(np.array([[3.0, -1.0]]), "b")
    d = (a * b).detach()
    return {"topological order": lib.topo_order(((d + a) * b).sum())}


def test_a_wrong_order_in_a_graph_with_a_detach_is_not_blamed_on_detach(oracle, tmp_path):
    """A find_topo_sort that appends a node before its inputs, on a graph that has a detach():
    the message names the order's slip, and says nothing of detach(), which is right."""
    from grader.assignments.needle import hints

    case = Case("needle", "topo", "detach_and_order", _detach_and_order, "test_slips")
    bug = next(bug for bug in NEEDLE if bug.name == "topo-pre-order")
    submission = materialize(bug, tmp_path / bug.name)
    (result,) = score([case], oracle, run_in_process(submission, [case]), {})
    assert not result.passed and names_slip(bug, result.message), result.message
    assert hints.DETACH not in result.message and "detach" not in result.message, result.message


@pytest.mark.parametrize(
    "bug, says", [(None, 0.0), ("grads-accumulate-across-backward", 1.0), ("numpy-gradients", 0.0)]
)
def test_backward_is_tried_twice_on_a_fresh_graph(bug, says, tmp_path):
    """What a case that differentiates a gradient learns of backward itself: run twice on a
    fresh graph, does it leave twice the first gradients (it adds to what an earlier backward
    left)? Not for the reference, nor for a submission whose rules are wrong but whose
    backward assigns."""
    from grader import assignments

    needle = assignments.get("needle")
    found = {b.name: b for b in NEEDLE}
    submission = REPO / "reference" if bug is None else materialize(found[bug], tmp_path / bug)
    probe = needle.engine(needle.load(submission), trace=True)._carries_over()
    assert probe is not None and probe.data == (says,)


def every_case(assignment: str, oracle: Oracle, workdir: Path) -> tuple[int, int]:
    """Grade every bug of the bank on every case of its assignment (in this process): (the
    failures whose message names a slip of the catalogue, all its failures). A wider figure
    than `named`'s: it counts, too, the cases a bug fails that its `caught_by` leaves out."""
    cases = collect(REPO / "tests", [assignment], ["public", "hidden"])
    failed = []
    for bug in BANKS[assignment]:
        submission = materialize(bug, workdir / bug.name)
        failed += [r for r in score(cases, oracle, run_in_process(submission, cases), {}) if not r.passed]
    return sum(bool(r.slip) for r in failed), len(failed)


def main(argv: list[str]) -> int:
    """`python -m tests.harness.test_slips [--every-case]`: the counts, printed."""
    oracle = Oracle()
    total = Count()
    with tempfile.TemporaryDirectory() as tmp:
        if "--every-case" in argv:  # minutes: every bug on every case
            for assignment in BANKS:
                naming, failures = every_case(assignment, oracle, Path(tmp) / assignment)
                print(f"{assignment}, every case: {naming} of {failures} failures name a catalogued slip")
            return 0
        for assignment in BANKS:
            count = named(assignment, oracle, Path(tmp) / assignment)
            for bug, (naming, messages) in count.by_bug.items():
                print(f"  {assignment:9} {bug:36} {naming:>3}/{messages:<3}")
            print(f"{assignment}: {count.naming} of {count.messages} messages name the slip")
            total.messages += count.messages
            total.naming += count.naming
    print(f"all bug banks: {total.naming} of {total.messages} messages name the slip")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


#: bug -> the only slips its failing cases may name, over every case of its assignment: each
#: named another slip once (a relu without a mask cancelled x's gradient and was told its -x
#: was outside the graph; no seed at all was told that; a summation not broadcast back gave a
#: right MatMul the wrong out_grad, and MatMul's factors were blamed; a mul rule never set
#: was told it gave an input its own value, where that value was 0; a seed set after the
#: closures was told they ran in topological order; an __rmul__ calling itself was told to
#: write the sort without recursion)
ONLY_SLIPS = {
    ("micrograd", "relu-no-mask"): {"relu-passes-negative", "relu-slope-at-zero"},
    ("micrograd", "no-seed"): set(),
    ("micrograd", "closures-in-topological-order"): {"topological-order"},
    ("micrograd", "mul-rule-not-set"): {"adds-nothing"},
    ("micrograd", "seeded-after-the-pass"): {"nothing-passed-on"},
    ("micrograd", "rmul-calls-itself"): {"calls-itself"},
    ("needle", "rsub-calls-itself"): {"calls-itself"},
    # its own slip alone: at x = 0 (a * x = e for any a), or x = -2 and n = -1, it matched
    # the wrong power's and the missing chain rule's fingerprints
    ("micrograd", "pow-precedence"): {"power-precedence"},
    # its closures ran again: where the gradients are whole multiples, it says which node's
    # and how often; elsewhere, the walk probe's graph shows a closure run twice
    ("micrograd", "topo-without-visited"): {"rule-run-again", "walked-again"},
    ("needle", "summation-not-broadcast-back"): {"not-broadcast-back"},
    # the rules pass on the output's out_grad, shape and all: on the 10^5 chains, with no tape
    # to tell a rule's shape from backward's, the gradient's shape was blamed on a rule
    ("needle", "backward-passes-its-out-grad"): {"output-grad-to-every-rule"},
    # its rule has no graph back to out_grad, as one computed in NumPy has: it was told so
    ("needle", "exp-without-out-grad"): {"no-chain-rule"},
    # where backward's sum broadcast its (4, 1, 3) against a (4, 3), it was told to sum axes
    ("needle", "reshape-gradient-unchanged"): {"reshape-not-undone"},
    # its sort lists a node once per path to it: the sort's cases see it in the order, the
    # others in how often the sort lists each node their outputs depend on
    ("needle", "topo-without-visited"): {"listed-again"},
    # its own order (micrograd's build_topo without `visited`): where each gradient is one
    # multiple of PyTorch's, that node's adjoints added again; elsewhere, the probe's b + b; on
    # the deep chains, its walk's recursion (once laid at `compute_gradient_of_variables.build`)
    ("needle", "backward-walks-its-own-order"): {"adjoints-added-again", "processed-again", "recursive-sort"},
}


#: the cases' time limit here: a case that runs out of time names no slip, and these bugs'
#: cases take well under it, but for the 10^5-op chains a sort without `visited` never ends
#: (with it, the same slips and the same failures as the default 10 s, in a third of the time)
SHORT = Limits(timeout=2.0)


# a case timed out in process may have its alarm ring inside a __del__ (needle's Tensor's),
# where Python only prints the exception; it rings again (`hang._alarm`), and the case times out
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(("assignment", "name"), sorted(ONLY_SLIPS))
def test_no_message_names_a_slip_the_bug_did_not_make(assignment, name, oracle, tmp_path):
    """A slip's line says what the student did wrong: where it is not what they did, it sends
    them after the wrong fix. Over every case, the bug's failures name only its own slips."""
    bug = next(b for b in BANKS[assignment] if b.name == name)
    cases = collect(REPO / "tests", [assignment], ["public", "hidden"])
    submission = materialize(bug, tmp_path / name)
    runs = run_in_process(submission, cases, SHORT)
    named = {r.slip for r in score(cases, oracle, runs, {}) if not r.passed and r.slip}
    assert named <= ONLY_SLIPS[assignment, name]
