"""The roles are packages: every assignment folder has the same files, and the installed
package holds no solution line and no hidden case's name or source. (What runs beside
student code imports nothing trusted: test_imports.py.)"""

from __future__ import annotations

import ast
import builtins
import json
from pathlib import Path

import pytest

from grader.assignments import NAMES
from grader.authoring.leaks import Secrets, scan, secrets

REPO = Path(__file__).resolve().parents[2]
GRADER = REPO / "grader"


def test_every_assignment_folder_has_the_same_files():
    assert NAMES == ("micrograd", "needle")
    listing = {
        name: sorted(
            p.name for p in (GRADER / "assignments" / name).iterdir() if p.suffix in (".py", ".toml")
        )
        for name in NAMES
    }
    first = listing[NAMES[0]]
    assert {"adapter.py", "backend.py", "oracle.py", "programs.py"} <= set(first)
    assert all(files == first for files in listing.values()), listing


@pytest.fixture(scope="module")
def known() -> Secrets:
    found = secrets(REPO / "reference", REPO / "tests")
    assert found.solution and found.hidden_names and found.hidden_source
    return found


def test_the_wheel_holds_no_solution_and_no_hidden_case(wheel, known):
    files = {p.relative_to(wheel).as_posix() for p in wheel.rglob("*") if p.is_file()}
    assert "grader/case/worker.py" in files and "grader/verdict/oracle.py" in files
    assert not any(f.startswith(("reference/", "tests/", "student_template/")) for f in files)
    assert scan(wheel, known) == []


def test_the_leak_scan_finds_each_kind_of_leak(tmp_path, known):
    solution, name, source = (
        sorted(known.solution)[0],
        sorted(known.hidden_names)[0],
        sorted(known.hidden_source)[0],
    )
    (tmp_path / "a.py").write_text(f"    {solution}\n")
    (tmp_path / "b.md").write_text(f"see {name} for more\n")
    (tmp_path / "c.py").write_text(f"{source}\n")
    (tmp_path / "d.py").write_text(f"x = 1  # e.g. `{solution} -> ...`\n")  # in a comment too
    # the backward of micrograd's reference, renamed and in a notebook's cell
    tree = ast.parse((REPO / "reference" / "micrograd" / "engine.py").read_text())
    (walk,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "backward"]
    names = {n.id for n in ast.walk(walk) if isinstance(n, ast.Name)} - set(dir(builtins))
    new = {name: f"v{i}" for i, name in enumerate(sorted(names))}
    for n in ast.walk(walk):
        if isinstance(n, ast.Name) and n.id in new:
            n.id = new[n.id]
    walk.args.args[0].arg, walk.name = new.get("self", "self"), "walk"
    cell = {"cell_type": "code", "metadata": {}, "source": ast.unparse(walk)}
    (tmp_path / "e.ipynb").write_text(json.dumps({"cells": [cell], "nbformat": 4, "nbformat_minor": 5}))
    kinds = sorted((leak.path, leak.kind) for leak in scan(tmp_path, known))
    assert kinds == [
        ("a.py", "solution line"),
        ("b.md", "hidden case name"),
        ("c.py", "hidden source"),
        ("d.py", "solution line"),
        ("e.ipynb", "solution shape"),
    ]
