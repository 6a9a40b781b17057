"""What the tests of the student bundle share: the commands its README gives a student, and an
environment that leads nowhere into this checkout."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path


def readme_commands(readme: Path) -> list[str]:
    """The commands of the README's "Set up and run" block."""
    section = readme.read_text().split("## Set up and run", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no sh block under 'Set up and run'"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def plain_env(venv: Path, cache: Path) -> dict[str, str]:
    """The machine's environment, less anything that leads to the kit's checkout, with the
    virtual environment `venv` first on PATH, the oracle's cache in `cache`, and pip told
    not to byte-compile what it installs (the commands are the README's all the same)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "GITHUB_"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["GRADER_CACHE"] = str(cache)
    # pip byte-compiles every module it installs, two thirds of an install's CPU (numpy,
    # hypothesis, rich); a run compiles only what it imports, as it imports it
    env["PIP_COMPILE"] = "0"
    return env


def fresh_venv(python: str, venv: Path, system_site_packages: bool = False) -> None:
    """A new virtual environment of the interpreter `python` at `venv`, with pip in it. Made
    by virtualenv where the kit's dev tools are installed: it links pip in from its own
    cache in a second, where `python -m venv` spends five installing pip (ensurepip, which
    ignores pip's settings). Either is the fresh environment a student makes; the commands
    run in it are the README's. The student's environment of test_release.py is made with
    `python -m venv`, as the README says."""
    flags = ["--system-site-packages"] if system_site_packages else []
    if importlib.util.find_spec("virtualenv") is not None:
        command = [sys.executable, "-m", "virtualenv", "-q", "--python", python, *flags, str(venv)]
    else:
        command = [python, "-m", "venv", *flags, str(venv)]
    subprocess.run(command, check=True)
