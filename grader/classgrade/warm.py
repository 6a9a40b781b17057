"""Imported in the class run's fork server (`pool.PRELOAD`), before any submission's process
is forked from it: the sandbox workers' bytecode is compiled here once
(`grader.sandbox.root.precompile`), and bubblewrap's paths are found once
(`grader.sandbox.bwrap.prepare`); every submission's process inherits both, instead of
finding them again for each submission."""

from __future__ import annotations

from grader.pipeline import SUITES_DIR
from grader.sandbox import bwrap
from grader.sandbox.root import precompile

precompile(SUITES_DIR)
bwrap.prepare()
