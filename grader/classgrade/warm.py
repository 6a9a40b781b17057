"""Imported in the class run's fork server (`pool.PRELOAD`), before any submission's process
is forked from it: the sandbox workers' bytecode is compiled here once
(`grader.sandbox.root.precompile`), and every submission's process inherits it, instead of
compiling the grader's modules and the suites again for each submission."""

from __future__ import annotations

from grader.pipeline import SUITES_DIR
from grader.sandbox.root import precompile

precompile(SUITES_DIR)
