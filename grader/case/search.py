"""Random programs: fixed ones checked plainly, and hypothesis to shrink a failing one.

Both assignments write their random programs in one style: a generator that takes a
`random.Random` and returns plain data. A graded case gets `random.Random(seed)`: the same
program on every run and machine, with nothing but the standard library (hypothesis is not
in the sandbox). An ungraded search first checks its own `max_examples` programs, each
drawn from a seeded `random.Random` too: the same on every run, so a release ships their
PyTorch answers as it ships the graded cases', and a run whose programs all pass never
imports hypothesis. When one fails, hypothesis searches with `st.randoms()`, a
`random.Random` whose every choice it records, so that its failing program shrinks (fewer
ops, smaller numbers). Where hypothesis finds none, or where the programs it would draw
cannot be checked (no PyTorch, as in a student's bundle), the fixed program's failure
stands, unshrunk.

A search is derandomized (the same examples, in the same order, on every run) and keeps no
example database: a student's run never depends on an earlier one, and a failure seen once
is seen again on the next run.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import warnings
from collections.abc import Callable
from typing import Any

from grader.case.define import Case


def randoms():
    """A strategy of `random.Random`s whose choices hypothesis shrinks (towards small draws)."""
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False, note_method_calls=False)


def strategy(generate: Callable[[random.Random], Any]):
    """Programs made by `generate(rng)`, drawn and shrunk by hypothesis."""
    return randoms().map(generate)


def fixed(generate: Callable[[random.Random], Any], count: int) -> list[Any]:
    """The `count` programs a search checks first: the same on every run and machine."""
    return [generate(random.Random(f"search {k}")) for k in range(count)]


def search(
    generate: Callable[[random.Random], Any],
    make_case: Callable[[Any], Case],
    show: Callable[[Any], str],
    max_examples: int,
):
    """Decorate an ungraded `test(graded_case)` that checks `max_examples` fixed programs of
    `generate`, each as `make_case(program)`; when one fails, hypothesis searches as many
    and shrinks its failing program, whose code, `show(program)`, ends the failure message.
    Outside pytest (the grader collecting its cases, the sandbox, a release) nothing runs
    the test: it is kept as it is. Either way it carries `__grader_programs__`, which gives
    the fixed programs' cases: a release ships their answers, and no others. Hypothesis is
    imported only to shrink, never when its file is collected or when every program passes."""

    def programs() -> list[Case]:
        return [make_case(program) for program in fixed(generate, max_examples)]

    if "pytest" not in sys.modules:

        def kept(test: Callable[..., None]) -> Callable[..., None]:
            test.__grader_programs__ = programs  # type: ignore[attr-defined]
            return test

        return kept
    import pytest

    def decorate(test: Callable[..., None]):
        def with_program(graded_case, program) -> None:
            try:
                graded_case(make_case(program))
            except pytest.fail.Exception as failed:
                message = f"{failed.msg}\n\nthe program:\n{show(program)}"
                raise pytest.fail.Exception(message, pytrace=False) from None

        def shrink(graded_case) -> None:
            """Hypothesis's search: raises its shrunk failure, returns if it finds none (or
            cannot check the programs it draws, beyond the fixed ones: no PyTorch)."""
            if not getattr(graded_case, "checks_new_programs", True):
                return
            if importlib.util.find_spec("hypothesis") is None:
                return
            with warnings.catch_warnings():
                # Loading hypothesis registers the PRNGs of packages that ask (trio's), each
                # checked with gc.get_referrers, which does not see frozen objects: after a
                # deep case's graph was frozen (`limits.keep_garbage`) a PRNG held by a module
                # would look unreferenced, and hypothesis would warn about it.
                warnings.filterwarnings("ignore", "It looks like `register_random` was passed")
                from hypothesis import HealthCheck, Phase, given, settings

            run = settings(
                max_examples=max_examples,
                derandomize=True,
                database=None,
                deadline=None,
                print_blob=False,
                phases=[Phase.explicit, Phase.generate, Phase.shrink],
                suppress_health_check=[HealthCheck.too_slow],
            )(given(program=strategy(generate))(with_program))
            run(graded_case)

        def searching(graded_case) -> None:
            failure = None
            for program in fixed(generate, max_examples):
                try:
                    with_program(graded_case, program)
                except pytest.fail.Exception as failed:
                    failure = failed
                    break
            if failure is not None:
                shrink(graded_case)
                raise failure

        searching.__name__, searching.__doc__ = test.__name__, test.__doc__
        searching.__module__ = test.__module__
        searching.__grader_search__ = True  # the pytest plugin tells a search from a graded case
        searching.__grader_programs__ = programs
        return searching

    return decorate
