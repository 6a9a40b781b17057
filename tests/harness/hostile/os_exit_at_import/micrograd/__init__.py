"""Leaves the interpreter at once, no cleanup, with status 0, while being imported."""

import os

from micrograd.engine import Value  # noqa: F401

os._exit(0)
