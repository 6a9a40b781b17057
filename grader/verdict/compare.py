"""Compare a submission's results with the oracle's, within a documented tolerance.

Tolerance policy
----------------
The oracle is PyTorch in float64. A submission's number `a` matches the oracle's `e` when

    |a - e| <= atol + rtol * |e|

with (rtol, atol) chosen by the coarser of the two dtypes involved:

    float64: rtol 1e-6, atol 1e-8   (room for a different but exact formula, e.g. tanh'
                                     as 1 - tanh**2 or 1 / cosh**2; far below any real bug)
    float32: rtol 1e-4, atol 1e-5   (float32 keeps ~7 digits; sums of thousands lose ~2)
    float16: rtol 1e-2, atol 1e-3

Non-finite numbers must agree exactly: NaN where the oracle has NaN, the same infinity where
it has one. Shapes must agree exactly: a gradient must have its input's shape. So must the
dtype of a gradient where the oracle's is not float64: a float32 input's gradient is float32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grader.assignments import accounts
from grader.case.quantity import Quantity
from grader.case.run import Run

TOLERANCES = {"float64": (1e-6, 1e-8), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-3)}
PRECISION = ["float64", "float32", "float16"]  # from finest to coarsest


def tolerance(expected: Quantity, actual: Quantity) -> tuple[float, float]:
    coarsest = max(PRECISION.index(expected.dtype), PRECISION.index(actual.dtype))
    return TOLERANCES[PRECISION[coarsest]]


@dataclass(frozen=True)
class Mismatch:
    name: str
    expected: Quantity | None
    actual: Quantity | None
    reason: str  # "missing", "shape", "value", "nonfinite", "dtype"

    @property
    def is_grad(self) -> bool:
        return self.name.endswith(".grad")


#: quantities up to this size are compared in plain Python: for a few numbers (most results
#: are scalars) numpy's cost per call is far more than the arithmetic
SMALL = 32


def close(expected: Quantity, actual: Quantity) -> str | None:
    """None when they match, else the reason they do not: "nonfinite" if they differ in
    where they are infinite or NaN (or in the sign of an infinity), else "value" if a finite
    number is out of tolerance."""
    if expected.shape != actual.shape:
        return "shape"
    if expected.data == actual.data:
        return None  # the very numbers (most of a correct submission's): nothing to weigh
    if len(expected.data) <= SMALL:
        return _close_small(expected, actual)
    return _close_arrays(expected, actual)


def _close_arrays(expected: Quantity, actual: Quantity) -> str | None:
    """`close` on numpy arrays, for quantities of any size (and the same shape). numpy is
    imported here, not with the module: a scalar engine's run (micrograd) never needs it."""
    import numpy as np

    e, a = expected.array(), actual.array()
    e_finite, a_finite = np.isfinite(e), np.isfinite(a)
    if not np.array_equal(e_finite, a_finite):
        return "nonfinite"
    if not np.array_equal(np.isnan(e), np.isnan(a)):
        return "nonfinite"
    inf = ~e_finite & ~np.isnan(e)
    if not np.array_equal(e[inf], a[inf]):
        return "nonfinite"
    rtol, atol = tolerance(expected, actual)
    ok = np.abs(a[e_finite] - e[e_finite]) <= atol + rtol * np.abs(e[e_finite])
    return None if ok.all() else "value"


def _close_small(expected: Quantity, actual: Quantity) -> str | None:
    """`close`, number by number, with the same verdicts."""
    rtol, atol = tolerance(expected, actual)
    off = False
    for e, a in zip(expected.data, actual.data, strict=True):
        if math.isfinite(e):
            if not math.isfinite(a):
                return "nonfinite"
            off = off or not abs(a - e) <= atol + rtol * abs(e)
        elif math.isfinite(a) or math.isnan(e) != math.isnan(a) or (not math.isnan(e) and e != a):
            return "nonfinite"
    return "value" if off else None


def _gradient(name: str) -> bool:
    """A result that is a gradient: `x.grad`, or an op's `gradient for a`."""
    return name.endswith(".grad") or name.startswith("gradient for")


def compare(expected: dict[str, Quantity | None], actual: dict[str, Quantity | None]) -> list[Mismatch]:
    """Every named result of the oracle that the submission got wrong or left out."""
    found = []
    for name, e in expected.items():
        a = actual.get(name)
        if e is None:
            continue  # the oracle has no gradient here (a node that does not require one)
        if a is None:
            found.append(Mismatch(name, e, None, "missing"))
            continue
        reason = close(e, a)
        if reason is None and _gradient(name) and e.dtype != "float64" and a.dtype != e.dtype:
            reason = "dtype"
        if reason:
            found.append(Mismatch(name, e, a, reason))
    return found


def needs_tape(expected: dict[str, Quantity | None] | None, run: Run) -> bool:
    """Does the verdict need this run's tape (every node's value and gradient)? Its diagnosis
    reads it where results are wrong (or nothing is known of what they should be), and where
    the case raised: a value gone wrong before the exception is its cause. Not for a right
    run, one stopped by the grader (its time or memory up), one lacking an op, or one not
    implemented yet."""
    if run.fault is not None or run.missing:
        return False
    if run.failure is not None:
        return run.failure.type not in (*NOT_FROM_A_VALUE, *FINDINGS)
    return expected is None or bool(compare(expected, run.results))


#: exceptions no wrong value causes: a rule not written yet, the grader's own limits
NOT_FROM_A_VALUE = ("NotImplementedError", "CaseTimedOut", "MemoryError")
#: the grader's own accounts of an exception (needle's adapter): each names its cause
FINDINGS = accounts()
