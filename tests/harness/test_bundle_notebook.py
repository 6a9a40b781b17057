"""The student bundle from a Jupyter kernel, as students run it in Colab: a notebook in the
bundle's folder whose cells are `%pip install -r requirements.txt` and `!python -m pytest`,
executed through nbclient. The kernel runs in a virtual environment of its own that sees
this machine's packages (as Colab's has torch and numpy preinstalled), so `%pip` installs
into that environment and `!python` is its interpreter."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from grader.authoring.jupyter import without_iri_grammar
from grader.case.define import collect
from tests.harness.bundle import fresh_venv

with without_iri_grammar():  # 1.7 s less to collect
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_bundle_runs_from_a_notebook(released_bundle, tmp_path, monkeypatch):
    bundle = tmp_path / "autodiff"
    shutil.copytree(released_bundle, bundle)
    venv = tmp_path / "kernel-venv"
    fresh_venv(sys.executable, venv, system_site_packages=True)
    # a kernel of that environment, with its bin/ first on PATH as a notebook server gives it
    kernels = tmp_path / "jupyter" / "kernels" / "bundle"
    kernels.mkdir(parents=True)
    path = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    spec = {
        "argv": [str(venv / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "bundle",
        "language": "python",
        "env": {"PATH": path, "GRADER_CACHE": str(tmp_path / "cache"), "PYTHONPATH": ""},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("%pip install -q -r requirements.txt"),
            nbformat.v4.new_code_cell("!python -m pytest -p no:cacheprovider"),
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JUPYTER"))}
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))  # where the client finds the kernel
    client = nbclient.NotebookClient(
        notebook, kernel_name="bundle", timeout=900, resources={"metadata": {"path": str(bundle)}}
    )
    client.execute(env=env)
    streamed = "".join(
        o.get("text", "") for o in notebook.cells[1].outputs if o.get("output_type") == "stream"
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", streamed)  # `!` runs in a terminal: pytest colours its output
    total = sum(c.points for c in collect(REPO / "tests", ("micrograd", "needle"), ("public",)))
    assert f"grader: grading {bundle}" in output, output[-2000:]
    assert "Traceback" not in output
    last = output.rstrip().splitlines()[-1]
    score = re.match(r"^Score: (\S+)/(\S+) points", last)
    assert score and float(score.group(2)) == total and float(score.group(1)) > 0, last
