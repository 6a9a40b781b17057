"""`python -m grader check`: is an assignment ready to hand out?

Six checks, each one row of a table (name, ok or FAIL, what was found):

- the reference scores full marks (graded in this process, public and hidden suites);
- the untouched template scores only the forward points: every forward case (one that
  calls no function holding a solution region when run on the reference, see
  `grader.authoring.forward`) passes and no other case does; a case of topic `forward`
  must be one;
- every case can fail: some mutant of the reference fails it (`grader.authoring.mutants`,
  graded by `grader.authoring.killing`);
- no solution leaks: the installed package (the wheel, built and unpacked) and the student
  template hold no solution line, hidden case name or hidden source (`leaks.scan`);
- generated files are in sync: student_template/ and the nbgrader course's notebooks are
  what `grader template` and `grader notebooks` would write;
- every case is in exactly one topic and is worth points (> 0), and no two cases share an id.

The command exits 1 when a check fails, 0 otherwise.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from grader.authoring import killing, leaks, mutants, template
from grader.authoring.forward import ReachingRunner, solution_functions
from grader.case.define import Case, collect
from grader.case.limits import SLOWER
from grader.pipeline import InProcessRunner, grade, used_by
from grader.report.model import Report
from grader.sandbox import Limits
from grader.verdict.oracle import Oracle

#: the topic of the cases the untouched template passes: they run no gradient rule
FORWARD = "forward"
#: how many case ids a row's detail names before it says "and N more"
SHOWN = 8


@dataclass
class Row:
    """One check's outcome, as the table shows it."""

    name: str
    ok: bool
    detail: str


@dataclass
class Options:
    """What to check, and where the kit's parts are."""

    repo: Path
    reference: Path
    template: Path
    suites: Path
    course: Path
    assignments: tuple[str, ...]
    #: how many mutants to grade (the first N of `mutants.ordered`), None for all of them
    mutants: int | None = None
    jobs: int = 2
    seed: int = 0
    oracle: Oracle = field(default_factory=lambda: Oracle(None))


def listed(ids: list[str], limit: int = SHOWN) -> str:
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def graded(directory: Path, cases: list[Case], oracle: Oracle) -> Report:
    return grade(directory, cases, oracle, InProcessRunner())


@dataclass
class Graded:
    """The reference's report, its forward cases, and the reference's functions each case's
    run called (`grader.authoring.forward`)."""

    report: Report
    forward: set[str]
    calls: dict[str, set[tuple[str, int]]]


def graded_reference(options: Options, cases: list[Case]) -> Graded:
    files = {
        str(p.resolve()) for name in options.assignments for p in (options.reference / name).rglob("*.py")
    }
    runner = ReachingRunner(solution_functions(options.reference, options.assignments), files)
    report = grade(options.reference, cases, options.oracle, runner)
    forward = {c.id for c in cases if not runner.reached.get(c.id, True)}
    return Graded(report, forward, runner.calls)


def check_reference(report: Report) -> Row:
    failed = [r.id for r in report.results if not r.passed]
    ok = not failed and not report.errors and report.max_score > 0
    detail = f"{report.score:g} of {report.max_score:g} points, {len(report.results)} cases"
    if failed:
        detail += f"; failed: {listed(failed)}"
    if report.errors:
        detail += f"; {'; '.join(report.errors)}"
    return Row("the reference scores full marks", ok, detail)


def check_template(report: Report, forward: set[str], cases: list[Case]) -> Row:
    """`forward`: the ids of the cases that reach no solution on the reference."""
    missed = [r.id for r in report.results if r.id in forward and not r.passed]
    extra = [r.id for r in report.results if r.passed and r.id not in forward]
    worth = sum(c.points for c in cases if c.id in forward)
    labelled = [c.id for c in cases if c.topic == FORWARD and c.id not in forward]
    detail = (
        f"{report.score:g} of {report.max_score:g} points; the {len(forward)} forward cases (those that call "
        f"no function with a solution region on the reference) are worth {worth:g}"
    )
    if missed:
        detail += f"; forward cases it fails: {listed(missed)}"
    if extra:
        detail += f"; cases it passes that need a solution: {listed(extra)}"
    if labelled:
        detail += f"; topic {FORWARD!r} but they reach a solution: {listed(labelled)}"
    ok = bool(forward) and not missed and not extra and not labelled and report.score == worth
    return Row("the template scores only the forward points", ok, detail)


def check_topics(cases: list[Case], suites: Path) -> Row:
    from grader.notebook import topics

    problems = []
    twice = sorted(i for i, n in Counter(c.id for c in cases).items() if n > 1)
    if twice:
        problems.append(f"ids used twice: {listed(twice)}")
    untopical = [c.id for c in cases if not (isinstance(c.topic, str) and c.topic.strip())]
    if untopical:
        problems.append(f"no topic: {listed(untopical)}")
    pointless = [c.id for c in cases if not (math.isfinite(c.points) and c.points > 0)]
    if pointless:
        problems.append(f"points not > 0: {listed(pointless)}")
    placed: Counter[int] = Counter()
    for name in sorted({c.assignment for c in cases}):
        for topic in topics(name, suites):
            placed.update(id(c) for c in topic.public + topic.hidden)
    misplaced = [c.id for c in cases if placed[id(c)] != 1]
    if misplaced:
        problems.append(f"not in exactly one topic: {listed(misplaced)}")
    count = len({(c.assignment, c.topic) for c in cases})
    detail = f"{len(cases)} cases in {count} topics, {sum(c.points for c in cases):g} points"
    return Row("every case is in one topic, with points", not problems, "; ".join([detail, *problems]))


def check_sync(options: Options) -> Row:
    problems = template.check(options.reference, options.template, options.assignments)
    try:
        from grader.authoring import notebooks
    except ImportError as exc:  # nbformat is the `nbgrader` extra's
        problems.append(f"the notebooks cannot be checked: {exc} (pip install 'grader[nbgrader]')")
    else:
        problems += notebooks.check(options.reference, options.suites, options.course, options.assignments)
    detail = "student_template/ and the course's notebooks match reference/ and the suites"
    return Row("generated files are in sync", not problems, "; ".join(problems[:SHOWN]) or detail)


def check_leaks(options: Options) -> Row:
    from grader.authoring.wheel import WheelError, build_wheel

    known = leaks.secrets(options.reference, options.suites)
    with tempfile.TemporaryDirectory(prefix="grader-check-wheel-") as tmp:
        try:
            wheel = build_wheel(options.repo, Path(tmp))
        except WheelError as exc:
            return Row("no solution leaks", False, str(exc))
        found = [f"wheel: {leak}" for leak in leaks.forbidden_files(wheel) + leaks.scan(wheel, known)]
        shipped = sorted(
            p.relative_to(wheel).as_posix()
            for p in wheel.rglob("*")
            if p.relative_to(wheel).parts[0] in ("reference", "tests", "student_template")
        )
        found += [f"wheel: {path} is shipped" for path in shipped[:SHOWN]]
    for name in options.assignments:
        if (options.template / name).is_dir():
            found += [f"student_template: {leak}" for leak in leaks.scan(options.template / name, known)]
    detail = (
        f"the wheel and student_template/ hold none of {len(known.solution)} solution lines "
        f"(nor {len(known.shapes)} windows of their shapes), "
        f"{len(known.hidden_names)} hidden names, {len(known.hidden_source)} hidden source lines"
    )
    return Row("no solution leaks", not found, "; ".join(found[:SHOWN]) or detail)


def timeouts(cases: list[Case], reference: Report, oracle: Oracle) -> dict[str, float]:
    """Each case's time limit on a mutant: grading's timeout, or SLOWER times what the
    reference or PyTorch took, whichever is longest."""
    took = {r.id: r.seconds for r in reference.results}
    floor = Limits().timeout
    return {c.id: max(floor, SLOWER * max(took.get(c.id, 0.0), oracle.seconds.get(c.id, 0.0))) for c in cases}


def check_mutants(
    options: Options,
    cases: list[Case],
    reference: Graded,
    progress: Callable[[int, int], None] | None = None,
) -> Row:
    every = mutants.ordered(mutants.mutants(options.reference, options.assignments), options.seed)
    chosen = every if options.mutants is None else every[: options.mutants]
    root = options.reference.resolve()

    def reaches(mutant: mutants.Mutant, case: Case) -> bool:
        """Whether the case's run on the reference called the function the mutant changes
        (unknown, say the reference failed to load: assume it does)."""
        calls = reference.calls.get(case.id)
        return calls is None or (str(root / mutant.path), mutant.function) in calls

    kills = killing.kill(
        chosen,
        cases,
        options.oracle.expected,
        options.reference,
        timeouts(cases, reference.report, options.oracle),
        jobs=options.jobs,
        progress=progress,
        reaches=reaches,
        needs=used_by(options.oracle),
    )
    survivors = kills.survivors
    pools = Counter(m.pool for m in chosen)
    detail = (
        f"{len(chosen)} of {len(every)} mutants ({pools['solution']} in solution regions, "
        f"{pools['forward']} in forward code): {kills.ran} graded ({kills.skipped} left no case to "
        f"fail that calls their function), {kills.killing} failed a case, "
        f"{kills.unloadable} did not import; {len(cases) - len(survivors)} of {len(cases)} cases "
        f"failed by one, {kills.seconds:.0f} s"
    )
    if survivors:
        detail += f"; no mutant fails: {listed(survivors)}"
        if options.mutants is not None and options.mutants < len(every):
            detail += " (--mutants all grades every mutant)"
    if kills.broken:
        first = next(iter(kills.broken.values())).strip().splitlines()[-1]
        detail += f"; {len(kills.broken)} mutants could not be graded here: {first}"
    return Row("every case can fail", not survivors and not kills.broken, detail)


def run(options: Options, say: Callable[[str], None] = lambda text: None) -> list[Row]:
    """Every check, in order; `say` hears what is being done (for a status line)."""
    cases = collect(options.suites, options.assignments, ("public", "hidden"))
    rows = [check_topics(cases, options.suites)]
    say("grading the reference")
    options.oracle.prepare(cases)
    reference = graded_reference(options, cases)
    rows.append(check_reference(reference.report))
    say("grading the template")
    rows.append(check_template(graded(options.template, cases, options.oracle), reference.forward, cases))
    say("comparing the generated files")
    rows.append(check_sync(options))
    say("building the wheel and scanning for leaks")
    rows.append(check_leaks(options))
    if options.mutants != 0:  # `--mutants 0`: the other checks alone, none of them failed for it
        rows.append(
            check_mutants(
                options, cases, reference, lambda done, total: say(f"grading mutants: {done} of {total}")
            )
        )
    return rows


def table(rows: list[Row]) -> Table:
    """The rows as a rich table: name, ok or FAIL, what was found."""
    out = Table(title="grader check", show_lines=True)
    out.add_column("check", style="bold", no_wrap=True)
    out.add_column("result", no_wrap=True)
    out.add_column("detail", overflow="fold")
    for row in rows:
        out.add_row(
            row.name, "[green]ok[/green]" if row.ok else "[bold red]FAIL[/bold red]", escape(row.detail)
        )
    return out
