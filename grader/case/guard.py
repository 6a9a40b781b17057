"""What a submission's imports get while it is graded: no autodiff library, stand-ins for
absent optional ones.

One rule, alike in a student's own pytest and in the sandbox: importing a library costs
nothing, using it is what counts. An autodiff library (`torch`, `jax`, ...) imports as a
`Forbidden` placeholder; the first call into it raises `ForbiddenLibrary`, which names the
library, what was called and where in the submission, so only the cases that ran it score
zero. A third-party module that is not installed where grading runs (`beartype`,
`matplotlib`) and without which the submission would not import at all becomes an `Absent`
stand-in: a decorator from it leaves the function as it is, any other use raises
`ModuleNotFoundError` naming it.

`ImportGuard` is a meta path finder: first in `sys.meta_path` while student code runs.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

#: top-level module -> the library named in messages (also read by the grader's static scan)
AUTODIFF_LIBRARIES = {
    "torch": "torch",
    "functorch": "torch",
    "torchvision": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "tensorflow": "tensorflow",
    "keras": "keras",
    "autograd": "autograd",
    "mxnet": "mxnet",
    "tinygrad": "tinygrad",
    "theano": "theano",
    "chainer": "chainer",
    "paddle": "paddle",
    "mlx": "mlx",
}


class ForbiddenLibrary(Exception):
    """The submission called into an autodiff library while a case ran."""


def _where(roots: Iterable[Path]) -> str:
    """`engine.py line 42, in Value.tanh._backward`: the innermost frame of the submission."""
    roots = [Path(r) for r in roots]
    frame = sys._getframe(2)
    while frame is not None:
        path = Path(frame.f_code.co_filename)
        if any(root in path.parents for root in roots):
            name = frame.f_code.co_qualname.replace(".<locals>", "")
            return f"{path.name} line {frame.f_lineno}, in {name}"
        frame = frame.f_back
    return "the submission"


class _Placeholder(ModuleType):
    """A module whose attributes are more placeholders; what happens on use is the subclass's."""

    def __init__(self, name: str, guard: ImportGuard) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package: `import torch.nn` finds a placeholder too
        self._guard = guard

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return type(self)(f"{self.__name__}.{attr}", self._guard)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__.lower()} {self.__name__}>"


class Forbidden(_Placeholder):
    """An autodiff library, imported but unusable: any call raises `ForbiddenLibrary`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        library = AUTODIFF_LIBRARIES[self.__name__.split(".")[0]]
        where = _where(self._guard.roots)
        raise ForbiddenLibrary(
            f"uses {library} to compute gradients ({self.__name__} called at {where}): not allowed"
        )


class Absent(_Placeholder):
    """A module not installed where grading runs: a decorator from it is left out, any other
    call raises `ModuleNotFoundError`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and (isinstance(args[0], type) or callable(args[0])):
            return args[0]  # `@beartype`: the function undecorated
        top = self.__name__.split(".")[0]
        where = _where(self._guard.roots)
        raise ModuleNotFoundError(
            f"{top} is not installed where grading runs ({self.__name__} called at {where})", name=top
        )


class _Loader:  # a loader's protocol: importlib.abc would import importlib.resources into every worker
    def __init__(self, guard: ImportGuard, kind: type[_Placeholder]) -> None:
        self.guard, self.kind = guard, kind

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.kind(spec.name, self.guard)

    def exec_module(self, module: ModuleType) -> None:
        return None


class ImportGuard:  # a finder on sys.meta_path: `find_spec` is all it needs
    """Placeholders for autodiff libraries and for the absent modules named in `absent`."""

    def __init__(self, roots: Iterable[Path] = (), absent: Iterable[str] = ()) -> None:
        self.roots = [Path(r) for r in roots]
        self.absent = set(absent)
        self._forbidden = _Loader(self, Forbidden)
        self._absent = _Loader(self, Absent)

    def find_spec(
        self, name: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = name.partition(".")[0]
        if top in AUTODIFF_LIBRARIES:
            return importlib.machinery.ModuleSpec(name, self._forbidden, is_package=True)
        if top in self.absent or name in self.absent:
            return importlib.machinery.ModuleSpec(name, self._absent, is_package=True)
        return None


def placeholder(module: object) -> bool:
    return isinstance(module, _Placeholder)


def is_autodiff(name: str) -> bool:
    return name.partition(".")[0] in AUTODIFF_LIBRARIES
