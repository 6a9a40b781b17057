"""The command line's options, each declared once, and what turns them into grading's inputs.

Options come in groups (argparse parent parsers): each command takes the groups it needs
(`parents=[...]`), so an option has one name, one help text and one default wherever it
appears. `grading()` is what every command that grades takes (`grade`, `grade-class`,
`gradescope`); the smaller groups serve the commands that need only part of it. The checks
below (`check_limits`, `suites_dir`, `scopes_of`, ...) turn the parsed options into what the
pipeline takes, or raise `UserError`: one line on stderr and exit status 2, before any work.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from grader.assignments import NAMES
from grader.case.define import Case
from grader.pipeline import REPO, SUITES_DIR, SUITES_ENV, suites_for
from grader.report.model import DEFAULT_HIDDEN_VISIBILITY, VISIBILITIES
from grader.sandbox import Limits
from grader.scope import Scope, ScopeError, resolve
from grader.verdict.oracle import CACHE_ENV, Oracle, oracle_from

#: the least memory a worker may have: Python and numpy take about 100 MiB of address space
MIN_MEMORY = 256
SUITES = ("public", "hidden", "all")


class UserError(Exception):
    """A mistake in the command: said in one line, exit status 2, before any grading."""


class Parser(argparse.ArgumentParser):
    """argparse, with a user's mistake said in one line (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _group() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


# ---- the groups ----


def assignment() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument("--assignment", action="append", choices=NAMES, help="only this one (repeatable)")
    return group


def suite() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument(
        "--suite", choices=SUITES, default="all", help="the suites graded (default %(default)s)"
    )
    return group


def scope() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument(
        "--scope",
        metavar="FILE",
        action="append",
        help="a scope file (TOML): the ops and topics graded and their points; assignments it does "
        "not cover keep grader/assignments/<name>/scope.toml (repeatable)",
    )
    return group


def suites() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument(
        "--suites", metavar="DIR", help=f"the graded suites (default ${SUITES_ENV}, else the kit's tests/)"
    )
    return group


def cache_dir() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=f"the oracle's disk cache (default ${CACHE_ENV}, else ~/.cache/grader/oracle)",
    )
    return group


def oracle() -> argparse.ArgumentParser:
    """Where PyTorch's expected results are kept: `oracle_of` builds the oracle from them."""
    group = argparse.ArgumentParser(add_help=False, parents=[cache_dir()])
    group.add_argument("--no-cache", action="store_true", help="run the oracle without its disk cache")
    return group


def limits(defaults: Limits) -> argparse.ArgumentParser:
    """What one submission may use (`limits_of` refuses what no submission could pass)."""
    group = _group()
    group.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        default=defaults.timeout,
        help="seconds per case (default %(default)s)",
    )
    group.add_argument(
        "--budget",
        type=float,
        metavar="S",
        default=defaults.budget,
        help="seconds for all of a submission's cases (default %(default)s)",
    )
    group.add_argument(
        "--memory",
        type=int,
        metavar="MIB",
        default=defaults.memory,
        help=f"MiB per worker (default %(default)s, at least {MIN_MEMORY})",
    )
    return group


def only_cases() -> argparse.ArgumentParser:
    group = _group()
    group.add_argument(
        "--only-cases", action="append", metavar="GLOB", help="grade only cases whose id matches (repeatable)"
    )
    return group


def grading(defaults: Limits | None = None, user: str | None = None) -> argparse.ArgumentParser:
    """What every command that grades takes: which cases, the limits, who runs the code, what
    a student sees, the oracle. `defaults` and `user` are the command's own defaults."""
    parents = [assignment(), suite(), scope(), suites(), limits(defaults or Limits()), oracle()]
    group = argparse.ArgumentParser(add_help=False, parents=parents)
    group.add_argument(
        "--user",
        default=user,
        help="run the submission's code as this unprivileged user (the grader runs as root"
        + ("; default %(default)s)" if user else ")"),
    )
    group.add_argument(
        "--hidden-visibility",
        default=DEFAULT_HIDDEN_VISIBILITY,
        choices=VISIBILITIES,
        help="what a student sees of hidden cases (Gradescope's visibility; default %(default)s)",
    )
    return group


#: the kit's own folders an authoring command reads or writes: option -> (folder, what it is)
KIT_PATHS = {
    "--reference": ("reference", "the solutions"),
    "--template": ("student_template", "the student skeleton"),
    "--course": ("assignments", "the nbgrader course"),
}


def drift() -> argparse.ArgumentParser:
    """For a command that writes files generated from the kit: check them instead."""
    group = _group()
    group.add_argument("--check", action="store_true", help="only report drift; exit 1 if any")
    return group


def kit_paths(*options: str) -> argparse.ArgumentParser:
    """Some of `KIT_PATHS`, each defaulting to its folder in this checkout."""
    group = _group()
    for option in options:
        folder, what = KIT_PATHS[option]
        help = f"{what} (default: the kit's {folder}/)"
        group.add_argument(option, metavar="DIR", default=str(REPO / folder), help=help)
    return group


# ---- from the options to what grading takes ----


def check_limits(timeout: float, budget: float, memory: int) -> Limits:
    """The sandbox's limits, or `UserError` for one no correct submission could grade under."""
    if not timeout > 0:
        raise UserError(f"--timeout {timeout:g}: must be more than 0 seconds")
    if not budget > 0:
        raise UserError(f"--budget {budget:g}: must be more than 0 seconds")
    if memory < MIN_MEMORY:
        raise UserError(
            f"--memory {memory}: must be at least {MIN_MEMORY} MiB (Python and numpy need about 100)"
        )
    return Limits(timeout=timeout, budget=budget, memory=memory)


def limits_of(args: argparse.Namespace) -> Limits:
    return check_limits(args.timeout, args.budget, args.memory)


def suites_dir(given: str | None, suite: str) -> Path:
    """The graded suites: --suites, else $GRADER_SUITES, else the checkout's tests/."""
    folder = Path(given or os.environ.get(SUITES_ENV) or SUITES_DIR)
    wanted = suites_for(suite)
    if not any((folder / name).is_dir() for name in wanted):
        source = "--suites" if given else f"${SUITES_ENV}" if os.environ.get(SUITES_ENV) else "the default"
        raise UserError(
            f"no graded suites in {folder} ({source}; expected {'/ or '.join(wanted)}/ in it): "
            f"point --suites or ${SUITES_ENV} at the kit's tests/ folder (an installed grader has none)"
        )
    return folder


def scopes_of(files: list[str] | None, suites: Path) -> dict[str, Scope]:
    """The `--scope` files, and the default scope of every assignment they do not cover."""
    try:
        return resolve(files or [], suites, shipped=suites.resolve() == SUITES_DIR.resolve())
    except ScopeError as exc:
        raise UserError(str(exc)) from None


def writable(path: str, option: str = "") -> None:
    """`path` can be written (checked before the work, so that it is not lost after it).
    `option`: the option that named it, said in the error (none for a positional argument)."""
    target = Path(path)
    if target.is_dir():
        raise UserError(f"{_named(option, path)}: is a directory")
    if target.exists() and not os.access(target, os.W_OK):
        raise UserError(f"{_named(option, path)}: not writable")
    _can_write_in(target.parent, option, path)


def writable_folder(path: str, option: str = "") -> None:
    """`path` is a folder, or can be made one, that files can be written into."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{_named(option, path)}: not a directory")
    _can_write_in(folder, option, path)


def _named(option: str, path: str) -> str:
    return f"{option} {path}" if option else path


def _can_write_in(folder: Path, option: str, path: str) -> None:
    """Files can be made in `folder`, or in the nearest folder that exists above it (the
    writers create the missing ones there): tried as they write, a temporary file renamed."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{_named(option, path)}: {existing} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".grader-probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise UserError(f"{_named(option, path)}: cannot write there ({exc.strerror or exc})") from None


def keep_of(args: argparse.Namespace) -> Callable[[Case], bool] | None:
    """`--only-cases GLOB...` as a filter on cases (None: every case)."""
    patterns = list(args.only_cases or ())
    if not patterns:
        return None
    return lambda case: any(fnmatch.fnmatchcase(case.id, pattern) for pattern in patterns)


def oracle_of(args: argparse.Namespace) -> Oracle:
    """The oracle `--cache-dir` and `--no-cache` ask for."""
    return oracle_from(args.cache_dir, no_cache=args.no_cache)
