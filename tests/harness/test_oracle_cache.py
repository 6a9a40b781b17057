"""The oracle's cache folder is swept: old versions go when a new one is written, the ones in
use stay, a reader holding a deleted version still reads it, and `python -m grader cache`
shows, sweeps and clears the folder.

Versions made up here are files with the oracle's names (what the sweep goes by); the suite
is the small one of the hostile tests, so that PyTorch runs a few cases only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import cli
from grader.case.define import collect
from grader.verdict import cache, oracle
from grader.verdict.oracle import Oracle, suite_key

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
HOUR = 3600.0


def cases():
    return collect(SMALL, ["micrograd"], ["public"])


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> Path:
    """A folder holding the small public suite's current version (PyTorch runs once)."""
    folder = tmp_path_factory.mktemp("warm-cache")
    Oracle(folder).prepare(cases(), SMALL)
    return folder


def current(folder: Path) -> Path:
    """The small public suite's version now."""
    return cache.version_path(folder, "micrograd", "public", suite_key(SMALL, "micrograd", "public"))


def made_up(folder: Path, n: int, age: float, suite: str = "public", size: int = 1000) -> Path:
    """A version of micrograd's `suite` last used `age` seconds ago."""
    path = cache.version_path(folder, "micrograd", suite, f"{n:0{cache.KEY_CHARS}x}")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(" " * size)
    used_at(path, age)
    return path


def used_at(path: Path, age: float) -> None:
    then = time.time() - age
    os.utime(path, (then, then))


def test_a_write_sweeps_old_versions_and_keeps_the_current_and_recent_ones(tmp_path):
    folder = tmp_path / "cache"
    old = [made_up(folder, n, age=2 * HOUR + n) for n in range(1, 6)]  # n=1 the most recent
    recent = made_up(folder, 9, age=60)
    alone = made_up(folder, 7, age=30 * 24 * HOUR, suite="hidden")  # its suite's only version
    foreign = folder / "notes.txt"
    foreign.write_text("not the oracle's")
    used_at(foreign, 30 * 24 * HOUR)
    killed = folder / f".{old[0].name}.x1y2z3"  # a writer killed before its rename
    killed.write_text("{")
    used_at(killed, 2 * HOUR)
    writing = folder / f".{old[0].name}.a1b2c3"  # a writer at work
    writing.write_text("{")

    Oracle(folder).prepare(cases(), SMALL)

    now = current(folder)
    left = set(folder.iterdir())
    assert now not in old and now in left
    # the three most recently used of the suite: the new one, the recent one, the newest old one
    assert {recent, old[0]} <= left and not set(old[1:]) & left
    assert {alone, foreign, writing} <= left and killed not in left


def test_versions_used_within_the_hour_stay_beyond_the_newest_three(tmp_path):
    folder = tmp_path / "cache"
    busy = [made_up(folder, n, age=60 * n) for n in range(1, 6)]
    assert cache.sweep(folder) == [] and all(path.exists() for path in busy)
    assert cache.sweep(folder, now=time.time() + HOUR) == busy[3:]  # an hour on


def test_a_read_marks_the_version_used(tmp_path, warm):
    folder = tmp_path / "cache"
    shutil.copytree(warm, folder)
    path = current(folder)
    used_at(path, 2 * HOUR)
    reader = Oracle(folder)
    reader.prepare(cases(), SMALL)
    assert len(reader._runs) == len(cases())
    assert time.time() - path.stat().st_mtime < 60
    assert cache.sweep(folder, keep=0) == [] and path.exists()


def test_a_reader_holding_a_version_reads_it_whole_while_it_is_swept(tmp_path, warm):
    folder = tmp_path / "cache"
    held = made_up(folder, 1, age=3 * HOUR)
    shutil.copyfile(current(warm), held)
    used_at(held, 3 * HOUR)
    for n in range(2, 5):
        made_up(folder, n, age=HOUR + n)  # three newer: `held` is the one to go
    reader = (
        "import json, sys\n"
        "from grader.verdict.oracle import run_from_plain\n"
        f"with open({str(held)!r}) as fh:\n"
        "    print('open', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    data = json.loads(fh.read())\n"
        "print(len([run_from_plain(plain) for plain in data['runs'].values()]))\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", reader],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert child.stdout.readline().strip() == "open"
        assert cache.sweep(folder) == [held] and not held.exists()
        out, _ = child.communicate("go\n", timeout=60)
    finally:
        child.kill()
    assert child.returncode == 0 and int(out) == len(json.loads(current(warm).read_text())["runs"]) > 0


def test_a_version_gone_or_cut_short_is_a_miss_and_is_written_again(tmp_path, warm):
    folder = tmp_path / "cache"
    shutil.copytree(warm, folder)
    path = current(folder)
    whole = json.loads(path.read_text())
    path.write_text(path.read_text()[: path.stat().st_size // 2])  # as a foreign tool could leave it
    again = Oracle(folder)
    again.prepare(cases(), SMALL)
    assert json.loads(path.read_text())["runs"].keys() == whole["runs"].keys()
    path.unlink()
    assert Oracle(folder)._load(path) == {"runs": {}, "seconds": {}}


def test_sweeps_side_by_side_take_each_file_once(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    doomed = [made_up(folder, n, age=2 * HOUR + n) for n in range(1, 201)][cache.KEEP :]
    gone = folder / "micrograd-public-ffffffffffffffffffffffff.json"  # another sweep's already
    monkeypatch.setattr(cache, "stale", lambda *args: [gone, *doomed[:10]])
    assert cache.sweep(folder) == doomed[:10]
    monkeypatch.undo()
    code = "import sys\nfrom pathlib import Path\nfrom grader.verdict import cache\n"
    code += "print(len(cache.sweep(Path(sys.argv[1]))))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-c", code, str(folder)]
    sweeps = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    counts = [int(p.communicate(timeout=60)[0]) for p in sweeps]
    assert all(p.returncode == 0 for p in sweeps) and sum(counts) == len(doomed) - 10
    kept = [cache.version_path(folder, "micrograd", "public", f"{n:024x}") for n in (1, 2, 3)]
    assert sorted(folder.iterdir()) == kept


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(oracle.json, "dump", full)
    path = cache.version_path(tmp_path, "micrograd", "public", "0" * cache.KEY_CHARS)
    assert oracle._write_atomically(path, {"runs": {}}) is False
    assert list(tmp_path.iterdir()) == []


# ---- python -m grader cache ----


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        status = cli.main(["cache", *args])
    except SystemExit as exc:  # argparse's own checks
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def test_the_cache_command_lists_versions_and_sweeps(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "cache"
    versions = [made_up(folder, n, age=2 * HOUR + n, size=2_000_000) for n in range(1, 6)]
    monkeypatch.setenv("GRADER_CACHE", str(folder))
    status, out, _ = run_cli(capsys)
    assert status == 0 and str(folder) in out
    assert "5 versions, 10.0 MB (the next sweep deletes 2, 4.0 MB)" in out
    assert out.count("the next sweep deletes it") == 2
    assert all(path.name.split("-")[-1].removesuffix(".json") in out for path in versions)
    status, out, _ = run_cli(capsys, "--sweep")
    assert status == 0 and "swept: 2 files removed, 4.0 MB freed" in out and "3 versions, 6.0 MB" in out
    assert [path.exists() for path in versions] == [True, True, True, False, False]


def test_the_cache_command_clears_only_the_oracles_files(tmp_path, capsys):
    folder = tmp_path / "cache"
    versions = [made_up(folder, n, age=n) for n in range(1, 4)]
    (folder / f".{versions[0].name}.abc123").write_text("{")
    (folder / "notes.txt").write_text("mine")
    status, out, _ = run_cli(capsys, "--cache-dir", str(folder), "--clear")
    assert status == 0 and "cleared: 4 files removed" in out and "0 versions" in out
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(
    "args, words",
    [
        (["--cache-dir", "{tmp}/afile"], "--cache-dir {tmp}/afile: not a directory"),
        (["--sweep", "--clear"], "argument --clear: not allowed with argument --sweep"),
        (["--keep", "3"], "unrecognized arguments: --keep 3"),
    ],
)
def test_the_cache_commands_mistakes_are_one_line(tmp_path, capsys, args, words):
    (tmp_path / "afile").write_text("")
    status, out, err = run_cli(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert status == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert words.replace("{tmp}", str(tmp_path)) in err, err


def test_a_cache_not_made_yet_is_shown_empty(tmp_path, capsys):
    status, out, _ = run_cli(capsys, "--cache-dir", str(tmp_path / "none"), "--sweep")
    assert status == 0 and "(not created yet)" in out and "0 versions, 0.0 MB" in out
    assert not (tmp_path / "none").exists()


def test_a_listing_cut_short_by_its_reader_ends_quietly(tmp_path):
    """`python -m grader cache | head`: exit status 141 (SIGPIPE's), no traceback."""
    made_up(tmp_path, 1, age=0)
    child = subprocess.Popen(
        [sys.executable, "-m", "grader", "cache", "--cache-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    child.stdout.close()  # the reader is gone before the first line
    _, err = child.communicate(timeout=60)
    assert child.returncode == 141 and err == b"", err


# ---- a step's inputs as JSON ----


def test_whatever_a_step_may_hold_survives_the_cache_and_anything_else_is_refused():
    """`_encode` takes exact types only, so that the cache needs no round trip to check a run:
    nested tuples and lists, node references, the edge floats, big ints, bools apart from
    ints, and kwargs with tuple keys come back as they went; a subclass of float does not go."""
    from grader.case.trace import NodeRef, Step

    inputs = [
        NodeRef(3), (1, (2.5, NodeRef(0)), [None, "s"]), [[-0.0, float("inf"), -float("inf")]],
        float("nan"), 2**80, True, 1, 0.1, "é\ud800",
    ]  # fmt: skip
    step = Step("op", inputs, {"axes": (0, 1), (1, 2): [False]}, "label")
    plain = {
        "op": step.op,
        "inputs": oracle._encode(step.inputs),
        "kwargs": oracle._encode(list(step.kwargs.items())),
    }
    again = json.loads(json.dumps(plain))
    back = Step("op", oracle._decode(again["inputs"]), dict(oracle._decode(again["kwargs"])), "label")
    assert repr(back) == repr(step)  # a NodeRef has no ==; nan is not == itself
    assert [type(v) for v in back.inputs] == [type(v) for v in step.inputs]
    assert type(back.inputs[1][1]) is tuple and back.kwargs[(1, 2)] == [False]

    class Measured(float):
        pass

    for refused in (Measured(1.0), {"a": 1}, {1, 2}, b"bytes", object()):
        with pytest.raises(TypeError):
            oracle._encode([refused])


def test_whether_a_case_runs_a_rule_alone_is_known_without_its_detail(warm):
    """A case without an output runs a rule only if it runs one alone (needle's `op_gradient`);
    a student's run asks this of every case, so the answers say it: the forward-only cases of
    a passing run read no detail. An answer written without it (an older cache) is decoded."""
    made = Oracle(warm)
    for case in cases():
        plain = oracle.run_to_plain(made.expected(case))
        assert plain["rules_alone"] is False  # micrograd has no op_gradient

        def unread() -> str:
            raise AssertionError("the detail was read")

        assert oracle.run_from_plain(plain, unread).runs_rules_alone() is False
        older = {k: v for k, v in plain.items() if k != "rules_alone"}
        assert oracle.run_from_plain(older).runs_rules_alone() is False  # from its steps
        gradient = json.loads(plain["detail"])
        gradient["steps"][0]["op"] = "EWiseMul.gradient"
        older["detail"] = json.dumps(gradient)
        assert oracle.run_from_plain(older).runs_rules_alone() is True


def test_shipped_answers_are_read_without_their_details_until_a_diagnosis_asks(tmp_path, warm, monkeypatch):
    """A bundle's answers keep each run's detail apart (`split_answers`): a student's run
    parses only the values it compares with; the first tape read loads the details, once,
    and gives the tape the oracle had; a detail that is gone is an empty tape, not an error."""
    made = Oracle(warm)
    small = cases()
    runs, details = oracle.split_answers(made.answers(small))
    folder = tmp_path / "answers"
    folder.mkdir()
    (folder / "micrograd.json").write_text(json.dumps(runs))
    (folder / "micrograd.detail.json").write_text(json.dumps(details))
    monkeypatch.setattr(oracle, "ANSWERS", folder)
    monkeypatch.setattr(Oracle, "runs_torch", False)  # answered from the files, or not at all
    reads = []
    real = Path.read_text
    monkeypatch.setattr(
        Path, "read_text", lambda self, *a, **k: reads.append(self.name) or real(self, *a, **k)
    )

    shipped = Oracle(None)
    expected = {case.id: shipped.expected(case) for case in small}
    assert reads == ["micrograd.json"]  # the values: every case answered, no detail read
    first, second = small[0], small[1]
    assert expected[first.id].tape and expected[first.id].tape == made.expected(first).tape
    assert [repr(s) for s in expected[second.id].steps] == [repr(s) for s in made.expected(second).steps]
    assert reads == ["micrograd.json", "micrograd.detail.json"]  # once, for every run

    del details[small[2].id]
    (folder / "micrograd.detail.json").write_text(json.dumps(details))
    lost = Oracle(None).expected(small[2])
    assert lost.results == made.expected(small[2]).results and lost.tape == [] and lost.steps == []
