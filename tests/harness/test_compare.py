"""The tolerance policy of grader/compare.py, and strict parsing of plain results."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.case.quantity import MalformedResult, Quantity
from grader.verdict.compare import _close_arrays, _close_small, close, compare
from grader.verdict.diagnose import explain_results


def q(values, dtype="float64"):
    return Quantity.from_array(np.asarray(values, dtype=np.float64), dtype=dtype)


def test_float64_accepts_rounding_but_not_a_real_error():
    e = q([1.0, -2.0, 3e5])
    assert close(e, q([1.0 + 1e-12, -2.0, 3e5 * (1 + 1e-9)])) is None
    assert close(e, q([1.0 + 1e-4, -2.0, 3e5])) == "value"


def test_float32_gets_the_float32_tolerance():
    e = q([0.1, 1000.0])
    approx = q(np.asarray([0.1, 1000.0], dtype=np.float32), dtype="float32")
    assert close(e, approx) is None
    assert close(e, q([0.1, 1000.0 * (1 + 1e-3)], dtype="float32")) == "value"


def test_shape_must_match_exactly():
    assert close(q([[1.0, 2.0]]), q([1.0, 2.0])) == "shape"
    assert close(q(1.0), q([1.0])) == "shape"


@pytest.mark.parametrize(
    "expected, actual, verdict",
    [
        ([math.nan], [math.nan], None),
        ([math.nan], [0.0], "nonfinite"),
        ([0.0], [math.nan], "nonfinite"),
        ([math.inf], [math.inf], None),
        ([math.inf], [-math.inf], "nonfinite"),
        ([1.0], [math.inf], "nonfinite"),
    ],
)
def test_non_finite_numbers_must_agree_exactly(expected, actual, verdict):
    assert close(q(expected), q(actual)) == verdict


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, -1.0, 1e-9, 1e300, math.inf, -math.inf, math.nan]),
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(NUMBERS, NUMBERS, st.floats(-1e-5, 1e-5)), min_size=1, max_size=6),
    st.sampled_from(["float64", "float32", "float16"]),
)
def test_small_quantities_get_the_same_verdict_in_plain_python_as_with_numpy(pairs, dtype):
    """Most results are a few numbers, compared without numpy: never with another verdict."""
    expected = Quantity(tuple(e for e, _, _ in pairs), (len(pairs),))
    near = Quantity(tuple(e * (1 + d) if math.isfinite(e) else a for e, a, d in pairs), (len(pairs),), dtype)
    far = Quantity(tuple(a for _, a, _ in pairs), (len(pairs),), dtype)
    for actual in (near, far, expected):
        assert _close_small(expected, actual) == _close_arrays(expected, actual)


def test_compare_names_missing_and_wrong_results():
    expected = {"x": q(1.0), "x.grad": q(2.0), "y.grad": None}
    found = compare(expected, {"x": q(1.0), "x.grad": q(3.0)})
    assert [(m.name, m.reason) for m in found] == [("x.grad", "value")]
    found = compare(expected, {"x": q(1.0)})
    assert [(m.name, m.reason) for m in found] == [("x.grad", "missing")]


def test_a_mismatch_that_prints_alike_shows_the_gap():
    """1 and 1 + 4e-6 both print as 1 at six digits: the message must not read "expected 1, got 1"."""
    expected, actual = q(1.0), q(1.0 + 4e-6)
    reason = close(expected, actual)
    assert reason == "value"
    text = explain_results(compare({"x.grad": expected}, {"x.grad": actual}))
    assert "expected 1, got 1 (off by 4e-06)" in text


class Liar(float):
    def __eq__(self, other):
        return True


@pytest.mark.parametrize(
    "obj",
    [
        {"data": [1.0], "shape": [], "dtype": "float64", "extra": 1},
        {"data": (1.0,), "shape": [], "dtype": "float64"},
        {"data": [Liar(1.0)], "shape": [], "dtype": "float64"},
        {"data": ["1.0"], "shape": [], "dtype": "float64"},
        {"data": [1.0, 2.0], "shape": [3], "dtype": "float64"},
        {"data": [1.0], "shape": [True], "dtype": "float64"},
        {"data": [1.0], "shape": [], "dtype": "object"},
        [1.0],
    ],
)
def test_from_plain_accepts_only_plain_numbers(obj):
    with pytest.raises(MalformedResult):
        Quantity.from_plain(obj)


def test_from_plain_round_trip():
    x = q([[1.5, -2.0], [0.0, 4.0]], dtype="float32")
    assert Quantity.from_plain(x.to_plain()) == x
