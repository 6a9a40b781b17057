"""The needle backends: the oracle's needle semantics, its finite-difference second oracle,
the worker side staying torch-free, and random programs on the reference against PyTorch."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from grader.assignments.needle.adapter import NeedleBackend
from grader.assignments.needle.oracle import OracleDisagreement, TorchTensorBackend
from grader.assignments.needle.programs import programs, random_program, run
from grader.pipeline import REPO
from grader.verdict.compare import compare

MODULES = NeedleBackend.load(REPO / "reference")


def both(fn):
    """Run fn on the reference needle and on the oracle: (needle results, oracle results)."""
    needle, oracle = NeedleBackend(MODULES), TorchTensorBackend()
    return needle.flatten(fn(needle)), oracle.flatten(fn(oracle))


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_agree_with_pytorch(program):
    actual, expected = both(lambda lib: run(lib, program))
    assert compare(expected, actual) == [], program.describe()


def test_fixed_programs_are_fixed():
    assert random_program(7).describe() == random_program(7).describe()
    assert random_program(7).describe() != random_program(8).describe()


def test_finite_differences_catch_a_wrong_autograd_gradient(monkeypatch):
    def case(lib):
        x = lib.tensor(np.array([0.3, -0.7]), "x")
        return {"y": lib.differentiate(lambda x: (x * x).tanh().sum(), [x]), "x": x}

    both(case)  # agrees as it is
    wrong = TorchTensorBackend.backward

    def scaled(self, y, out_grad=None):
        wrong(self, y, out_grad)
        for key, g in self.grads.items():
            if g is not None:
                self.grads[key] = g * 1.001

    monkeypatch.setattr(TorchTensorBackend, "backward", scaled)
    with pytest.raises(OracleDisagreement):
        both(case)


def test_topological_order_and_reachable_nodes_follow_needle():
    def case(lib):
        a = lib.tensor(np.ones(2), "a")
        c = lib.tensor(np.ones(2), "c", requires_grad=False)
        d = (c * 2.0).exp()  # eager: needs no gradient, so needle makes it a leaf
        y = (a * d + a).detach() * a
        return {"order": lib.topo_order(y), "count": lib.count_nodes(y), "d has an op": lib.has_op(d)}

    actual, expected = both(case)
    assert compare(expected, actual) == []
    assert expected["count"].data == (3.0,)  # y, the detached node, a


def test_structural_questions_refuse_compound_ops():
    lib = TorchTensorBackend()
    a = lib.tensor(np.ones(2), "a")
    with pytest.raises(ValueError, match="one needle Tensor"):
        lib.topo_order(a - a)


def test_lazy_flags_follow_needle():
    def case(lib):
        x = lib.tensor(np.ones(3), "x")
        with lib.lazy():
            h = x * 2.0
            y = h.exp()
            z = h.detach()  # detach reads h's data: h is computed, y is not
            flags = [lib.computed(h), lib.computed(y), lib.computed(z)]
        return {"flags": [float(f.data[0]) for f in flags]}

    actual, expected = both(case)
    assert expected["flags"].data == (1.0, 0.0, 1.0)
    assert compare(expected, actual) == []


def test_needle_backend_never_imports_torch():
    code = (
        "import sys; import grader.assignments.needle.adapter, grader.assignments.needle.backend, "
        "grader.assignments.needle.programs; "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
