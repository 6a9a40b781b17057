"""Gradescope's `run_autograder`: `python -m grader autograde [--root /autograder]`.

Two processes, both root and both trusted:

- the supervisor (this command) locks the source down (`/autograder/source`, with the
  hidden suites and the oracle, becomes root-only), starts the grader as a child in its own
  session, waits for it at most `run_seconds`, and then — last of all, whatever happened —
  writes `results/results.json`. A grader that crashed or ran out of time still gives a
  results.json: every case at zero with the reason, so a student never sees a blank page
  and an instructor sees why.
- the grader (`--report FILE`) grades `submission/` through the sandbox with the shipped
  suites and the frozen oracle (no torch import), its workers running as the unprivileged
  user of `autograder.json`, and hands the supervisor the report as plain JSON in a
  root-only directory. The submission goes through the intake every front end uses
  (`grader.intake`): the zip a student uploads, alone in `submission/`, is unpacked and graded.

The submission's code therefore can read neither the source nor the results directory, and
anything it writes (a results.json of its own included) is never read: the supervisor's file
replaces whatever is there. `--root` (or `$GRADER_AUTOGRADER_ROOT`) points at another
directory laid out like `/autograder`, as the tests do; `$GRADER_AUTOGRADER_USER` overrides
the user (empty: the grader's own).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from grader.authoring.gradescope_zip import Settings, suites_digest
from grader.case.define import Case, collect
from grader.pipeline import SandboxRunner, grade_handed_in, needs_from, refused, suites_for, used_by
from grader.report.gradescope import gradescope, write_json
from grader.report.model import Report
from grader.report.terminal import print_report
from grader.sandbox import Limits
from grader.scope import parse, select
from grader.verdict.oracle import Oracle

ROOT_ENV = "GRADER_AUTOGRADER_ROOT"
USER_ENV = "GRADER_AUTOGRADER_USER"
DEFAULT_ROOT = Path("/autograder")
#: seconds the grader gets to die after SIGTERM before SIGKILL
GRACE = 5.0


class Layout:
    """The paths of Gradescope's layout under one root."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.source = self.root / "source"
        self.submission = self.root / "submission"
        self.results = self.root / "results"
        self.suites = self.source / "suites"
        self.oracle = self.source / "oracle" / "oracle.json"
        self.settings = self.source / "autograder.json"


def default_root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def load_settings(layout: Layout) -> Settings:
    settings = Settings.from_json(layout.settings.read_text())
    if USER_ENV in os.environ:
        settings.user = os.environ[USER_ENV]
    return settings


# ---- the grader (child) ----


def frozen_oracle(layout: Layout, settings: Settings) -> Oracle:
    """The oracle shipped in the zip, if it was made from these suites; else an empty one
    (torch then computes what is missing: slower, and heavier on memory)."""
    oracle = Oracle(None)
    if layout.oracle.is_file() and settings.suites_digest == suites_digest(
        layout.suites, settings.assignments
    ):
        oracle.preload(json.loads(layout.oracle.read_text()))
    else:
        print("note: oracle.json does not match the suites; PyTorch computes the expected values")
    return oracle


def graded_cases(layout: Layout, settings: Settings, oracle: Oracle | None = None) -> list[Case]:
    """The zip's cases, in the scope it was built for (`--scope`: what a case needs comes from
    the frozen oracle), with their points as that scope says."""
    cases = collect(layout.suites, settings.assignments, suites_for(settings.suite))
    scopes = {}
    for text in settings.scopes:  # the tables of the assignments this zip grades
        tables = {k: v for k, v in tomllib.loads(text).items() if k in settings.assignments}
        if tables:
            scopes.update((s.assignment, s) for s in parse(tables, "autograder.json", layout.suites))
    return select(cases, scopes, needs_from(oracle or frozen_oracle(layout, settings)))


def run_grader(layout: Layout, report_file: Path) -> int:
    """Grade the submission and write the report for the supervisor."""
    settings = load_settings(layout)
    oracle = frozen_oracle(layout, settings)
    cases = graded_cases(layout, settings, oracle)
    limits = Limits(timeout=settings.timeout, budget=settings.budget, memory=settings.memory)
    secrets = [layout.source, layout.results]
    engine = SandboxRunner(limits, secrets=secrets, user=settings.user or None, needs=used_by(oracle))
    report = grade_handed_in(layout.submission, cases, oracle, engine, settings.visibility)
    # Gradescope shows the autograder's stdout to instructors only; its results page has every case
    print_report(report, more="each one's message is on the submission's results page")
    report_file.write_text(json.dumps(report.to_plain()))
    return 0


# ---- the supervisor ----


def lock_down(layout: Layout) -> None:
    """Before any student code runs: the source is root's alone, results/ is root's."""
    if os.geteuid() == 0:
        os.chmod(layout.source, 0o700)
    layout.results.mkdir(parents=True, exist_ok=True)
    os.chmod(layout.results, 0o755)
    (layout.results / "results.json").unlink(missing_ok=True)


def failed_report(layout: Layout, reason: str) -> Report:
    """Every case at zero with `reason` (or none at all, when even the cases cannot be read)."""
    try:
        settings = load_settings(layout)
        cases = graded_cases(layout, settings)
    except Exception as exc:  # a broken zip: the results say so, with no cases
        unread = f"the cases could not be read: {type(exc).__name__}: {exc}"[:500]
        return Report(str(layout.submission), errors=[reason, unread])
    return refused(layout.submission, cases, reason, settings.visibility)


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM to the grader's session (it kills its workers), then SIGKILL to what is left."""
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, GRACE)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def supervise(layout: Layout) -> int:
    """Run the grader, then write results.json: always, and last."""
    started = time.monotonic()
    report: Report | None = None
    reason = ""
    try:
        lock_down(layout)
        settings = load_settings(layout)
        with tempfile.TemporaryDirectory(prefix="grader-autograde-") as private:  # 0700, root's
            report_file = Path(private) / "report.json"
            argv = [sys.executable, "-m", "grader", "autograde", "--root", str(layout.root)]
            child = subprocess.Popen([*argv, "--report", str(report_file)], start_new_session=True)
            try:
                child.wait(timeout=max(1.0, settings.run_seconds - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                reason = f"the autograder ran out of time ({settings.run_seconds:g} s); nothing was graded"
            except BaseException:
                _stop(child)
                raise
            _stop(child)
            if not reason and child.returncode != 0:
                reason = (
                    f"the autograder failed (exit status {child.returncode}); please tell your instructor"
                )
            if not reason:
                try:
                    report = Report.from_plain(json.loads(report_file.read_text()))
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    reason = f"the autograder's report could not be read ({type(exc).__name__})"
    except Exception as exc:
        reason = f"the autograder failed: {type(exc).__name__}: {exc}"[:500]
    finally:
        if report is None:
            report = failed_report(layout, reason or "the autograder was stopped")
        report.seconds = time.monotonic() - started
        write_json(gradescope(report), layout.results / "results.json")
    if reason:
        print(f"grader: {reason}", file=sys.stderr)
    return 0


def main(root: Path | None, report_file: Path | None) -> int:
    layout = Layout(root or default_root())
    if report_file is not None:
        return run_grader(layout, report_file)
    return supervise(layout)
