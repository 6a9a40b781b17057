"""What must never reach a student: solution lines, hidden cases' names and sources.

`secrets(reference, suites)` collects them once; `scan(root, secrets)` reads every text
file under `root` (a built wheel unpacked, a student bundle) and names each leak. The wheel
test, `grader release` and `grader check` all use it, so "shippable" means one thing.

- A solution line is a line of a `### BEGIN SOLUTION` region of reference/ at least
  MIN_LINE characters long that the same file has nowhere outside its regions: short lines
  (`return out`) and comments occur everywhere and prove nothing. It leaks wherever it
  occurs in a file, a comment or a string too.
- A solution's shape catches the same code renamed: the tokens of a region (`tokenize`),
  with every identifier made anonymous and comments and strings dropped, cut into windows
  of WINDOW tokens. A window leaks where a shipped file's code has it, unless reference/
  has it outside its regions too (the given code is not a secret). A window is a few
  lines: a copy with a line or two changed still holds several.
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

import io
import json
import keyword
import re
import tokenize
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from grader.authoring.template import regions, solution_lines

MIN_LINE = 20
#: tokens in a window of a solution's shape. The grader's own code has windows of 16 tokens
#: in common with the solutions (`x.grad = ...` and the like), none of 20
WINDOW = 20
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
    #: each window of a solution's shape, and the region it comes from (`engine.py:153 (backward)`)
    shapes: dict[tuple[str, ...], str] = field(default_factory=dict)


@dataclass(frozen=True)
class Leak:
    path: str
    #: "solution line", "solution shape", "hidden case name", "hidden source", "kit path",
    #: "forbidden file"
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.path}: {self.kind}: {self.text[:80]}"


def _long_lines(text: str) -> set[str]:
    return {s for line in text.splitlines() if len(s := line.strip()) >= MIN_LINE and not s.startswith("#")}


#: directories that never ship, wherever they are: solutions, hidden suites, the harness
FORBIDDEN_DIRS = ("reference", "hidden", "harness", "__pycache__")
#: an oracle cache file (`grader.verdict.oracle`): expected values, hidden ones too
ORACLE_CACHE = re.compile(r"^[a-z_]+-(public|hidden)-[0-9a-f]{24}\.json$")


# ---- a solution's shape ----


def shape(source: str) -> list[tuple[str, int]]:
    """The code's tokens as (shape, line): an identifier is `_` (keywords stay), a number
    itself, an operator itself, a statement's end `;`, an indent `>` and a dedent `<`;
    comments, strings and f-strings are dropped. Raises SyntaxError or tokenize.TokenError
    on what is not Python."""
    found: list[tuple[str, int]] = []
    fstring = 0  # depth inside f-strings (Python 3.12 splits them into tokens)
    starts, ends = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -1)
    dropped = {tokenize.COMMENT, tokenize.NL, tokenize.STRING, tokenize.ENCODING, tokenize.ENDMARKER}
    marks = {tokenize.NEWLINE: ";", tokenize.INDENT: ">", tokenize.DEDENT: "<"}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (starts, ends):
            fstring += 1 if token.type == starts else -1
        elif fstring or token.type in dropped:
            continue
        elif token.type == tokenize.NAME:
            found.append((token.string if keyword.iskeyword(token.string) else "_", token.start[0]))
        else:
            found.append((marks.get(token.type, token.string), token.start[0]))
    return found


def windows(tokens: list[tuple[str, int]]) -> dict[tuple[str, ...], int]:
    """Every run of WINDOW tokens, and the line it starts on (its first occurrence)."""
    found: dict[tuple[str, ...], int] = {}
    shapes = [s for s, _ in tokens]
    for i in range(len(tokens) - WINDOW + 1):
        found.setdefault(tuple(shapes[i : i + WINDOW]), tokens[i][1])
    return found


def _solution_shapes(reference: Path) -> dict[tuple[str, ...], str]:
    """The windows of every solution region's shape that reference/ has nowhere else."""
    inside: dict[tuple[str, ...], str] = {}
    given: set[tuple[str, ...]] = set()
    for path in sorted(reference.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        tokens = shape(text)
        marked: set[int] = set()
        for region in regions(lines, str(path)):
            body = range(region.start + 2, region.end + 1)  # 1-based lines strictly inside
            marked.update(body)
            where = (
                f"{path.relative_to(reference).as_posix()}:{body.start} ({_function_at(lines, region.start)})"
            )
            for window in windows([t for t in tokens if t[1] in body]):
                inside.setdefault(window, where)
        given |= windows([t for t in tokens if t[1] not in marked]).keys()
    return {window: where for window, where in inside.items() if window not in given}


def _function_at(lines: list[str], index: int) -> str:
    """The name of the function the line `index` (0-based) is in."""
    for line in reversed(lines[:index]):
        match = re.match(r"\s*(?:async\s+)?def\s+(\w+)", line)
        if match:
            return match.group(1)
    return "module"


def _code(path: Path, text: str) -> list[str]:
    """The Python code in a file: a module, a notebook's code cells, a Markdown file's
    fenced blocks."""
    if path.suffix == ".py":
        return [text]
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except (ValueError, AttributeError):
            return []
        return [
            "".join(c.get("source", ""))
            for c in cells
            if isinstance(c, dict) and c.get("cell_type") == "code"
        ]
    if path.suffix == ".md":
        return re.findall(r"^\s*```[\w-]*\n(.*?)^\s*```", text, re.M | re.S)
    return []


def _shape_leaks(rel: str, text: str, path: Path, found: Secrets) -> list[Leak]:
    """One leak for a file whose code has windows of solutions' shapes, naming the solution
    it has most of (a renamed walk also looks a little like another walk)."""
    hits: dict[str, list[int]] = {}
    for code in _code(path, text):
        try:
            tokens = shape(code)
        except (SyntaxError, tokenize.TokenError):
            continue  # not Python (a cell of shell commands): its lines are still checked
        for window, line in windows(tokens).items():
            where = found.shapes.get(window)
            if where is not None:
                hits.setdefault(where, []).append(line)
    if not hits:
        return []
    where, lines = max(hits.items(), key=lambda hit: (len(hit[1]), hit[0]))
    others = f", +{len(hits) - 1} more" if len(hits) > 1 else ""  # short: a leak is one line of 80
    return [Leak(rel, "solution shape", f"line {min(lines)} is {where} renamed{others}")]


# ---- collecting and scanning ----


def secrets(reference: Path, suites: Path) -> Secrets:
    found = Secrets(paths={str(reference.resolve().parent).rstrip("/") + "/"})
    for path in sorted(reference.rglob("*.py")):
        found.solution |= {line for line in solution_lines(path.read_text()) if len(line) >= MIN_LINE}
    found.shapes = _solution_shapes(reference)
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


def scan(root: Path, found: Secrets, only: Collection[str] | None = None) -> list[Leak]:
    """Every leak in the files under `root` (or in those of them whose paths relative to it
    are in `only`), by path relative to it."""
    leaks: list[Leak] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if only is not None and rel not in only:
            continue
        text = path.read_bytes().decode(errors="replace")
        for name in sorted(found.hidden_names):
            if name in text or name in rel:
                leaks.append(Leak(rel, "hidden case name", name))
        if path.suffix not in TEXT_SUFFIXES:
            continue
        leaks += [Leak(rel, "kit path", kit) for kit in sorted(found.paths) if kit in text]
        lines = {line.strip() for line in text.splitlines()}
        leaks += [Leak(rel, "solution line", line) for line in sorted(found.solution) if line in text]
        leaks += _shape_leaks(rel, text, path, found)
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
