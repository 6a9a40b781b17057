"""What must never reach a student: solution lines, hidden cases' names and sources.

`secrets(reference, suites)` collects them once; `scan(root, secrets)` reads every text
file under `root` (a built wheel unpacked, a student bundle) and names each leak. The wheel
test, `grader release` and `grader check` all use it, so "shippable" means one thing.

- A solution line is a line of a `### BEGIN SOLUTION` region of reference/ at least
  MIN_LINE characters long that the same file has nowhere outside its regions: short lines
  (`return out`) and comments occur everywhere and prove nothing.
- A kit path is the checkout's absolute path in any file (a generated file that says
  where it came from points at `reference/` and the hidden suites); `forbidden_files`
  adds what must not ship by its name: a `reference`, `hidden` or `harness` directory
  (the solutions, the hidden suites, the bug banks), bytecode, an oracle cache file.
- A hidden name is a hidden case's name or its module's (`test_hidden_<topic>`): the
  hidden suites' names all start with `hidden_`, so they are distinctive. A hidden source
  is any line of a hidden suite file at least MIN_LINE characters long that no public
  suite file has too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.authoring.template import solution_lines

MIN_LINE = 20
#: files scanned as text; anything else (bytecode, images) is read for hidden names only
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".txt",
    ".toml",
    ".cfg",
    ".ini",
    ".json",
    ".yml",
    ".yaml",
    ".ipynb",
    ".html",
    ".sh",
    "",
}


@dataclass
class Secrets:
    solution: set[str] = field(default_factory=set)
    hidden_names: set[str] = field(default_factory=set)
    hidden_source: set[str] = field(default_factory=set)
    #: absolute paths of the kit's checkout, each ending in "/"
    paths: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Leak:
    path: str
    kind: str  # "solution line", "hidden case name", "hidden source", "kit path", "forbidden file"
    text: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.text[:80]}"


def _long_lines(text: str) -> set[str]:
    return {s for line in text.splitlines() if len(s := line.strip()) >= MIN_LINE and not s.startswith("#")}


#: directories that never ship, wherever they are: solutions, hidden suites, the harness
FORBIDDEN_DIRS = ("reference", "hidden", "harness", "__pycache__")
#: an oracle cache file (`grader.verdict.oracle`): expected values, hidden ones too
ORACLE_CACHE = re.compile(r"^[a-z_]+-(public|hidden)-[0-9a-f]{24}\.json$")


def secrets(reference: Path, suites: Path) -> Secrets:
    found = Secrets(paths={str(reference.resolve().parent).rstrip("/") + "/"})
    for path in sorted(reference.rglob("*.py")):
        found.solution |= {line for line in solution_lines(path.read_text()) if len(line) >= MIN_LINE}
    public: set[str] = set()
    for path in sorted((suites / "public").rglob("*.py")):
        public |= _long_lines(path.read_text())
    for path in sorted((suites / "hidden").rglob("*.py")):
        text = path.read_text()
        if path.stem.startswith("test_"):
            found.hidden_names.add(path.stem)
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("def test_"):
                found.hidden_names.add(stripped[len("def test_") :].split("(")[0])
        found.hidden_source |= _long_lines(text) - public
    return found


def scan(root: Path, found: Secrets) -> list[Leak]:
    """Every leak in the files under `root`, by path relative to it."""
    leaks: list[Leak] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        text = path.read_bytes().decode(errors="replace")
        for name in sorted(found.hidden_names):
            if name in text or name in rel:
                leaks.append(Leak(rel, "hidden case name", name))
        if path.suffix not in TEXT_SUFFIXES:
            continue
        leaks += [Leak(rel, "kit path", kit) for kit in sorted(found.paths) if kit in text]
        lines = {line.strip() for line in text.splitlines()}
        leaks += [Leak(rel, "solution line", line) for line in sorted(found.solution & lines)]
        leaks += [Leak(rel, "hidden source", line) for line in sorted(found.hidden_source & lines)]
    return leaks


def forbidden_files(root: Path) -> list[Leak]:
    """Files under `root` that must not ship, whatever they hold, by their names."""
    leaks: list[Leak] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir():
            if rel.name in FORBIDDEN_DIRS:
                leaks.append(Leak(rel.as_posix(), "forbidden file", f"a {rel.name}/ directory"))
        elif path.suffix in (".pyc", ".pyo"):
            leaks.append(Leak(rel.as_posix(), "forbidden file", "bytecode"))
        elif ORACLE_CACHE.match(path.name):
            leaks.append(Leak(rel.as_posix(), "forbidden file", "an oracle cache"))
    return leaks
