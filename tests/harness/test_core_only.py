"""Every case tests one thing: an engine without tanh, exp or Tensor**Tensor still hears
about its accumulation, its depth, its repeated backward and its higher-order gradients.

Cases about those behaviours use only the core ops (add, mul, a power by a number, sum,
matmul), or have a twin named `<name>_core` that does. A case that needs an op the
submission lacks is "not graded: needs tanh" (0 points, its own status), never a failure
of what it tests; the untouched template, whose rules raise NotImplementedError, is not
"lacking" anything: its gradients fail as "not implemented yet".
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from grader.assignments.micrograd import CORE as MICROGRAD_CORE
from grader.assignments.needle import CORE as NEEDLE_CORE
from grader.case.define import collect
from grader.pipeline import SUITES_DIR, Request, grade_submission
from grader.report.gradescope import gradescope
from grader.report.markdown import markdown
from grader.report.model import Audience, Report, Status
from grader.report.terminal import print_report, topic_lines
from tests.harness.without_ops import REMOVED, REPO, reference_without

CORE = {"micrograd": set(MICROGRAD_CORE), "needle": set(NEEDLE_CORE)}
#: the topics whose every case is about accumulation, depth or higher-order gradients
BEHAVIOUR_TOPICS = {("micrograd", "accumulation"), ("micrograd", "deep"), ("needle", "higher-order")}
#: needle's cases about the same behaviours in other topics (repeated backward, adjoints
#: summed, depth, a lazy second order)
BEHAVIOUR_CASES = {
    "partial_adjoints_summed",
    "diamond",
    "backward_twice_assigns",
    "backward_of_two_outputs",
    "deep_chain",
    "hidden_deep_backward",
    "hidden_lazy_higher_order",
}


@pytest.fixture(scope="module")
def reduced(tmp_path_factory) -> Path:
    return reference_without(tmp_path_factory.mktemp("without-tanh-exp-pow"))


@pytest.fixture(scope="module")
def report(reduced, oracle) -> Report:
    return grade_submission(reduced, Request("all", None, sandbox=False), oracle)


def base(name: str) -> str:
    return name.split(" [")[0]


def behaviours(report: Report) -> list:
    return [
        r
        for r in report.results
        if (r.assignment, r.topic) in BEHAVIOUR_TOPICS
        or base(r.name).removesuffix("_core") in BEHAVIOUR_CASES
    ]


def test_every_behaviour_case_is_core_only_or_has_a_core_twin(report, oracle):
    """Statically, from what each case needed on PyTorch: no removal needed to see it."""
    cases = collect(SUITES_DIR, ("micrograd", "needle"), ("public", "hidden"))
    needs = {case.id: oracle.needs(case) for case in cases}
    names = {(r.assignment, base(r.name)): r for r in report.results}
    for r in behaviours(report):
        if needs[r.id] <= CORE[r.assignment]:
            continue
        twin = names.get((r.assignment, base(r.name) + "_core"))
        assert twin is not None, f"{r.id} needs {needs[r.id] - CORE[r.assignment]} and has no _core twin"
        assert needs[twin.id] <= CORE[r.assignment], f"{twin.id} needs {needs[twin.id] - CORE[r.assignment]}"


def test_without_tanh_exp_and_pow_every_behaviour_is_still_graded(report, record_property):
    removed = {op for ops in REMOVED.values() for op in ops}
    wrong = [
        (r.id, r.status, r.message[:200]) for r in report.results if r.status not in PASSED_OR_NOT_GRADED
    ]
    assert not wrong, wrong  # the rest of the reference is right: nothing else may fail
    for r in report.results:
        if r.status is Status.NOT_GRADED:
            assert set(r.missing) <= removed and r.missing, r
            assert r.message.startswith(f"not graded: needs {', '.join(r.missing)}")
            assert r.points == 0 and r.max_points > 0
    graded: Counter[tuple[str, str]] = Counter()
    for r in behaviours(report):
        if r.passed:
            graded[r.assignment, r.topic] += 1
            continue
        twin = base(r.name) + "_core"
        assert any(base(t.name) == twin and t.passed for t in report.results), f"{r.id}: no graded twin"
    for assignment, topic in BEHAVIOUR_TOPICS:
        assert graded[assignment, topic] >= 3, (assignment, topic, graded)
    rows = {f"{row.assignment}/{row.topic}": f"{row.passed} graded, {row.not_graded} not graded"
            for row in report.topics()}  # fmt: skip
    print("cases graded per topic, reference without", ", ".join(sorted(removed)))
    for key, text in rows.items():
        print(f"  {key}: {text}")
    record_property("graded_per_topic", json.dumps(rows))
    assert report.score < report.max_score  # the cases that need them still count


PASSED_OR_NOT_GRADED = (Status.PASSED, Status.NOT_GRADED)


def test_not_graded_is_its_own_status_in_every_rendering(report):
    ungraded = [r for r in report.results if r.status is Status.NOT_GRADED]
    out = io.StringIO()
    print_report(report, Console(file=out, width=250), audience=Audience.INSTRUCTOR)
    terminal = out.getvalue()
    assert "not graded" in terminal and "need tanh, which the submission does not have" in terminal
    assert "FAILED" not in terminal and "NOT GRADED" not in terminal  # not shown as failures
    feedback = markdown(report, Audience.INSTRUCTOR)
    assert "## Not graded" in feedback and "- needs Tanh: " in feedback and "## Failed cases" not in feedback
    results = gradescope(report)
    tagged = [t for t in results["tests"] if "not graded" in t.get("tags", [])]
    public_ungraded = [r for r in ungraded if not r.hidden]
    assert len(tagged) == len(public_ungraded) and all(t["score"] == 0 for t in tagged)
    assert all(t["output"].startswith("not graded: needs ") for t in tagged)
    assert "Not graded: " in results["output"]
    lines = [line for line, _ in topic_lines(report, report.results)]
    assert any("not graded)" in line for line in lines)
    assert Report.from_plain(report.to_plain()).results == report.results  # survives JSON


def test_the_sandbox_reports_not_graded_cases(reduced, oracle):
    """The worker's answer carries what is missing; the grader scores it."""
    wanted = {"backward[tanh]", "backward[add]", "op_gradient[EWisePow]", "op_gradient[EWiseMul]"}
    request = Request("public", None, keep=lambda c: c.title.replace(" ", "") in wanted)
    report = grade_submission(reduced, request, oracle)
    statuses = {r.name.replace(" ", ""): (r.status, r.missing) for r in report.results}
    assert statuses == {
        "backward[tanh]": (Status.NOT_GRADED, ["tanh"]),
        "backward[add]": (Status.PASSED, []),
        "op_gradient[EWisePow]": (Status.NOT_GRADED, ["EWisePow"]),
        "op_gradient[EWiseMul]": (Status.PASSED, []),
    }


def test_the_untouched_template_lacks_nothing(oracle):
    """Its rules raise NotImplementedError inside `_backward` and `gradient`: those cases
    fail as "not implemented yet", they are never "not graded"."""
    report = grade_submission(REPO / "student_template", Request("public", None, sandbox=False), oracle)
    assert not [r for r in report.results if r.status is Status.NOT_GRADED]
    assert any("not implemented yet" in r.message for r in report.results)


def _edit(root: Path, package: str, module: str, old: str, new: str) -> None:
    path = root / package / module
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def edited(tmp_path) -> Path:
    for name in ("micrograd", "needle"):
        shutil.copytree(REPO / "reference" / name, tmp_path / name)
    return tmp_path


def test_what_counts_as_lacking(edited, oracle):
    """NotImplementedError in an op's forward: lacking. Any other error in a forward, or
    NotImplementedError in a rule: graded, and failed."""
    # tanh's forward says it is not written; log's forward is broken; exp's rule is not written
    _edit(
        edited,
        "micrograd",
        "engine.py",
        "    def tanh(self):\n",
        "    def tanh(self):\n        raise NotImplementedError\n",
    )
    _edit(
        edited,
        "micrograd",
        "engine.py",
        "    def log(self):\n",
        "    def log(self):\n        raise ValueError('oops')\n",
    )
    _edit(
        edited,
        "micrograd",
        "engine.py",
        "            self.grad += out.data * out.grad",
        "            raise NotImplementedError('exp rule')",
    )
    # needle's own homework: Tensor ** Tensor raises NotImplementedError until it is written
    _edit(
        edited,
        "needle",
        "autograd.py",
        "            return ops.EWisePow()(self, other)",
        "            raise NotImplementedError()",
    )
    # no reflected subtraction at all
    _edit(
        edited, "micrograd", "engine.py", "    def __rsub__(self, other):", "    def _no_rsub(self, other):"
    )
    wanted = {"backward[tanh]", "backward[log]", "backward[exp]", "backward[rsub]", "op_backward[pow_tensor]"}
    request = Request("public", None, sandbox=False, keep=lambda c: c.title.replace(" ", "") in wanted)
    report = grade_submission(edited, request, oracle)
    statuses = {r.name.replace(" ", ""): (r.status, r.missing) for r in report.results}
    assert statuses["backward[tanh]"] == (Status.NOT_GRADED, ["tanh"])
    assert statuses["backward[rsub]"] == (Status.NOT_GRADED, ["rsub"])
    assert statuses["op_backward[pow_tensor]"] == (Status.NOT_GRADED, ["EWisePow"])
    assert statuses["backward[log]"][0] is Status.ERROR
    assert statuses["backward[exp]"][0] is Status.ERROR


def test_pytest_skips_a_not_graded_case_and_its_table_says_so(reduced):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"--impl={reduced}",
            "tests/public/micrograd/test_accumulation.py",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "SKIPPED" in run.stdout and "not graded: needs tanh" in run.stdout
    assert "not graded)" in run.stdout  # the score table's row
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    # each at its case's own line, not where the plugin raised the skip
    assert all(" tests/public/micrograd/test_accumulation.py:" in line for line in skipped), skipped
