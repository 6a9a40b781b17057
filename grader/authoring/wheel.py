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
    """The wheel could not be built: pip's last lines of output say why."""


def wheel_file(repo: Path, dest: Path) -> Path:
    """Build the wheel of the project at `repo` into the folder `dest`; the `.whl` file."""
    if not (repo / "pyproject.toml").is_file():
        raise WheelError(f"no pyproject.toml in {repo}: the wheel is built from the kit's checkout")
    with tempfile.TemporaryDirectory(prefix="grader-wheel-") as tmp:
        source = Path(tmp) / "src"
        shutil.copytree(repo, source, ignore=shutil.ignore_patterns(*IGNORED))
        argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        done = subprocess.run([*argv, "-w", str(dest), "."], cwd=source, capture_output=True, text=True)
    if done.returncode != 0:
        raise WheelError(f"pip wheel failed: {(done.stderr or done.stdout).strip()[-500:]}")
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
