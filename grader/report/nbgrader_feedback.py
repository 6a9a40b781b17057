"""Feedback without hidden tests: an nbconvert preprocessor for `nbgrader generate_feedback`.

nbgrader's feedback is the autograded notebook as HTML: it would show the hidden cases'
diagnostics a test cell printed when autograding (their names, their expected values) and
tracebacks, and nbgrader has no setting that strips them. In every grade cell this
preprocessor

- cuts the hidden report out of the output (between `grader.report.cell`'s HIDDEN_BEGIN and
  HIDDEN_END lines) and leaves its points line: `hidden cases: 9/13 points`,
- replaces an error by its exception's name alone (a timeout's or a crash's traceback may
  run through hidden code),
- replaces a hidden region of the source, if the cell has one, by one comment line (the
  kit's own test cells have none: they run the hidden cases when autograding).

Configured in assignments/nbgrader_config.py, after nbgrader's GetGrades.
"""

from __future__ import annotations

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_output
from traitlets import Bool

from grader.report.cell import HIDDEN_BEGIN, HIDDEN_END

BEGIN = "### BEGIN HIDDEN TESTS"
END = "### END HIDDEN TESTS"
PLACEHOLDER = "# hidden tests are not shown"


def strip_source(source: str) -> str:
    out, inside = [], False
    for line in source.split("\n"):
        text = line.strip()
        if text.startswith(BEGIN):
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + PLACEHOLDER)
        elif text.startswith(END):
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def strip_text(text: str) -> tuple[str, bool]:
    """The text with each hidden report cut down to its points line; whether one was seen."""
    out, inside, seen = [], False, False
    for line in text.splitlines(keepends=True):
        if line.startswith(HIDDEN_BEGIN):
            inside, seen = True, True
        elif line.startswith(HIDDEN_END):
            inside = False
            out.append("hidden cases:" + line[len(HIDDEN_END) :])
        elif not inside:
            out.append(line)
    if inside:  # the cell stopped inside the hidden report
        out.append("hidden cases: stopped before the end\n")
    return "".join(out), seen


class HideHiddenTests(Preprocessor):
    enabled = Bool(True, help="nbconvert runs only enabled preprocessors").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        grade = cell.get("metadata", {}).get("nbgrader", {}).get("grade")
        if cell.cell_type != "code" or not (grade or BEGIN in cell.source):
            return cell, resources
        region = BEGIN in cell.source
        cell.source = strip_source(cell.source)
        # Streams may come in pieces: join them before cutting (the points line comes first).
        text = "".join(o.text for o in cell.get("outputs", []) if o.output_type == "stream")
        text, seen = strip_text(text)
        if region and not seen:
            text = "hidden cases: not run\n" + text
        outputs = [new_output("stream", name="stdout", text=text)] if text else []
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                outputs.append(new_output("stream", name="stdout", text=f"stopped: {output.ename}\n"))
            elif output.output_type != "stream":
                outputs.append(output)
        cell.outputs = outputs
        return cell, resources
