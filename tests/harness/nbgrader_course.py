"""A real nbgrader course in a temporary directory: generate, submit, autograde, export.

Shared by the end-to-end test and bench/bench_nbgrader.py. nbgrader runs as a command, from
the course root, with this checkout first on PYTHONPATH (its kernels import the grader).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

from grader.authoring.jupyter import import_nbformat

nbformat = import_nbformat()

REPO = Path(__file__).resolve().parents[2]
TIMESTAMP = "2025-01-15 12:00:00.000000 UTC"


def environment(case_timeout: float | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if case_timeout is not None:
        env["GRADER_CASE_TIMEOUT"] = str(case_timeout)
    return env


def make_course(root: Path, cell_timeout: int | None = None) -> Path:
    course = root / "course"
    skip = shutil.ignore_patterns("__pycache__", "gradebook.db")
    shutil.copytree(REPO / "assignments", course, ignore=skip)
    if cell_timeout is not None:
        with (course / "nbgrader_config.py").open("a") as config:
            config.write(f"\nc.Execute.timeout = {cell_timeout}\n")
    return course


#: `python -m nbgrader`, without the IRI grammar no nbgrader command uses (`grader.authoring.jupyter`):
#: 2.5 s less for each of the dozens of commands a course's tests run. The kernels are nbgrader's own.
NBGRADER = (
    "from grader.authoring.jupyter import without_iri_grammar\n"
    "with without_iri_grammar():\n"
    "    from nbgrader.apps.nbgraderapp import main\n"
    "main()"
)


def nbgrader(course: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", NBGRADER, *args]
    done = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def fast_path(course: Path, assignment: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`python -m grader grade-class --nbgrader COURSE ASSIGNMENT ARGS...`, run as an instructor
    would, from the kit's root."""
    command = [sys.executable, "-m", "grader", "grade-class", "--nbgrader", str(course), assignment, *args]
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the fast path failed:\n{done.stderr[-3000:]}")
    return done


def filled(course: Path, assignment: str) -> nbformat.NotebookNode:
    """The released notebook with every solution cell filled in from the source."""
    release = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = answers[meta["grade_id"]]
    return release


def released(course: Path, assignment: str) -> nbformat.NotebookNode:
    return nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)


def edit(nb: nbformat.NotebookNode, old: str, new: str) -> nbformat.NotebookNode:
    hits = [c for c in nb.cells if old in c.source]
    assert len(hits) == 1, f"{old!r} is in {len(hits)} cells"
    hits[0].source = hits[0].source.replace(old, new)
    return nb


def submit(course: Path, student: str, assignment: str, nb: nbformat.NotebookNode) -> Path:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    (folder / "timestamp.txt").write_text(TIMESTAMP)
    return folder / f"{assignment}.ipynb"


def export(course: Path, env: dict[str, str], name: str = "grades.csv") -> list[dict[str, str]]:
    nbgrader(course, "export", "--to", name, env=env)
    with (course / name).open() as f:
        return sorted(csv.DictReader(f), key=lambda row: (row["student_id"], row["assignment"]))


def formgrader_view(course: Path, assignment: str) -> dict[str, tuple[bool, float]]:
    """Student -> (shown as autograded, score) for each submission formgrader lists,
    from the API it is built on (`NbGraderAPI.get_submissions`)."""
    from nbgrader.apps.api import NbGraderAPI
    from traitlets.config import Config

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.course_id = "autodiff"
    config.Exchange.root = str(course / "exchange")  # unused: formgrader's view is the gradebook's
    api = NbGraderAPI(config=config)
    listed = api.get_submissions(assignment)
    return {s["student"]: (s["autograded"], s["score"]) for s in listed if s["submitted"]}


def cell_points(autograded: Path, assignment: str, student: str) -> dict[str, float]:
    """Points per test cell, from the autograded notebook's outputs as nbgrader reads them
    (`autograded`: a course's autograded/ folder, or a copy of it)."""
    from nbgrader.utils import determine_grade, is_grade

    nb = nbformat.read(autograded / student / assignment / f"{assignment}.ipynb", as_version=4)
    return {c.metadata.nbgrader.grade_id: determine_grade(c)[0] for c in nb.cells if is_grade(c)}
