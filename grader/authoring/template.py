"""Write the student template from the reference solutions.

Every region between `### BEGIN SOLUTION` and `### END SOLUTION` (nbgrader's markers) is
replaced by a stub that raises NotImplementedError. If the region's first line is a comment
`# hint: ...`, the hint becomes the stub's message. Everything outside the regions is copied
as it is, so forward computation works in the template and only the gradients are left to
write. `check` reports drift between the committed template and what would be generated, and
any solution line that leaked into the template.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
SKIP = {"__pycache__", ".pytest_cache"}


class MarkerError(ValueError):
    """Unbalanced or nested solution markers."""


@dataclass
class Region:
    start: int  # line index of BEGIN
    end: int  # line index of END
    indent: str
    hint: str


def regions(lines: list[str], filename: str = "<text>") -> list[Region]:
    found, start = [], None
    for i, line in enumerate(lines):
        text = line.strip()
        if text.startswith(BEGIN):
            if start is not None:
                raise MarkerError(f"{filename}:{i + 1}: {BEGIN} inside another solution region")
            start = i
        elif text.startswith(END):
            if start is None:
                raise MarkerError(f"{filename}:{i + 1}: {END} without {BEGIN}")
            body = lines[start + 1 : i]
            first = body[0].strip() if body else ""
            hint = first.removeprefix("# hint:").strip() if first.startswith("# hint:") else ""
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            found.append(Region(start, i, indent, hint))
            start = None
    if start is not None:
        raise MarkerError(f"{filename}:{start + 1}: {BEGIN} is never closed")
    return found


def strip_solutions(text: str, filename: str = "<text>") -> str:
    lines = text.splitlines(keepends=True)
    out, pos = [], 0
    for region in regions(lines, filename):
        out.extend(lines[pos : region.start])
        message = region.hint or "write this part"
        out.append(f"{region.indent}# YOUR CODE HERE\n")
        out.append(f"{region.indent}raise NotImplementedError({message!r})\n")
        pos = region.end + 1
    out.extend(lines[pos:])
    return "".join(out)


def solution_lines(text: str) -> set[str]:
    """Lines that only the solutions contain (those must never reach the template)."""
    lines = text.splitlines()
    inside: set[str] = set()
    outside: set[str] = set()
    marked = {i for r in regions(lines) for i in range(r.start, r.end + 1)}
    for i, line in enumerate(lines):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        (inside if i in marked else outside).add(key)
    return inside - outside


def _files(root: Path) -> list[Path]:
    return sorted(
        p.relative_to(root) for p in root.rglob("*") if p.is_file() and not SKIP.intersection(p.parts)
    )


def render(source: Path, rel: Path) -> bytes:
    data = (source / rel).read_bytes()
    if rel.suffix == ".py":
        return strip_solutions(data.decode(), str(rel)).encode()
    return data


def generate(
    reference: Path, template: Path, packages: tuple[str, ...] = ("micrograd", "needle")
) -> list[Path]:
    """Write the template; returns the files written. Files no longer in reference go."""
    written = []
    for package in packages:
        src, dst = reference / package, template / package
        if not src.is_dir():
            continue
        if dst.exists():
            shutil.rmtree(dst)
        for rel in _files(src):
            target = dst / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(render(src, rel))
            written.append(target)
    return written


def check(reference: Path, template: Path, packages: tuple[str, ...] = ("micrograd", "needle")) -> list[str]:
    """Problems with the committed template: drift, and solution lines found in it."""
    problems = []
    for package in packages:
        src, dst = reference / package, template / package
        if not src.is_dir():
            continue
        if not dst.is_dir():
            problems.append(f"{dst} is missing")
            continue
        want, have = set(_files(src)), set(_files(dst))
        problems += [f"{dst / rel} is missing" for rel in sorted(want - have)]
        problems += [f"{dst / rel} is not in {src}" for rel in sorted(have - want)]
        for rel in sorted(want & have):
            if render(src, rel) != (dst / rel).read_bytes():
                problems.append(f"{dst / rel} differs from what {src / rel} generates")
            if rel.suffix == ".py":
                leaked = solution_lines((src / rel).read_text()) & {
                    line.strip() for line in (dst / rel).read_text().splitlines()
                }
                problems += [f"{dst / rel} contains a solution line: {line}" for line in sorted(leaked)]
    return problems
