"""Bug banks: the mistakes students make, each as exact text edits of the reference.

They hold solution text, so they live here, under tests/, and never in the installed
package. `materialize(bug, dest)` writes the buggy submission: a copy of the reference
package(s) the edits touch, with the edits applied (each `old` must occur exactly once).
micrograd.py and needle.py hold one bank each; test_micrograd_bugs.py and
test_needle_bugs.py grade every bug and check that its `caught_by` cases fail with a
message that names the culprit (`says`), so a change that lets a bug through fails CI;
test_slips.py counts the messages that name the slip too (`slip`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[3] / "reference"


@dataclass(frozen=True)
class Bug:
    name: str
    description: str
    #: (file relative to the submission, exact old text, new text)
    edits: list[tuple[str, str, str]]
    #: case patterns, `module::name[param]` with `*` as a wildcard, that must fail
    caught_by: list[str] = field(default_factory=list)
    #: text that each of those failures' messages must contain (what it points at)
    says: tuple[str, ...] = ()
    #: text that names the slip itself, the mistake and its fix, beyond the place (the
    #: catalogue's line, `grader/assignments/<name>/slips.py`); empty when the slip is a
    #: rule's own arithmetic, which naming the rule is all a message can do
    slip: tuple[str, ...] = ()


class EditError(ValueError):
    """An edit's `old` text is not in the reference exactly once (the bank is stale)."""


def materialize(bug: Bug, dest: str | Path, reference: Path = REFERENCE) -> Path:
    """Copy the reference packages that `bug` edits into `dest`, apply the edits, return dest."""
    dest = Path(dest)
    for package in sorted({Path(file).parts[0] for file, _, _ in bug.edits}):
        target = dest / package
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(reference / package, target, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in bug.edits:
        path = dest / file
        text = path.read_text()
        count = text.count(old)
        if count != 1:
            raise EditError(f"{bug.name}: the text to replace occurs {count} times in {file}: {old!r}")
        path.write_text(text.replace(old, new))
    return dest
