"""Never finishes importing."""

from micrograd.engine import Value  # noqa: F401

while True:
    pass
