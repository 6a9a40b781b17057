"""Which backends grade which assignment: the submission's engine and its PyTorch oracle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Assignment:
    name: str
    #: import the submission's package from a directory -> modules
    load: Callable[[Path], dict[str, Any]]
    #: modules, trace -> a backend running the submission
    engine: Callable[..., Any]
    #: trace -> the PyTorch backend (imports torch when first called)
    oracle: Callable[..., Any]


def _micrograd() -> Assignment:
    from grader.backends.micrograd import MicrogradBackend

    def oracle(trace: bool = True) -> Any:
        from grader.backends.torch_scalar import TorchScalarBackend

        return TorchScalarBackend(trace=trace)

    return Assignment("micrograd", MicrogradBackend.load, MicrogradBackend, oracle)


def _needle() -> Assignment:
    from grader.backends.needle import NeedleBackend

    def oracle(trace: bool = True) -> Any:
        from grader.backends.torch_tensor import TorchTensorBackend

        return TorchTensorBackend(trace=trace)

    return Assignment("needle", NeedleBackend.load, NeedleBackend, oracle)


_FACTORIES = {"micrograd": _micrograd, "needle": _needle}


def get(name: str) -> Assignment:
    return _FACTORIES[name]()
