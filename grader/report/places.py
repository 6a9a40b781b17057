"""Messages about a notebook's code name its cells, not the files the grader made of it.

The fast path grades a notebook as the package it writes from the graded cells
(`grader.authoring.nbgrader_io.extract`), so an exception would say `engine.py, line 52`:
a file the student never saw. Beside the package, `extract` leaves a map (`PLACES`) from
each module's lines to the cells they came from; `name_cells` rewrites a report's places
with it (`cell "class Value:", line 48`), as a kernel's traceback points into the cell; so
for a cell the student added, whose definitions `extract` keeps (`cell "def helper(g):", line 2`).
Lines the kit wrote around the cells (a module's imports) keep their file's name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from grader.report.model import Report

#: the map's file, beside the extracted package: {"engine.py": [[first line, lines, cell,
#: the cell's lines before the first], ...]}, a chunk for each graded cell, and for each
#: definition kept from a cell the student added
PLACES = "places.json"
#: `engine.py, line 52` (an exception's place) and `ops.py line 347` (the rule that ran)
_PLACE = re.compile(r"\b(?P<file>[A-Za-z_]\w*\.py)(?P<sep>,? line )(?P<line>\d+)")


def cell_label(source: str) -> str:
    """How a message names a cell: its first line of code, as the student sees it."""
    code = (line.strip() for line in source.splitlines())
    first = next((line for line in code if line and not line.startswith("#")), "")
    return first if len(first) <= 48 else first[:45] + "..."


def write(directory: Path, places: dict[str, list[list]]) -> None:
    (directory / PLACES).write_text(json.dumps(places))


def load(directory: Path) -> dict[str, list[list]] | None:
    """The map `extract` left in the submission `directory`, if it is one it made (a map of
    any other form, say a file of that name among a student's own, is not read)."""
    try:
        found = json.loads((directory / PLACES).read_text())
    except (OSError, ValueError):
        return None
    kinds = [int, int, str, int]
    well_formed = type(found) is dict and all(
        type(name) is str
        and type(chunks) is list
        and all(type(c) is list and [type(x) for x in c] == kinds for c in chunks)
        for name, chunks in found.items()
    )
    return found if well_formed else None


def in_cells(text: str, places: dict[str, list[list]]) -> str:
    """`text` with each place in an extracted module named by its cell."""

    def cell(match: re.Match[str]) -> str:
        line = int(match["line"])
        for first, count, label, offset in places.get(match["file"], ()):
            if first <= line < first + count:
                return f'cell "{label}"{match["sep"]}{line - first + 1 + offset}'
        return match[0]

    return _PLACE.sub(cell, text)


def name_cells(report: Report, directory: Path) -> None:
    """Rewrite the report's places in cells, if `directory` is a notebook's extracted code."""
    places = load(directory)
    if not places:
        return
    for result in report.results:
        result.message = in_cells(result.message, places)
    report.errors = [in_cells(text, places) for text in report.errors]
    report.notes = [in_cells(text, places) for text in report.notes]
