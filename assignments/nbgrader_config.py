"""nbgrader's configuration for the autodiff course: run nbgrader from this directory.

The source notebooks under source/ are generated: `python -m grader notebooks`.
"""

import importlib.util
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "autodiff"
c.CourseDirectory.root = str(Path(__file__).resolve().parent)

# One test cell runs one topic's public and hidden cases; each case has its own time limit
# (as `python -m grader grade` gives it), so this only stops what a signal cannot.
c.Execute.timeout = 300

# Feedback must not show hidden test source, expected values or tracebacks.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    "grader.report.nbgrader_feedback.HideHiddenTests",
]

# A checkout that is not installed: the kernels that autograde import the grader from it.
_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "grader" / "__init__.py").is_file():
    _path = os.environ.get("PYTHONPATH", "")
    if str(_checkout) not in _path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(_checkout), _path) if p)
elif importlib.util.find_spec("grader") is None and sys.argv[1:2] == ["autograde"]:
    # Elsewhere the grader must be installed: without it every test cell fails at its first
    # line, and autograding would give every student zero without a word.
    print(
        "nbgrader autograde: the course needs the kit's `grader`: run `bash scripts/setup.sh`",
        file=sys.stderr,
    )
    raise SystemExit(2)
