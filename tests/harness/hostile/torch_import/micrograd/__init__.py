"""Computes gradients with torch (imported the plain way)."""

from micrograd.engine import Value  # noqa: F401
from micrograd.helper import grad  # noqa: F401
