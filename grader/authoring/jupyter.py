"""Jupyter's libraries (nbformat, nbgrader) imported without a grammar nothing here uses.

nbformat validates notebooks with jsonschema, and jsonschema's format checker imports
`rfc3987_syntax` (where installed, as Jupyter's servers install it), which compiles a grammar
of IRIs at import: 1.7 s of CPU, in every process that reads a notebook. Only the "iri"
string format uses it, and no notebook or gradebook schema has that format; jsonschema treats
the module as optional. So it is kept out while jsonschema first loads, and allowed again
after: a later, direct `import rfc3987_syntax` works as usual.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

GRAMMAR = "rfc3987_syntax"


@contextlib.contextmanager
def without_iri_grammar() -> Iterator[None]:
    """Import jsonschema (through nbformat or nbgrader) inside this block: see the module."""
    keep_out = "jsonschema" not in sys.modules and GRAMMAR not in sys.modules
    if keep_out:
        sys.modules[GRAMMAR] = None  # type: ignore[assignment]  # `import` raises ImportError
    try:
        yield
    finally:
        if keep_out and GRAMMAR in sys.modules and sys.modules[GRAMMAR] is None:
            del sys.modules[GRAMMAR]


def import_nbformat() -> ModuleType:
    """nbformat, imported as the module says."""
    with without_iri_grammar():
        import nbformat
    return nbformat


def import_nbgrader() -> None:
    """What the fast path needs of nbgrader (its Gradebook and utilities), imported as the
    module says, and without running the package's `__init__.py`: that one loads nbgrader's
    Jupyter server extensions (tornado's handlers, nbconvert, the exchange), which only a
    Jupyter server asks for. Its submodules import each other by relative imports, so they
    work from the package left empty (`bare_package`). 2 s of CPU otherwise, 0.6 s so."""
    with without_iri_grammar():
        if "nbgrader" not in sys.modules:
            bare_package("nbgrader")
        import nbgrader.api  # noqa: F401
        import nbgrader.utils  # noqa: F401


def bare_package(name: str) -> None:
    """Put package `name` in `sys.modules` as its submodules need it (its `__path__` and
    `__version__`), without running its `__init__.py`; nothing if it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)  # made, not executed
    sys.modules[name] = package
    with contextlib.suppress(ImportError):
        package.__version__ = importlib.import_module(f"{name}._version").__version__
