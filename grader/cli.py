"""Command line: `python -m grader <command>`.

grade DIR [--results FILE] [--feedback FILE] [--pages DIR] [--in-process] [GRADING OPTIONS]
                                                         grade one submission (sandboxed)
template [--check]                                       write or check student_template/
notebooks [--check] [--scope FILE]                       write or check the nbgrader course's notebooks
release OUT [--assignment NAME] [--scope FILE]           write the student bundle (exit 1 on a leak)
gradescope OUT.zip [--run-seconds S] [GRADING OPTIONS]   build Gradescope's autograder zip
autograde [--root DIR]                                   what the zip's run_autograder runs
check [--assignment NAME] [--mutants N|all] [--jobs N]   verify an assignment before release
demo                                                     grade the bundled examples
grade-class ROOT [--jobs N] [--force] [--shard I/N] [--dask ADDRESS] [--nbgrader] [GRADING OPTIONS]
                                                         grade a class into a gradebook (grader.classgrade)
merge OUT SHARD.db...                                    combine shard gradebooks
cache [--cache-dir DIR] [--sweep | --clear]              show the oracle's cache; sweep or clear it

The grading options (--assignment, --suite, --scope, --suites, --timeout, --budget, --memory,
--user, --hidden-visibility, --cache-dir, --no-cache) are declared once, in `grader.options`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader import __version__, options
from grader.assignments import NAMES
from grader.classgrade.cli import add_parsers as add_class_parsers
from grader.options import (
    Parser,
    UserError,
    keep_of,
    limits_of,
    oracle_of,
    scopes_of,
    suites_dir,
    writable,
    writable_folder,
)
from grader.pipeline import REPO, Request, grade_submission, select_cases
from grader.report.gradescope import gradescope, write_json, write_text
from grader.report.markdown import markdown
from grader.report.model import Audience
from grader.report.terminal import print_report
from grader.sandbox import Limits, SandboxError
from grader.sandbox.engine import resolve_user
from grader.verdict.oracle import CACHE_ENV, default_cache_dir


def cmd_grade(args: argparse.Namespace) -> int:
    """Exit 0 whenever grading completed, whatever the score; 2 when it could not run."""
    submission = Path(args.submission)
    if not submission.exists():
        raise UserError(f"{args.submission}: no such file or directory")
    limits = limits_of(args)
    for option, path in (("--results", args.results), ("--feedback", args.feedback)):
        if path:
            writable(path, option)
    if args.pages:  # the directory may not exist yet: its nearest existing parent must take it
        writable_folder(args.pages, "--pages")
    oracle = oracle_of(args)
    suites = suites_dir(args.suites, args.suite)
    request = Request(
        suite=args.suite,
        only=tuple(args.assignment) if args.assignment else None,
        suites_dir=suites,
        sandbox=not args.in_process,
        limits=limits,
        keep=keep_of(args),
        visibility=args.hidden_visibility,
        user=args.user,
        scopes=scopes_of(args.scope, suites),
    )
    try:
        resolve_user(args.user)  # a wrong --user is said at once, before the oracle's work
        if not select_cases(submission, request, oracle):
            raise UserError(f"no graded cases in {request.suites_dir} for {', '.join(request.only or NAMES)}")
        report = grade_submission(args.submission, request, oracle)
    except UserError:
        raise
    except SandboxError as exc:  # e.g. --user names nobody known, or the grader is not root
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    except Exception:  # the grader's own failure (or its suites'), not the submission's
        traceback.print_exc()
        print("grader error: grading could not run", file=sys.stderr)
        return 2
    print_report(
        report, audience=Audience(args.audience), more="--feedback FILE or --pages DIR has every message"
    )
    try:
        if args.results:
            write_json(gradescope(report), args.results)
        if args.feedback:
            write_text(markdown(report, Audience.STUDENT), args.feedback)
        if args.pages:
            from grader.report.html import write_pages

            name = submission.resolve().name or "submission"
            write_pages({name: report}, Path(args.pages), args.hidden_visibility)
    except OSError as exc:  # checked before grading; the disk may still fill up
        raise UserError(f"writing the results failed: {exc}") from None
    return 0


def cmd_template(args: argparse.Namespace) -> int:
    from grader.authoring.template import check, generate

    reference, template = Path(args.reference), Path(args.template)
    if args.check:
        problems = check(reference, template)
        for problem in problems:
            print(problem)
        if problems:
            print("student_template/ is out of date: run `python -m grader template`", file=sys.stderr)
        return 1 if problems else 0
    for path in generate(reference, template):
        print(f"wrote {path}")
    return 0


def cmd_notebooks(args: argparse.Namespace) -> int:
    from grader.authoring.notebooks import check, generate

    reference, suites, course = Path(args.reference), suites_dir(args.suites, "all"), Path(args.course)
    scopes = scopes_of(args.scope, suites)
    if args.check:
        problems = check(reference, suites, course, scopes=scopes)
        for problem in problems:
            print(problem)
        if problems:
            print("the course's notebooks are out of date: run `python -m grader notebooks`", file=sys.stderr)
        return 1 if problems else 0
    for path in generate(reference, suites, course, scopes=scopes):
        print(f"wrote {path}")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    """Exit 0 with a clean bundle in OUT; 1 when the bundle would leak (nothing written); 2
    when it cannot be made as asked."""
    from grader.authoring.release import ReleaseError, release

    writable_folder(args.out)
    try:
        made = release(Path(args.out), assignments=args.assignment, scopes=args.scope or [])
    except ReleaseError as exc:
        raise UserError(str(exc)) from None
    if made.leaks:
        for leak in made.leaks:
            print(leak, file=sys.stderr)
        print(f"release failed: {len(made.leaks)} leaks (listed above); nothing was written", file=sys.stderr)
        return 1
    print(f"wrote {made.out}: {len(made.files)} files, {made.size / 1024:.0f} KiB, no leak found")
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from grader.authoring.gradescope_zip import BuildError, Settings, build

    limits = limits_of(args)
    settings = Settings(
        assignments=list(args.assignment or NAMES),
        suite=args.suite,
        visibility=args.hidden_visibility,
        user=args.user,
        timeout=limits.timeout,
        budget=limits.budget,
        memory=limits.memory,
    )
    settings.run_seconds = args.run_seconds
    suites = suites_dir(args.suites, args.suite)
    for path in args.scope or []:  # checked against the suites by `build`
        scopes_of([path], suites)  # a bad file: one line, exit 2
        settings.scopes.append(Path(path).read_text())
    if Path(args.out).suffix == ".zip":  # else `build` says what it must be
        writable(args.out)
    try:
        out = build(Path(args.out), settings, suites, oracle=oracle_of(args))
    except BuildError as exc:
        raise UserError(str(exc)) from None
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): upload it as the assignment's autograder")
    return 0


def cmd_autograde(args: argparse.Namespace) -> int:
    from grader.autograder import ROOT_ENV, default_root
    from grader.autograder import main as autograde

    root = Path(args.root) if args.root else default_root()
    if not root.is_dir():  # Gradescope's /autograder always is: a mistaken --root writes nothing
        raise UserError(f"{root}: no such autograder folder (--root, else ${ROOT_ENV}, else /autograder)")
    return autograde(root, Path(args.report) if args.report else None)


def mutant_count(text: str) -> int | None:
    """`--mutants`: a number of mutants to grade, or `all` (None)."""
    if text == "all":
        return None
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of mutants, or all") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count}: a number of mutants cannot be negative")
    return count


def cmd_check(args: argparse.Namespace) -> int:
    """Exit 1 when a check fails, 0 when all pass."""
    from rich.console import Console
    from rich.markup import escape

    from grader.authoring.check import Options, run, table

    if args.jobs < 1:
        raise UserError(f"--jobs {args.jobs}: at least one process is needed")
    suites = suites_dir(args.suites, "all")
    reference = Path(args.reference)
    names = tuple(args.assignment or NAMES)
    absent = [name for name in names if not (reference / name).is_dir()]
    if absent:
        raise UserError(f"{reference} has no {', '.join(absent)}/: point --reference at the solutions")
    checks = Options(
        repo=REPO,
        reference=reference,
        template=Path(args.template),
        suites=suites,
        course=Path(args.course),
        assignments=names,
        mutants=args.mutants,
        jobs=args.jobs,
        seed=args.seed,
        oracle=oracle_of(args),
    )
    errors = Console(stderr=True)
    console = Console(width=max(Console().width, 150))  # the details are long; a pipe gets 80 columns
    with errors.status("checking") as status:
        rows = run(checks, say=lambda text: status.update(escape(text)))  # case ids hold [params]
    console.print(table(rows))
    failed = [row.name for row in rows if not row.ok]
    console.print(
        f"{len(failed)} of {len(rows)} checks failed" if failed else f"all {len(rows)} checks passed"
    )
    return 1 if failed else 0


def cache_folder(given: str | None) -> Path:
    """The oracle's cache folder (--cache-dir, else $GRADER_CACHE, else the default), which
    may not exist yet but must be a folder this user can read."""
    folder = Path(given) if given else default_cache_dir()
    source = "--cache-dir" if given else f"${CACHE_ENV}" if os.environ.get(CACHE_ENV) else "the cache"
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{source} {folder}: not a directory")
    if folder.is_dir() and not os.access(folder, os.R_OK | os.X_OK):
        raise UserError(f"{source} {folder}: cannot be read by this user")
    return folder


def megabytes(size: int) -> str:
    """A size to read at a glance: kB below a tenth of a MB, where 0.0 MB would say nothing."""
    return f"{size / 1e6:.1f} MB" if size >= 100_000 or size == 0 else f"{size / 1e3:.0f} kB"


def cmd_cache(args: argparse.Namespace) -> int:
    """Show the oracle's cache: its folder, each version with its size and last use, and which
    the next sweep deletes; with --sweep or --clear, delete those (or all) first."""
    from datetime import datetime

    from grader.verdict import cache

    folder = cache_folder(args.cache_dir)
    if args.sweep or args.clear:
        sizes = {v.path: v.size for v in cache.versions(folder)}
        sizes.update((path, size) for path, size, _ in cache.temporaries(folder))
        removed = cache.clear(folder) if args.clear else cache.sweep(folder)
        freed = sum(sizes.get(path, 0) for path in removed)
        done = "cleared" if args.clear else "swept"
        print(f"{done}: {len(removed)} files removed, {megabytes(freed)} freed")
    found = cache.versions(folder)
    temporaries = cache.temporaries(folder)
    stale = set(cache.stale(folder))
    print(f"oracle cache: {folder}{'' if folder.is_dir() else ' (not created yet)'}")
    for v in found:
        used = datetime.fromtimestamp(v.used).strftime("%Y-%m-%d %H:%M")
        mark = "  (the next sweep deletes it)" if v.path in stale else ""
        print(f"  {v.assignment:<10} {v.suite:<8} {v.key}  {megabytes(v.size):>8}  used {used}{mark}")
    total = sum(v.size for v in found)
    line = f"{len(found)} versions, {megabytes(total)}"
    if stale:
        doomed = sum(v.size for v in found if v.path in stale)
        line += f" (the next sweep deletes {sum(v.path in stale for v in found)}, {megabytes(doomed)})"
    if temporaries:
        line += f"; {len(temporaries)} temporary files, {megabytes(sum(size for _, size, _ in temporaries))}"
    print(line)
    print(
        f"each write keeps a suite's {cache.KEEP} most recently used versions and any used in the last "
        f"{cache.IDLE / 3600:g} h; --sweep applies this now, --clear deletes every version"
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from grader.demo import run_demo

    return run_demo()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="grader", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "grade", help="grade one submission directory", parents=[options.grading(), options.only_cases()]
    )
    p.add_argument("submission", help="directory holding micrograd/ and/or needle/, or a zip of it")
    p.add_argument("--results", metavar="FILE", help="write Gradescope's results.json here")
    p.add_argument("--feedback", metavar="FILE", help="write Markdown feedback for the student here")
    p.add_argument(
        "--pages",
        metavar="DIR",
        help="write HTML feedback here: students/<name>.html for the student, index.html for you",
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="no sandbox, only for trusted code: --timeout applies, --budget and --memory do not",
    )
    p.add_argument(
        "--audience",
        choices=[a.value for a in Audience],
        default=Audience.INSTRUCTOR.value,
        help="who reads the terminal report (feedback and results.json are always the student's)",
    )
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser(
        "template",
        help="generate student_template/ from reference/",
        parents=[options.kit_paths("--reference", "--template"), options.drift()],
    )
    p.set_defaults(func=cmd_template)

    p = sub.add_parser(
        "notebooks",
        help="generate the nbgrader course's source notebooks",
        parents=[
            options.kit_paths("--reference", "--course"),
            options.suites(),
            options.scope(),
            options.drift(),
        ],
    )
    p.set_defaults(func=cmd_notebooks)

    p = sub.add_parser(
        "release",
        help="write the student bundle, checked for leaks",
        parents=[options.assignment(), options.scope()],
    )
    p.add_argument("out", metavar="OUT", help="a new (or empty) directory")
    p.set_defaults(func=cmd_release)

    from grader.authoring.gradescope_zip import Settings

    zipped = Settings()
    p = sub.add_parser(
        "gradescope",
        help="build the autograder zip to upload to Gradescope",
        parents=[options.grading(Limits(zipped.timeout, zipped.budget, zipped.memory), user=zipped.user)],
    )
    p.add_argument("out", metavar="OUT.zip")
    p.add_argument(
        "--run-seconds",
        type=float,
        default=zipped.run_seconds,
        help="after this, results.json is written whatever happened (default %(default)s)",
    )
    p.set_defaults(func=cmd_gradescope)

    p = sub.add_parser("autograde", help="grade /autograder/submission as Gradescope's run_autograder")
    p.add_argument("--root", help="the autograder's root (default $GRADER_AUTOGRADER_ROOT or /autograder)")
    p.add_argument("--report", help=argparse.SUPPRESS)  # the supervisor's child writes its report here
    p.set_defaults(func=cmd_autograde)

    p = sub.add_parser(
        "check",
        help="verify an assignment before release; exit 1 if a check fails",
        parents=[
            options.assignment(),
            options.suites(),
            options.oracle(),
            options.kit_paths("--reference", "--template", "--course"),
        ],
    )
    p.add_argument(
        "--mutants",
        type=mutant_count,
        default=None,
        metavar="N|all",
        help="how many mutants of the reference to grade (default all; 0 leaves that check out)",
    )
    p.add_argument("--jobs", type=int, default=2, help="mutants graded at once (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="the mutants' order (default %(default)s)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "cache",
        help="show the oracle's cache (folder, versions, size); sweep or clear it",
        parents=[options.cache_dir()],
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--sweep", action="store_true", help="delete the versions a write would delete")
    action.add_argument("--clear", action="store_true", help="delete every version")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("demo", help="grade the bundled examples and show a diagnostic")
    p.set_defaults(func=cmd_demo)

    add_class_parsers(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt: `finally` blocks and context managers
    run on the way out (workers killed, sandbox directories removed), `except Exception` does
    not swallow it."""


def _stop(signum: int, frame: object) -> None:
    # one interruption is enough: a second signal must not cut the cleanup short
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise in the main thread while the command runs."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and gets signals)
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> int:
    """The command's exit status; 130 after Ctrl-C (SIGINT), 143 after SIGTERM, as a shell
    reports a process killed by them, with one line on stderr and nothing left behind; 141
    (SIGPIPE's) when the output's reader stopped reading, quietly."""
    args = build_parser().parse_args(argv)
    try:
        with interruptible():
            status = args.func(args)
            sys.stdout.flush()  # a closed pipe is found here, not by the interpreter's last flush
            return status
    except UserError as exc:
        print(f"grader: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, Terminated)
        print(f"grader: {'terminated' if terminated else 'interrupted'}, nothing graded", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    except BrokenPipeError:  # `python -m grader cache | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit's flush
        return 128 + signal.SIGPIPE
