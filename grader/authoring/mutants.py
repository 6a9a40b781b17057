"""Mechanical mutants of the reference: small wrong versions that some case must catch.

A case that no wrong version of the engine fails proves nothing (it returns a constant,
compares what it built itself, or never reaches the code it names). `grader check` grades
mutants of reference/ and reports every case none of them fails.

A mutant changes one spot of one module. Spots are taken from two pools:

- `solution`: inside a `### BEGIN SOLUTION` region, the code students write (gradient
  rules, `backward`, the topological sort);
- `forward`: the other function bodies, the forward code the template gives away. Only
  these can fail a forward case, since the template, which has no solution at all, passes
  them.

The operators are the slips a student makes: `+` for `-`, `*` for `/`, a dropped term,
swapped operands, `=` for `+=`, a gradient scaled by 2, a negation lost, a comparison
reversed, a constant off by one, a statement left out, `reversed(x)` for `x`.

Each mutant is the whole module's new text: the spot's source is replaced, everything else
stays byte for byte, so a mutant reads like the reference with one slip.
"""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.authoring.template import regions

POOLS = ("solution", "forward")
#: operator swaps: what a slip of the finger turns each into
SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.Pow: ast.Mult,
    ast.MatMult: ast.Mult,
}
COMPARES: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Gt: ast.Lt,
    ast.Lt: ast.Gt,
    ast.GtE: ast.LtE,
    ast.LtE: ast.GtE,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
#: operations whose operands may not be swapped without changing the result
ORDERED = (ast.Sub, ast.Div, ast.Pow, ast.MatMult)
#: one-argument wrappers a slip leaves out
WRAPPERS = {"reversed", "list", "tuple", "sorted", "float", "abs"}
SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.FloorDiv: "//",
    ast.Mod: "%",
}


@dataclass(frozen=True)
class Mutant:
    """One slip in one module of the reference."""

    #: where, the slip and the line it changes: `micrograd/engine.py:52 * -> +: <the line>`
    id: str
    assignment: str
    path: str  # relative to reference/: `micrograd/engine.py`
    line: int
    site: str  # the function it is in: `Value.__mul__._backward`
    function: int  # that function's first line, as its code object has it (`co_firstlineno`)
    pool: str  # "solution" or "forward"
    what: str  # the slip, in words
    text: str = ""  # the module's whole new text

    def write(self, reference: Path, dest: Path) -> Path:
        """A copy of the mutant's package under `dest`, with the mutated module."""
        package = self.path.split("/")[0]
        for source in sorted((reference / package).rglob("*.py")):
            target = dest / source.relative_to(reference)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
        (dest / self.path).write_text(self.text)
        return dest


@dataclass(frozen=True)
class Spot:
    """A node to replace: its byte span and what goes there."""

    node: ast.AST
    replacement: str
    what: str


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0


def _expr(node: ast.expr) -> str:
    """An expression's text, parenthesized so that it binds as the node it replaces did."""
    return f"({ast.unparse(node)})"


def _scaled(node: ast.expr) -> ast.expr:
    return ast.BinOp(left=ast.Constant(2), op=ast.Mult(), right=node)


def _binop_spots(node: ast.BinOp) -> Iterator[Spot]:
    symbol = SYMBOLS.get(type(node.op), "?")
    swap = SWAPS.get(type(node.op))
    if swap is not None:
        changed = ast.BinOp(left=node.left, op=swap(), right=node.right)
        yield Spot(node, _expr(changed), f"{symbol} -> {SYMBOLS[swap]}")
    if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        yield Spot(node, _expr(node.left), f"drop the term after {symbol}")
        yield Spot(node, _expr(node.right), f"drop the term before {symbol}")
    if isinstance(node.op, ORDERED):
        swapped = ast.BinOp(left=node.right, op=node.op, right=node.left)
        yield Spot(node, _expr(swapped), f"swap the operands of {symbol}")


def _spots(node: ast.AST) -> Iterator[Spot]:
    """Every slip at `node` itself (its children are visited on their own)."""
    if isinstance(node, ast.BinOp):
        yield from _binop_spots(node)
    elif isinstance(node, ast.AugAssign):
        target = ast.unparse(node.target)
        yield Spot(
            node,
            f"{target} = {ast.unparse(node.value)}",
            "+= -> =" if isinstance(node.op, ast.Add) else "op= -> =",
        )
        swap = SWAPS.get(type(node.op))
        if swap is not None:
            changed = ast.AugAssign(target=node.target, op=swap(), value=node.value)
            yield Spot(node, ast.unparse(changed), f"{SYMBOLS[type(node.op)]}= -> {SYMBOLS[swap]}=")
        scaled = ast.AugAssign(target=node.target, op=node.op, value=_scaled(node.value))
        yield Spot(node, ast.unparse(scaled), "twice the update")
    elif isinstance(node, ast.Return) and node.value is not None:
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for i, value in enumerate(values):
            which = f" (item {i + 1})" if len(values) > 1 else ""
            yield Spot(value, _expr(_scaled(value)), f"return twice the value{which}")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield Spot(node, _expr(node.operand), "drop a minus sign")
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARES:
        changed = ast.Compare(
            left=node.left, ops=[COMPARES[type(node.ops[0])]()], comparators=node.comparators
        )
        yield Spot(node, _expr(changed), "reverse a comparison")
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield Spot(node, _expr(ast.BoolOp(op=other, values=node.values)), "and <-> or")
    elif isinstance(node, ast.IfExp):
        changed = ast.IfExp(test=node.test, body=node.orelse, orelse=node.body)
        yield Spot(node, _expr(changed), "swap the branches of an if-expression")
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield Spot(node, repr(node.value + 1), f"{node.value!r} -> {node.value + 1!r}")
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in WRAPPERS
        and len(node.args) == 1
        and not node.keywords
    ):
        yield Spot(node, _expr(node.args[0]), f"leave out {node.func.id}()")
    if isinstance(node, (ast.Expr, ast.AugAssign, ast.If, ast.For, ast.While)) or (
        isinstance(node, ast.Assign)
        and all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets)
    ):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):  # a docstring
            first = ast.unparse(node).splitlines()[0]
            yield Spot(node, "pass", f"leave out `{first[:60]}`")


def first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The line a function's code object starts at (`co_firstlineno`): its first decorator's."""
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


class _Sites(ast.NodeVisitor):
    """Each node inside a function, with the innermost function's qualified name and first
    line (a mutant there changes nothing for a case that never calls that function)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.lines: list[int] = []
        self.found: list[tuple[ast.AST, str, int]] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.names.append(node.name)
        for child in node.body:
            self.visit(child)
        self.names.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.names.append(node.name)
        self.lines.append(first_line(node))
        for child in node.body:
            self.visit(child)
        self.lines.pop()
        self.names.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return None  # an f-string's parts are messages, not arithmetic

    def generic_visit(self, node: ast.AST) -> None:
        if self.lines and not isinstance(node, (ast.arguments, ast.expr_context)):
            self.found.append((node, ".".join(self.names), self.lines[-1]))
        super().generic_visit(node)


def _replace(source: bytes, lines: list[int], span: tuple[int, int, int, int], text: str) -> bytes:
    """`source` with the byte span replaced (ast's columns count UTF-8 bytes)."""
    line, col, end_line, end_col = span
    start = lines[line - 1] + col
    stop = lines[end_line - 1] + end_col
    return source[:start] + text.encode() + source[stop:]


def _line_starts(source: bytes) -> list[int]:
    starts, pos = [0], 0
    for piece in source.splitlines(keepends=True):
        pos += len(piece)
        starts.append(pos)
    return starts


def mutants_of(text: str, path: str, assignment: str) -> list[Mutant]:
    """Every mutant of one module, in source order; ones that do not compile or change
    nothing are left out, and so are duplicates."""
    tree = ast.parse(text)
    lines = text.splitlines()
    marked: set[int] = set()
    for region in regions(lines, path):
        marked |= set(range(region.start + 2, region.end + 1))  # 1-based lines strictly inside
    visitor = _Sites()
    visitor.visit(tree)
    source = text.encode()
    starts = _line_starts(source)
    seen = {text}
    found = []
    for node, site, function in visitor.found:
        if not hasattr(node, "lineno"):
            continue
        for spot in _spots(node):
            span = _span(spot.node)
            inside = all(line in marked for line in range(span[0], span[2] + 1))
            pool = "solution" if inside else "forward"
            if not inside and any(line in marked for line in range(span[0], span[2] + 1)):
                continue  # a spot that straddles a region's edge is neither
            new = _replace(source, starts, span, spot.replacement).decode()
            if new in seen:
                continue
            try:
                ast.parse(new)
            except SyntaxError:
                continue
            seen.add(new)
            original = ast.get_source_segment(text, spot.node) or ""
            first = original.splitlines()[0] if original else ""
            found.append(
                Mutant(
                    id=f"{path}:{span[0]} {spot.what}: {first.strip()[:70]}",
                    assignment=assignment,
                    path=path,
                    line=span[0],
                    site=site,
                    function=function,
                    pool=pool,
                    what=spot.what,
                    text=new,
                )
            )
    return found


def mutants(reference: Path, assignments: tuple[str, ...] | list[str]) -> list[Mutant]:
    """Every mutant of the assignments' packages under `reference`, module by module."""
    found: list[Mutant] = []
    for name in assignments:
        for path in sorted((reference / name).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(reference).as_posix()
            found += mutants_of(path.read_text(), rel, name)
    return found


def ordered(found: list[Mutant], seed: int = 0) -> list[Mutant]:
    """The mutants in the order they are tried: one per site (function) in turn, each site's
    in a random order, so a sample of N covers as many functions as N allows."""
    rng = random.Random(seed)
    by_site: dict[tuple[str, str, str], list[Mutant]] = {}
    for mutant in found:
        by_site.setdefault((mutant.path, mutant.site, mutant.pool), []).append(mutant)
    queues = list(by_site.values())
    for queue in queues:
        rng.shuffle(queue)
    rng.shuffle(queues)
    result: list[Mutant] = []
    depth = 0
    while len(result) < len(found):
        result += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return result
