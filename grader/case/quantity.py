"""Plain numbers that cross from a backend to the verdict.

A backend turns each result (a Value's data, a tensor's gradient, ...) into a `Quantity`:
a flat list of floats with a shape and a dtype name. Nothing else crosses, so comparing and
scoring never touch objects that a submission made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where it is used: a micrograd worker, which has no other use for it,
# starts without paying for it.

FLOAT_DTYPES = ("float16", "float32", "float64")
#: the exact types a result's shape and numbers may hold on the wire
INTEGER, NUMBERS = frozenset({int}), frozenset({int, float})


class MalformedResult(ValueError):
    """A result that is not plain numbers in the agreed form."""


@dataclass(frozen=True)
class Quantity:
    data: tuple[float, ...]
    shape: tuple[int, ...]
    dtype: str = "float64"

    def array(self) -> np.ndarray:
        import numpy as np

        return np.array(self.data, dtype=np.float64).reshape(self.shape)

    def to_plain(self) -> dict[str, Any]:
        return {"data": list(self.data), "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_array(cls, array: Any, dtype: str | None = None) -> Quantity:
        import numpy as np

        arr = np.asarray(array)
        if dtype is None:
            dtype = str(arr.dtype) if arr.dtype.kind == "f" else "float64"
        flat = tuple(float(x) for x in arr.astype(np.float64).reshape(-1))
        return cls(flat, tuple(int(n) for n in arr.shape), dtype)

    @classmethod
    def from_plain(cls, obj: Any) -> Quantity:
        """Parse strictly: exact dict/list/float/int types only, nothing that could lie."""
        if type(obj) is not dict or set(obj) != {"data", "shape", "dtype"}:
            raise MalformedResult("a result must be {data, shape, dtype}")
        data, shape, dtype = obj["data"], obj["shape"], obj["dtype"]
        if type(data) is not list or type(shape) is not list or type(dtype) is not str:
            raise MalformedResult("data and shape must be lists and dtype a string")
        # exact types (a bool is no number here), checked with map and sets: the grader parses
        # every result of every case (12 numbers: 4.6 us with a Python loop per number, 3.5 so)
        if not set(map(type, shape)) <= INTEGER or min(shape, default=0) < 0:
            raise MalformedResult("shape must hold non-negative integers")
        if not set(map(type, data)) <= NUMBERS:
            raise MalformedResult("data must hold plain numbers")
        if math.prod(shape) != len(data):
            raise MalformedResult(f"shape {tuple(shape)} does not fit {len(data)} numbers")
        if dtype not in FLOAT_DTYPES:
            raise MalformedResult(f"unexpected dtype {dtype!r}")
        return cls(tuple(map(float, data)), tuple(shape), dtype)

    def describe(self, limit: int = 6) -> str:
        """Short human form: a number for a scalar, a rounded array otherwise."""
        if self.shape == ():
            return f"{self.data[0]:.6g}"
        arr = self.array()
        if arr.size <= limit:
            import numpy as np

            return np.array2string(arr, precision=4, separator=", ", suppress_small=False)
        head = ", ".join(f"{x:.4g}" for x in arr.reshape(-1)[:limit])
        return f"[{head}, ...] (shape {self.shape})"
