"""The grader's package as `pip install` would install it, built and unpacked for a leak scan.

The wheel is built from a copy of the checkout (without `.git`, earlier builds and caches),
so a build never writes into the checkout itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

IGNORED = (".git", "build", "dist", "*.egg-info", "__pycache__", ".*cache*")


class WheelError(Exception):
    """The wheel could not be built: the build backend's last lines of output say why."""


#: builds the wheel of the project in the current folder into the folder argv[1] with the
#: build backend its pyproject.toml names (PEP 517), as `pip wheel --no-build-isolation` does,
#: without pip's own start and resolution around it: 1 s instead of 2.6
BUILD = """
import importlib, sys, tomllib
with open("pyproject.toml", "rb") as fh:
    backend = tomllib.load(fh).get("build-system", {}).get("build-backend", "setuptools.build_meta")
module, _, attribute = backend.partition(":")
hooks = importlib.import_module(module)
for name in filter(None, attribute.split(".")):
    hooks = getattr(hooks, name)
hooks.build_wheel(sys.argv[1])
"""


def wheel_file(repo: Path, dest: Path) -> Path:
    """Build the wheel of the project at `repo` into the folder `dest`; the `.whl` file."""
    if not (repo / "pyproject.toml").is_file():
        raise WheelError(f"no pyproject.toml in {repo}: the wheel is built from the kit's checkout")
    Path(dest).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-wheel-") as tmp:
        source = Path(tmp) / "src"
        shutil.copytree(repo, source, ignore=shutil.ignore_patterns(*IGNORED))
        command = [sys.executable, "-c", BUILD, str(Path(dest).resolve())]
        done = subprocess.run(command, cwd=source, capture_output=True, text=True)
    if done.returncode != 0:
        raise WheelError(f"building the wheel failed: {(done.stderr or done.stdout).strip()[-500:]}")
    (wheel,) = Path(dest).glob("grader-*.whl")
    return wheel


def build_wheel(repo: Path, out: Path) -> Path:
    """Build the wheel of the project at `repo` under `out` (the file in `out/wheels/`);
    the unpacked wheel's folder, for a leak scan."""
    wheel = wheel_file(repo, out / "wheels")
    unpacked = out / "unpacked"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacked)
    return unpacked
