"""The expected results: each case run on PyTorch, once per suite version.

In memory, a case runs on PyTorch the first time it is asked for. With a cache directory,
`prepare` keeps one JSON file per (assignment, suite) whose name carries a hash of the
suite files, the grader's case, backend and verdict code and the torch version: grading
many submissions imports torch and runs the oracle once, and a warm cache never imports
torch. Files are written atomically, so graders running side by side never read half a file.
Each write sweeps the folder of versions long unused (`grader.verdict.cache` says the policy).

A run's tape and steps (every node's value and gradient, every op) are most of a file, and
only the diagnosis of a wrong case reads them: the file keeps them as one JSON string per
case, which a `CachedRun` decodes when they are first read. Reading the cache for a correct
submission thus parses the results it is compared with, and little else.

A student bundle (`python -m grader release`) ships its answers: every public case's run and
the programs its searches try, as `freeze` writes them, in `grader/answers/<assignment>.json`
(ANSWERS), each suite file's digest beside them, and each run's detail apart, in
`<assignment>.detail.json` (`split_answers`): a student's run reads the details only when a
diagnosis needs one (needle's answers: 97 ms of parsing a run, 9 ms without them). A case
whose file still has its digest is answered from there, with no torch to install; one whose
test changed runs on torch if it is installed, and otherwise raises NeedsTorch, whose one
line says so.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import time
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from grader import assignments
from grader.assignments import HERE as ASSIGNMENTS_DIR
from grader.case.define import Case
from grader.case.limits import case_garbage
from grader.case.quantity import Quantity
from grader.case.run import Run, run_case
from grader.case.trace import NodeRef, Step
from grader.verdict import cache
from grader.verdict.graph import case_ops

CACHE_ENV = "GRADER_CACHE"
FORMAT = 5
#: where a student bundle's answers are: `<assignment>.json`, absent from the kit itself
ANSWERS = Path(__file__).resolve().parent.parent / "answers"


class NeedsTorch(RuntimeError):
    """A case's expected run is not shipped (its test changed) and torch is not installed."""

    def __init__(self, case: Case) -> None:
        super().__init__(
            f"{case.id} needs PyTorch: its test changed since the release, so its expected values "
            "are not shipped (pip install torch to check it)"
        )


def file_digest(path: Path) -> str:
    """What a suite file is stamped with in the answers: a hash of its bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[: cache.KEY_CHARS]


def _stamp_of(case: Case) -> str | None:
    """The key of a case's suite file in the answers' stamps (None: a search's program,
    which is its own key)."""
    if not case.path:
        return None
    path = Path(case.path)
    return f"{case.suite}/{case.assignment}/{path.name}"


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "grader" / "oracle")


def oracle_from(cache_dir: str | Path | None = None, *, no_cache: bool = False) -> Oracle:
    """The oracle a front end grades with, as its options say: its runs kept on disk in
    `cache_dir` (else $GRADER_CACHE, else ~/.cache/grader/oracle), or in memory only with
    `no_cache` (PyTorch then runs every case anew)."""
    return Oracle(None if no_cache else (cache_dir or default_cache_dir()))


@functools.cache
def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def suite_key(suites_dir: Path, assignment: str, suite: str) -> str:
    """Changes whenever anything that could change an expected value changes: the suite's
    files, the case package, the assignment's folder, this module, torch, numpy, Python."""
    suite_files = sorted((suites_dir / suite / assignment).rglob("*.py"))
    grader = Path(__file__).resolve().parent.parent
    code = [
        Path(__file__).resolve(),
        ASSIGNMENTS_DIR / "__init__.py",
        *(grader / "case").rglob("*.py"),
        *(ASSIGNMENTS_DIR / assignment).rglob("*.py"),
        *(grader / "verdict").rglob("*.py"),  # the ops kept with each run (`case_ops`)
    ]
    named = [(path, str(path.relative_to(suites_dir))) for path in suite_files]
    named += [(path, str(path.relative_to(grader))) for path in sorted(code)]
    return _digest(tuple((name, path, _stamp(path)) for path, name in named))


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=64)
def _digest(files: tuple[tuple[str, Path, tuple[int, int]], ...]) -> str:
    """The key of these files, read once per process for as long as none of them changes
    (a class asks for it once per submission)."""
    digest = hashlib.sha256(
        f"{FORMAT} {_version('torch')} {_version('numpy')} {platform.python_version()}".encode()
    )
    for name, path, _ in files:
        digest.update(f"\0{name}\0".encode() + path.read_bytes())
    return digest.hexdigest()[: cache.KEY_CHARS]


# ---- a Run as JSON and back; steps keep tuples and node references exactly ----


def _encode(value: Any) -> Any:
    """A step's input as JSON, tuples and node references tagged. Only these exact types
    (not a subclass, such as numpy's float64): whatever it takes survives JSON and `_decode`
    unchanged, and anything else raises TypeError, so that its run is kept in memory only."""
    if isinstance(value, NodeRef):
        return {"ref": value.index}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or type(value) in (bool, int, float, str):
        return value
    raise TypeError(f"cannot cache {type(value).__name__}")


def _decode(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return NodeRef(value["ref"]) if "ref" in value else tuple(_decode(v) for v in value["tuple"])
    if kind is list:
        return [v if type(v) in _PLAIN else _decode(v) for v in value]
    return value


_PLAIN = (int, float, str, bool, type(None))


def _q(q: Quantity | None) -> Any:
    return None if q is None else q.to_plain()


def _uq(obj: Any) -> Quantity | None:
    """The cache is the grader's own file, written by `_q`: no need for the strict (and, over
    a whole suite's tapes, slow) parse that a worker's results get. A file that is not what
    `_q` wrote fails here with a TypeError or KeyError, and is then ignored."""
    if obj is None:
        return None
    return Quantity(tuple(map(float, obj["data"])), tuple(obj["shape"]), obj["dtype"])


def run_to_plain(run: Run) -> dict[str, Any]:
    """A run as the cache keeps it: `detail` (the tape and steps) as one JSON string. A run
    read from the cache whose detail nothing has read passes that string on as read: this
    function wrote it, and a deep case's tape is most of a release's answers. A step input
    `_encode` cannot take raises TypeError."""
    undecoded = "_detail" in run.__dict__  # a CachedRun whose detail nothing has read
    plain = {
        "results": {k: _q(v) for k, v in run.results.items()},
        "names": [[i, n] for i, n in run.names.items()],
        "outputs": run.outputs,
        "seeds": run.seeds,
        "needs": run.needs,
        "ops": run.ops,
        "rules_alone": run.rules_alone if undecoded else run.runs_rules_alone(),
    }
    if undecoded:
        return {**plain, "detail": _detail_text(run.__dict__["_detail"])}
    steps = [
        {"op": s.op, "inputs": _encode(s.inputs), "kwargs": _encode(list(s.kwargs.items())), "label": s.label}
        for s in run.steps
    ]
    detail = {"tape": [{k: _q(v) for k, v in entry.items()} for entry in run.tape], "steps": steps}
    plain["detail"] = json.dumps(detail, separators=(",", ":"))
    return plain


#: a run's detail as a JSON string, or a function that reads it when first needed
Detail = str | Callable[[], str]
#: the detail of a run whose detail is lost: no tape or steps (its diagnosis says less)
NO_DETAIL = '{"tape":[],"steps":[]}'


def _detail_text(detail: Detail) -> str:
    return detail if type(detail) is str else detail()  # type: ignore[operator]


def run_from_plain(obj: dict[str, Any], detail: Detail | None = None) -> Run:
    """The run `run_to_plain` wrote; `detail` stands for its "detail" where it has none (the
    shipped answers keep the details apart)."""
    ops = obj["ops"]
    return CachedRun(
        obj["detail"] if detail is None else detail,
        results={k: _uq(v) for k, v in obj["results"].items()},
        names={int(i): n for i, n in obj["names"]},
        outputs=list(obj["outputs"]),
        seeds=[str(name) for name in obj["seeds"]],
        needs=[str(need) for need in obj["needs"]],
        ops=None if ops is None else [str(op) for op in ops],
        rules_alone=obj.get("rules_alone"),
    )


def _decoded_field(name: str) -> property:
    """A `CachedRun` field held in its detail string until first read (or written)."""

    def get(run: CachedRun) -> Any:
        run.decode()
        return run.__dict__[name]

    def put(run: CachedRun, value: Any) -> None:
        run.decode()  # first, so that the other field is not lost to a later decode
        run.__dict__[name] = value

    return property(get, put)


class CachedRun(Run):
    """An expected run read from the cache or a bundle's answers. Its tape and steps stay one
    JSON string (or, from a bundle, a function that reads it from the details file) until
    something reads them: the diagnosis of a wrong case, a picture, `freeze`."""

    tape = _decoded_field("tape")  # type: ignore[assignment]
    steps = _decoded_field("steps")  # type: ignore[assignment]

    def __init__(self, detail: Detail, **fields: Any) -> None:
        if type(detail) is not str and not callable(detail):
            raise TypeError("a cached run's detail must be a JSON string, or a function reading one")
        super().__init__(**fields)  # sets an empty tape and steps, replaced on first read
        self.__dict__["_detail"] = detail

    def decode(self) -> None:
        detail = self.__dict__.pop("_detail", None)
        if detail is None:
            return
        plain = json.loads(_detail_text(detail))
        self.__dict__["tape"] = [{k: _uq(v) for k, v in entry.items()} for entry in plain["tape"]]
        self.__dict__["steps"] = [
            Step(s["op"], _decode(s["inputs"]), {k: v for k, v in _decode(s["kwargs"])}, s["label"])
            for s in plain["steps"]
        ]


def warm_up() -> None:
    """PyTorch's first autograd calls in a process set up its kernels, most of a second: done
    before any case is timed, so that no case's timeout is stretched by it."""
    import torch

    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    y = (torch.tanh(x * x + x).reshape(3, 1) @ x.reshape(1, 3)).sum(0).exp().log().relu()
    y.backward(torch.ones_like(y), retain_graph=True)  # with a given out_grad: more to load
    (y.sum() / 2 - 1).backward()


class Oracle:
    def __init__(self, cache_dir: str | Path | None = None) -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._runs: dict[str, Run] = {}
        #: how long PyTorch took for each case: a yardstick for the submission's timeout
        self.seconds: dict[str, float] = {}
        self._warm = False
        #: cache file -> what it holds (read once per process, extended as cases run)
        self._files: dict[Path, dict[str, Any]] = {}
        #: the shipped answers of each assignment (`ANSWERS`), read on first use
        self._answers: dict[str, dict[str, Any]] = {}
        self._digests: dict[Path, str] = {}

    @functools.cached_property
    def runs_torch(self) -> bool:
        """Whether a case with no run at hand can be answered (torch is installed)."""
        return importlib.util.find_spec("torch") is not None

    def answered(self, case: Case) -> bool:
        """Whether the case's run is at hand, taken from the shipped answers if need be:
        only while its suite file is the one the answers were made from."""
        if case.id in self._runs:
            return True
        if case.assignment not in self._answers:
            self._answers[case.assignment] = _read_answers(ANSWERS, case.assignment)
        shipped = self._answers[case.assignment]
        plain = shipped["runs"].get(case.id)
        if plain is None:
            return False
        stamp = _stamp_of(case)
        if stamp is not None:
            path = Path(case.path)
            if path not in self._digests:
                self._digests[path] = file_digest(path) if path.is_file() else ""
            if shipped["files"].get(stamp) != self._digests[path]:
                return False  # the test changed: its run may not be the shipped one
        self._runs[case.id] = run_from_plain(plain, functools.partial(shipped["detail"], case.id))
        self.seconds.setdefault(case.id, float(shipped["seconds"].get(case.id, 0.0)))
        return True

    def expected(self, case: Case) -> Run:
        if not self.answered(case):
            try:
                lib = assignments.get(case.assignment).oracle(trace=case.trace)
            except ModuleNotFoundError as exc:
                if exc.name != "torch":
                    raise
                raise NeedsTorch(case) from None
            if not self._warm:
                warm_up()
                self._warm = True
            # PyTorch's time is the yardstick of a submission's time limits, kept with the
            # answers and shipped with them: this thread's CPU time, which other work on the
            # machine does not stretch (a cache made beside a busy test run had kept wall times
            # a hundred times too long, and a looping rule's cases ran that much longer). The
            # case runs under the collector's policy for a submission's cases, and the collector
            # does not walk the answers kept so far dozens of times a case (a cold run of every
            # case spent 3.5 s in it, 2.6 s so)
            started = time.thread_time()
            with case_garbage(not case.trace, ends_after_run=False):
                run = run_case(case, lib)
            self.seconds[case.id] = time.thread_time() - started
            run.ops = case_ops(run, case.assignment)
            run.runs_rules_alone()
            self._runs[case.id] = run
        return self._runs[case.id]

    def results_of(self, case_id: str) -> dict[str, Quantity | None] | None:
        """A case's expected results, if its run is at hand (`prepare`): what a sandbox
        compares a run with to know whether its tape is worth sending."""
        run = self._runs.get(case_id)
        return run.results if run is not None else None

    def needs(self, case: Case) -> set[str]:
        """What the case needs, in its assignment's words: the ops it applied on PyTorch
        and those it declares. A scope decides from this whether the case is graded."""
        return {*case.needs, *self.expected(case).needs}

    def prepare(self, cases: Iterable[Case], suites_dir: Path | None = None) -> None:
        """Have every case's expected run at hand: from the disk cache, else from PyTorch.
        The suites' directory is where the cases were written, unless given."""
        groups: dict[tuple[str, str, Path], list[Case]] = {}
        for case in cases:
            if not self.answered(case):
                where = Path(suites_dir) if suites_dir is not None else case.suites_dir
                groups.setdefault((case.assignment, case.suite, where), []).append(case)
        for (assignment, suite, where), group in groups.items():
            path = None
            stored: dict[str, Any] = {"runs": {}, "seconds": {}}
            if self.cache_dir is not None:
                key = suite_key(where, assignment, suite)
                path = cache.version_path(self.cache_dir, assignment, suite, key)
                if path not in self._files:
                    self._files[path] = self._load(path)
                stored = self._files[path]
                group = [case for case in group if case.id not in self._runs]
                if not group:
                    continue
            for case in group:
                try:
                    run = self.expected(case)
                except NeedsTorch:
                    continue  # its verdict says so; the other cases are still prepared
                try:
                    stored["runs"][case.id] = run_to_plain(run)
                    stored["seconds"][case.id] = self.seconds.get(case.id, 0.0)
                except TypeError:
                    path = None  # not representable as JSON: keep it in memory only
            if path is not None and _write_atomically(path, {"format": FORMAT, **stored}):
                cache.sweep(path.parent)

    def freeze(self, cases: Iterable[Case]) -> dict[str, Any]:
        """Every case's expected run as plain JSON, to ship where torch should not be imported
        (Gradescope's autograder): `preload` takes it back."""
        cases = list(cases)
        self.prepare(cases)
        return {
            "format": FORMAT,
            "runs": {case.id: run_to_plain(self.expected(case)) for case in cases},
            "seconds": {case.id: self.seconds.get(case.id, 0.0) for case in cases},
        }

    def answers(self, cases: Iterable[Case]) -> dict[str, Any]:
        """What a student bundle ships (`ANSWERS`): `freeze`'s runs, stamped with the digest
        of each suite file they come from."""
        cases = list(cases)
        frozen = self.freeze(cases)
        stamps = {_stamp_of(case): Path(case.path) for case in cases if _stamp_of(case)}
        frozen["files"] = {stamp: file_digest(path) for stamp, path in sorted(stamps.items())}
        return frozen

    def preload(self, frozen: dict[str, Any]) -> int:
        """Take the runs `freeze` wrote; returns how many. Cases it lacks still run on torch,
        and a file of another format is ignored."""
        if frozen.get("format") != FORMAT:
            return 0
        for case_id, plain in frozen["runs"].items():
            self._runs.setdefault(case_id, run_from_plain(plain))
            self.seconds.setdefault(case_id, float(frozen["seconds"].get(case_id, 0.0)))
        return len(frozen["runs"])

    def _load(self, path: Path) -> dict[str, Any]:
        """Take every run the cache file holds; return its contents to extend and rewrite.

        A run of a few cases (`pytest -k ...`) adds to the file instead of replacing it."""
        try:
            data = json.loads(path.read_text())
            runs = {case_id: run_from_plain(plain) for case_id, plain in data["runs"].items()}
            seconds = {case_id: float(data["seconds"][case_id]) for case_id in runs}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {"runs": {}, "seconds": {}}
        cache.touch(path)  # used: kept by the sweeps of other versions
        for case_id, run in runs.items():
            self._runs.setdefault(case_id, run)
        self.seconds.update(seconds)
        return {"runs": data["runs"], "seconds": data["seconds"]}


def split_answers(answers: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`Oracle.answers` as a bundle ships them: the runs without their detail, and each
    run's detail by case id (`<assignment>.json` and `<assignment>.detail.json`)."""
    runs = {
        case_id: {k: v for k, v in plain.items() if k != "detail"}
        for case_id, plain in answers["runs"].items()
    }
    details = {case_id: plain["detail"] for case_id, plain in answers["runs"].items()}
    return {**answers, "runs": runs}, details


def _read_answers(folder: Path, assignment: str) -> dict[str, Any]:
    """A bundle's answers of `assignment` (`split_answers`), or none if absent or of another
    format; under "detail", a function of a case id that reads the details on first use."""
    empty: dict[str, Any] = {"runs": {}, "seconds": {}, "files": {}}
    try:
        data = json.loads((folder / f"{assignment}.json").read_text())
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        data = {}
    answers = {key: data.get(key) or {} for key in empty}

    @functools.cache
    def details() -> dict[str, Any]:
        try:
            found = json.loads((folder / f"{assignment}.detail.json").read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def detail(case_id: str) -> str:
        text = details().get(case_id)
        return text if type(text) is str else NO_DETAIL

    answers["detail"] = detail
    return answers


def _write_atomically(path: Path, data: dict[str, Any]) -> bool:
    """Write the version file `path` whole or not at all (`cache.write_version`)."""

    def fill(tmp: Path) -> None:
        with tmp.open("w") as fh:
            json.dump(data, fh)

    return cache.write_version(path, fill)
