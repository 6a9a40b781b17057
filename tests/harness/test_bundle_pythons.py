"""The student bundle on every Python it promises (3.11 to 3.13): the README's two commands,
`pip install -r requirements.txt` then `pytest`, in a fresh virtual environment of each, on
the untouched template and on the reference. The installs come from PyPI; nothing of this
checkout is reachable. Each Python is one slow test, so that `-n` runs them side by side.
The Python running these tests is not among them: test_release.py's student environment
runs the two commands on it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.case.define import collect
from tests.harness.bundle import fresh_venv, plain_env, readme_commands

REPO = Path(__file__).resolve().parents[2]
NAMES = ("micrograd", "needle")
#: the Pythons the bundle promises, but the one running this (test_release.py's student's)
OTHERS = [v for v in ("3.11", "3.12", "3.13") if v != f"{sys.version_info.major}.{sys.version_info.minor}"]


def interpreter(version: str) -> str | None:
    """The python of `version` on this machine: pyenv's (its shims need a project setting,
    so the interpreter is taken from its prefix), else the one on PATH."""
    try:
        done = subprocess.run(["pyenv", "prefix", *versions(version)], capture_output=True, text=True)
    except FileNotFoundError:
        return None
    for prefix in done.stdout.split(os.pathsep):
        candidate = Path(prefix.strip()) / "bin" / f"python{version}"
        if prefix.strip() and candidate.is_file():
            return str(candidate)
    return shutil.which(f"python{version}")


def versions(version: str) -> list[str]:
    """pyenv's installed versions that are `version` (3.12 -> 3.12.1)."""
    done = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True)
    return [v for v in done.stdout.split() if re.fullmatch(rf"{re.escape(version)}\.\d+", v)][-1:]


@pytest.mark.slow
@pytest.mark.parametrize("version", OTHERS)
def test_the_bundles_two_commands_work_on(version, released_bundle, tmp_path):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    bundle = tmp_path / "autodiff"
    shutil.copytree(released_bundle, bundle)
    venv = tmp_path / "venv"
    fresh_venv(python, venv)
    env = plain_env(venv, tmp_path / "cache")
    install, run = readme_commands(bundle / "README.md")
    done = subprocess.run(install, shell=True, cwd=bundle, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    probe = "import sys; print(sys.version_info[:2])"
    seen = subprocess.run(["python", "-c", probe], cwd=bundle, env=env, capture_output=True, text=True)
    assert seen.stdout.strip() == str(tuple(map(int, version.split("."))))

    cases = collect(REPO / "tests", NAMES, ("public",))
    total = sum(c.points for c in cases)
    template = subprocess.run(run, shell=True, cwd=bundle, env=env, capture_output=True, text=True)
    assert template.returncode == 1, template.stdout[-3000:] + template.stderr[-3000:]
    assert "Traceback" not in template.stdout + template.stderr
    score = re.search(r"^Score: (\S+)/(\S+) points", template.stdout.rstrip().splitlines()[-1])
    assert score and float(score.group(2)) == total and float(score.group(1)) > 0  # the forward cases

    for name in NAMES:
        shutil.rmtree(bundle / name)
        shutil.copytree(
            REPO / "reference" / name, bundle / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    reference = subprocess.run(run, shell=True, cwd=bundle, env=env, capture_output=True, text=True)
    assert reference.returncode == 0, reference.stdout[-3000:] + reference.stderr[-3000:]
    assert reference.stdout.rstrip().splitlines()[-1].startswith(f"Score: {total:g}/{total:g} points")
