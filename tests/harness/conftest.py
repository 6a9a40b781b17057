"""What the grader's own tests share, built once per run and only read afterwards.

PyTorch's run of the suites, the kit's wheel and the released bundle take seconds to make
and are the same for every test that reads them. PyTorch's run is kept from run to run too,
in pytest's cache folder. Under pytest-xdist (`pytest -n auto`) each
worker is a process with its own session fixtures, so what must be made once is made by the
first process that asks, under a file lock in the folder the run's workers share, and the
others wait for it and read it. A test that changes one of these makes its own copy.
"""

from __future__ import annotations

import gc
import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from filelock import FileLock

from grader.authoring.release import release
from grader.authoring.wheel import build_wheel
from grader.case.define import collect
from grader.pipeline import REPO, SUITES_DIR
from grader.verdict.oracle import CACHE_ENV, Oracle

#: the graded suites every harness test may grade with
ASSIGNMENTS = ("micrograd", "needle")
SUITES = ("public", "hidden")


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every process of this run sees: the workers' common parent under xdist
    (each worker's own temporary folder is one level down), else the session's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _locked(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """The shared folder's `name`, held under the run's lock for `name`."""
    root = _run_folder(tmp_path_factory)
    with FileLock(str(root / f"{name}.lock")):
        yield root / name


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, which `build` fills: by the first process of the run that asks.
    A build that failed left no mark, so the next process that asks tries again (and fails
    with its own error, not with a half-made folder)."""
    with _locked(tmp_path_factory, name) as folder:
        done = folder.with_name(f"{name}.done")
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.hookimpl(trylast=True)  # after pytest's own tmp_path and cache plugins
def pytest_configure(config: pytest.Config) -> None:
    """The run's oracle cache, in pytest's own cache folder at the project's root: kept from
    run to run like `--lf`'s records (the oracle keys each suite's file by everything that
    could change it), never in the user's own cache. Whatever the run starts (the graded
    suites' plugin, nbgrader's kernels, `python -m grader`, a class's workers) reads it too."""
    cache = getattr(config, "cache", None)  # none with -p no:cacheprovider
    folder = cache.mkdir("grader-oracle") if cache else _run_folder(config._tmp_path_factory)
    os.environ[CACHE_ENV] = str(folder)


#: the oracle cache's files (one per assignment and suite), costliest first: public suites
#: before hidden ones, needle's before micrograd's (cold, needle's public suite takes about
#: twice the other three together: PyTorch's 10^5-op chain)
CACHE_FILES = sorted(
    itertools.product(ASSIGNMENTS, SUITES), key=lambda file: (file[1] != "public", file[0] != "needle")
)


def _prepare_oracle_cache() -> Path:
    """PyTorch's run of every case of the suites (the 10^5-op chain's too), in the run's cache.
    Each file is made by the first process that asks for it, under a lock of its own, which
    the others wait for and then read; each xdist worker starts at a different file, so that
    on a cold cache two workers make two files at once instead of one waiting for the whole."""
    folder = Path(os.environ[CACHE_ENV])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = int(worker[2:]) % len(CACHE_FILES) if worker[2:].isdigit() else 0
    oracle = Oracle(folder)
    for assignment, suite in CACHE_FILES[start:] + CACHE_FILES[:start]:
        with FileLock(str(folder.with_name(f"{folder.name}-{assignment}-{suite}.lock"))):
            oracle.prepare(collect(SUITES_DIR, [assignment], [suite]), SUITES_DIR)
    return folder


@pytest.fixture(scope="session")
def oracle_cache() -> Path:
    """The run's oracle cache folder, holding PyTorch's run of every case of the suites
    (made at collection, `pytest_collection_modifyitems`)."""
    return Path(os.environ[CACHE_ENV])


@pytest.fixture(scope="session")
def oracle(oracle_cache) -> Oracle:
    """The run's oracle: every case of the suites read from the shared cache (no PyTorch);
    cases of other suites (the hostile tests' small ones) are added to the cache as asked."""
    oracle = Oracle(oracle_cache)
    oracle.prepare(collect(SUITES_DIR, ASSIGNMENTS, SUITES), SUITES_DIR)
    return oracle


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The package as `pip install` would install it, unpacked (as `grader check` builds it):
    the kit's wheel, built once per run."""
    built = built_once(tmp_path_factory, "wheel", lambda folder: build_wheel(REPO, folder))
    return built / "unpacked"


@pytest.fixture(scope="session")
def wheel_file(wheel) -> Path:
    """The same wheel, as the file pip installs."""
    (found,) = (wheel.parent / "wheels").glob("grader-*.whl")
    return found


@pytest.fixture(scope="session")
def released_bundle(tmp_path_factory) -> Path:
    """The student bundle (`python -m grader release`), released once per run. Tests that
    change it, or install into it, work on a copy."""

    def make(folder: Path) -> None:
        made = release(folder / "autodiff")
        assert made.leaks == [], made.leaks[:3]

    return built_once(tmp_path_factory, "bundle", make) / "autodiff"


@pytest.fixture(scope="session")
def reference() -> Path:
    """The kit's reference solutions, read in place: a test that edits one copies it."""
    return REPO / "reference"


#: module fixtures that take seconds to build (an nbgrader course autograded, a class graded, a
#: bundle released into a fresh environment, a browser started), costliest first. Under xdist
#: the tests of a module that use one of them run on one worker, so that it is built once and not
#: once per worker; and the run starts with the costliest, so that no long module is left to
#: start last while the other workers have nothing left to do (`--no-loadscope-reorder`)
COSTLY = (
    "course",  # test_nbgrader_course
    "klass",  # test_classgrade, test_pages
    "bundle",  # test_release
    "student",
    "honest",  # test_sandbox_hostile
    "front_ends",  # test_layouts
    "site",  # test_gradescope
    "small_zip",
    "buggy",
    "hostile",
    "everything",  # test_scope
    "narrower",
    "installed",  # test_options
    "browser",  # test_pages
    "report",  # test_core_only
    "warm",  # test_oracle_cache
)


def _rank(item: pytest.Item) -> int:
    """Where `item` starts: the costly fixtures' modules first, costliest first; then the
    tests marked slow (each builds an environment of its own); then the rest, as collected."""
    used = [COSTLY.index(name) for name in getattr(item, "fixturenames", ()) if name in COSTLY]
    if used:
        return min(used)
    return len(COSTLY) + (0 if item.get_closest_marker("slow") else 1)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first test: out of the collector's sight with whatever the process holds
    now (PyTorch and every test module imported, the answers made), as a student's run does
    before its first case (`grader.case.limits.keep_heap`). A full collection walks every
    object the collector sees, and in a process holding PyTorch that is a third of a second;
    a run's two workers made some ninety of them and spent 35 s of CPU in the collector, a
    tenth of their time (26 s so). Frozen, the heap is still freed as references go; only a
    cycle made before now would stay (collected first: there is none left to keep)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group each module's tests that share a costly fixture (`--dist loadgroup`), and put the
    costliest first. Before the graded suites' plugin reads PyTorch's answers, one process
    makes them (so that two workers do not both run PyTorch on a cold cache); `--co` runs
    nothing, and needs none."""
    if not config.option.collectonly:
        _prepare_oracle_cache()
    for item in items:
        if _rank(item) < len(COSTLY):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=_rank)  # stable: each module's tests keep their order


@pytest.fixture
def started_workers(monkeypatch) -> list[Path]:
    """The `lib/` of each sandbox worker started while the test runs, in order."""
    from grader.sandbox import engine

    started: list[Path] = []

    class Counted(engine.WorkerProcess):
        def __init__(self, *args, **kwargs):
            started.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine, "WorkerProcess", Counted)
    return started
