"""`python -m grader grade-class ROOT` and `python -m grader merge OUT SHARD.db...`.

grade-class ROOT [--out DIR] [--jobs N] [--force] [--shard I/N] [--dask ADDRESS] [GRADING OPTIONS]
grade-class --nbgrader COURSE_ROOT ASSIGNMENT      the fast path into nbgrader's gradebook
merge OUT SHARD.db...                              combine shard gradebooks

The grading options are `grader grade`'s, declared once in `grader.options`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console

from grader import options
from grader.assignments import NAMES
from grader.case.define import Case
from grader.classgrade.layout import Submission
from grader.options import (
    UserError,
    keep_of,
    limits_of,
    oracle_of,
    scopes_of,
    suites_dir,
    writable,
    writable_folder,
)
from grader.pipeline import Request, choose_assignments, select_cases
from grader.report.model import Report
from grader.verdict.oracle import Oracle


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise UserError(f"--shard {text}: expected I/N, e.g. 0/4") from None
    if count < 1 or not 0 <= index < count:
        raise UserError(f"--shard {text}: I must be in 0..N-1")
    return index, count


def case_chooser(request: Request, oracle: Oracle | None = None) -> Callable[[Submission], list[Case]]:
    """Each submission's cases (its assignments, unless --assignment, in scope), collected once
    per set of assignments."""
    cache: dict[tuple[str, ...], list[Case]] = {}

    def cases(sub: Submission) -> list[Case]:
        names = tuple(choose_assignments(Path(sub.path), request.only))
        if names not in cache:
            cache[names] = select_cases(Path(sub.path), request, oracle)
        return cache[names]

    return cases


@contextlib.contextmanager
def long_lived_heap() -> Iterator[None]:
    """What is loaded by now lives as long as the class run, and every report graded is kept
    to its end: the cycle collector need not pass over either again and again (30 micrograd
    submissions into nbgrader: 0.39 s of collection before, 0.09 s after). As it was after."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(10_000, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def cmd_grade_class(args: argparse.Namespace) -> int:
    from grader.classgrade.engine import GRACE, LocalBackend, grade_class
    from grader.classgrade.exports import export_all
    from grader.classgrade.gradebook import Gradebook, GradebookError
    from grader.classgrade.layout import LayoutError, discover
    from grader.classgrade.progress import ClassProgress, summary
    from grader.classgrade.runner import default_jobs

    root = Path(args.root)
    shard = parse_shard(args.shard)
    only = tuple(args.assignment) if args.assignment else None
    if args.nbgrader:
        if args.nbgrader_assignment not in NAMES:
            given = (
                f"{args.nbgrader_assignment!r} is not an assignment"
                if args.nbgrader_assignment
                else "--nbgrader needs an assignment"
            )
            raise UserError(f"{given}: one of {', '.join(NAMES)}")
        only = (args.nbgrader_assignment,)
        if not (root / "submitted").is_dir():
            raise UserError(f"{root} is not an nbgrader course root (no submitted/ folder)")
    elif args.nbgrader_assignment:
        raise UserError("an ASSIGNMENT after ROOT is only for --nbgrader")
    out = Path(args.out) if args.out else (root / "classgrade" if args.nbgrader else Path("class-grades"))
    limits = limits_of(args)
    if args.jobs < 0:
        raise UserError(f"--jobs {args.jobs}: a number of processes (0: one more than the cores)")
    suites = suites_dir(args.suites, args.suite)
    scopes = scopes_of(args.scope, suites)  # a bad file: one line, exit 2
    writable_folder(str(out), "--out")
    name = "gradebook"
    if only:
        name += "-" + "-".join(sorted(only))  # one gradebook per choice of assignments: see exports
    if shard:
        name += f"-shard{shard[0]}of{shard[1]}"
    gradebook = Path(args.gradebook) if args.gradebook else out / f"{name}.db"
    if gradebook.exists():  # another program's database, or no database at all: said now
        try:
            Gradebook(gradebook).close()
        except GradebookError as exc:
            raise UserError(str(exc)) from None
    else:
        writable(str(gradebook), "--gradebook")
    request = Request(
        suite=args.suite,
        only=only,
        suites_dir=suites,
        limits=limits,
        keep=keep_of(args),
        visibility=args.hidden_visibility,
        scopes=scopes,
    )
    jobs = args.jobs or default_jobs()
    if args.dask:
        from grader.classgrade.dask import DaskBackend

        backend = DaskBackend(args.dask)
        try:
            backend.start()
        except (OSError, ValueError) as exc:
            raise UserError(f"--dask {args.dask}: cannot reach the scheduler ({exc})") from None
    else:
        backend = LocalBackend(jobs, limits.budget + GRACE)
        backend.start()  # its fork server warms up while the submissions are found
    try:
        submissions = discover(root, out / "work", only)
    except LayoutError as exc:
        raise UserError(str(exc)) from None
    if args.nbgrader:
        assignment = args.nbgrader_assignment
        submissions = [s for s in submissions if (root / "submitted" / s.student / assignment).is_dir()]
    oracle = oracle_of(args)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(long_lived_heap())
        course = None
        if args.nbgrader:
            from grader.authoring.nbgrader_io import import_nbgrader_meanwhile
            from grader.classgrade.nbgrader import CourseGrades

            import_nbgrader_meanwhile()
            course = stack.enter_context(CourseGrades(root, args.nbgrader_assignment))
        with Gradebook(gradebook) as book, ClassProgress() as progress:

            def on_done(student: str, report: Report) -> None:
                if course is not None:
                    course.add(student, report)  # while the others are graded
                progress.on_done(student, report)

            run = grade_class(
                submissions,
                case_chooser(request, oracle),
                oracle,
                book,
                backend,
                limits,
                args.hidden_visibility,
                force=args.force,
                shard=shard,
                on_start=progress.on_start,
                on_done=on_done,
                user=args.user,
            )
        seconds = time.perf_counter() - started
        with Gradebook(gradebook) as book:
            reports = dict(book.reports())  # decoded once: the summary and every export render them
            Console().print(summary(book, reports, run, seconds, jobs))
            others = []
            for path in sorted(out.glob("gradebook*.db")):
                if path.resolve() != gradebook.resolve():
                    try:
                        others.append(Gradebook(path))
                    except GradebookError:  # not one of ours (nbgrader's, when OUT is its course)
                        continue
            try:  # every assignment graded into OUT, by this run or another, is exported
                written = export_all([book, *others], out, args.hidden_visibility, reports)
            finally:
                for other in others:
                    other.close()
            if course is not None:  # and those not graded now (unchanged since they were)
                count, problems = course.finish(reports)
                for problem in problems:
                    Console().print(f"warning: {problem}", markup=False, highlight=False, soft_wrap=True)
                Console().print(f"wrote {count} submission(s) into {root / 'gradebook.db'}", markup=False)
    Console().print(
        f"gradebook: {gradebook}; exports: {written[0]}, {written[1]}, {out / 'results'}/, {written[-1]}",
        markup=False,
    )
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from grader.classgrade.gradebook import GradebookError, merge

    try:
        students, rows = merge(args.out, args.shards)
    except GradebookError as exc:
        raise UserError(str(exc)) from None
    print(f"{args.out}: {students} students, {rows} case results")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade-class",
        help="grade a whole class in parallel into a gradebook",
        parents=[options.grading(), options.only_cases()],
    )
    p.add_argument("root", help="one folder per student, nbgrader's submitted/ layout, or an LMS zip")
    p.add_argument("nbgrader_assignment", nargs="?", metavar="ASSIGNMENT", help="with --nbgrader")
    p.add_argument(
        "--nbgrader", action="store_true", help="ROOT is an nbgrader course: write its gradebook.db"
    )
    p.add_argument("--out", metavar="DIR", help="gradebook and exports (default ./class-grades)")
    p.add_argument("--gradebook", metavar="FILE", help="the SQLite gradebook (default OUT/gradebook.db)")
    p.add_argument("--jobs", type=int, default=0, help="submissions at once (default: cores + 1)")
    p.add_argument("--force", action="store_true", help="regrade every submission, changed or not")
    p.add_argument("--shard", metavar="I/N", help="grade only part I of N (0-based), e.g. a job array's task")
    p.add_argument(
        "--dask", metavar="ADDRESS", help="run submissions on this Dask scheduler (tcp://host:8786)"
    )
    p.set_defaults(func=cmd_grade_class)

    p = sub.add_parser("merge", help="combine shard gradebooks into one")
    p.add_argument("out", help="the merged gradebook (created, or added to)")
    p.add_argument("shards", nargs="+", help="shard gradebooks")
    p.set_defaults(func=cmd_merge)
