"""Gradescope's autograder zip, unzipped into a simulated /autograder and run as Gradescope
runs it (as root; the venv step of setup.sh skipped: the current interpreter and the zip's
own wheel). Every results.json is checked against a schema written from Gradescope's
results.json specification. The reference scores full marks; the template only what its
forward code earns; hostile submissions (planting their own results.json, looking for the
reference and the hidden suites, looping, eating memory) gain nothing; the submission's code
runs as an unprivileged user that can read neither the source nor write the results; a
grader that crashes or runs out of time still leaves a results.json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from grader.authoring.gradescope_zip import Settings, build
from grader.case.define import collect
from grader.sandbox import Limits, confine
from grader.sandbox.engine import SandboxEngine
from grader.verdict.oracle import Oracle, default_cache_dir

REPO = Path(__file__).resolve().parents[2]
HOSTILE = REPO / "tests" / "harness" / "hostile"
SMALL = HOSTILE / "suites"
SCHEMA = json.loads((Path(__file__).with_name("gradescope_results.schema.json")).read_text())
USER = "nobody"  # exists everywhere; setup.sh creates a user of its own on Gradescope
RUN_TIMEOUT = 300  # seconds for one run_autograder, far above what any of these takes

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="Gradescope's run_autograder runs as root on Linux, and drops to another user",
)


def honest_base(dest: Path) -> Path:
    """The reference with one honest bug (tanh forgets the square): 5 of 8 on the small suite."""
    shutil.copytree(REPO / "reference" / "micrograd", dest / "micrograd")
    engine = dest / "micrograd" / "engine.py"
    right = "self.grad += (1.0 - out.data**2) * out.grad"
    engine.write_text(engine.read_text().replace(right, "self.grad += (1.0 - out.data) * out.grad"))
    return dest


@pytest.fixture(scope="module")
def scratch():
    """TMPDIR for the runs: the sandbox's directories must be reachable by the unprivileged
    user, and pytest's own temporary root is not."""
    folder = Path(tempfile.mkdtemp(prefix="gradescope-test-", dir="/tmp"))
    os.chmod(folder, 0o711)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def make_zip(folder: Path, suites: Path, oracle: Oracle, **settings) -> Path:
    return build(folder / "autograder.zip", Settings(**settings), suites, oracle=oracle)


@pytest.fixture(scope="module")
def small_zip(tmp_path_factory, oracle) -> Path:
    settings = dict(assignments=["micrograd"], timeout=1.0, budget=60.0, run_seconds=120.0, memory=512)
    return make_zip(tmp_path_factory.mktemp("small-zip"), SMALL, oracle, **settings)


@pytest.fixture(scope="module")
def site(tmp_path_factory, small_zip) -> Path:
    """The zip's wheel, installed where only these runs look (setup.sh puts it in a venv)."""
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(small_zip) as zf:
        (wheel,) = [n for n in zf.namelist() if n.startswith("wheels/")]
        zf.extract(wheel, target)
    argv = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    done = subprocess.run([*argv, str(target / wheel)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return target


def run_autograder(
    where: Path, autograder: Path, site: Path, submission: Path, scratch: Path, user: str = USER
) -> tuple[dict, subprocess.CompletedProcess]:
    """Unzip into where/autograder/source, the submission into .../submission, run the zip's
    run_autograder as Gradescope does; the results.json, checked against the schema."""
    root = where / "autograder"
    with zipfile.ZipFile(autograder) as zf:
        zf.extractall(root / "source")
    shutil.copytree(submission, root / "submission")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(where),
        "TMPDIR": str(scratch),
        "PYTHONPATH": str(site),  # the zip's wheel, not this checkout
        "GRADER_AUTOGRADER_ROOT": str(root),
        "GRADER_AUTOGRADER_PYTHON": sys.executable,
        "GRADER_AUTOGRADER_USER": user,
    }
    done = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    assert results["score"] == sum(t["score"] for t in results["tests"])
    assert list(scratch.iterdir()) == [], "a sandbox directory was left behind"
    return results, done


def by_name(results: dict) -> dict[str, dict]:
    return {t["name"]: t for t in results["tests"]}


def test_the_schema_rejects_what_the_spec_does_not_allow():
    jsonschema.validate({"score": 1.0, "tests": [{"name": "a", "score": 1, "status": "passed"}]}, SCHEMA)
    for wrong in (
        {"score": 1.0, "tests": [{"status": "ok"}]},
        {"score": 1.0, "tests": [{"visibility": "sometimes"}]},
        {"score": "full"},
        {"score": 1.0, "max_score": 2.0},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, SCHEMA)


def test_the_zip_holds_what_gradescope_runs(small_zip):
    with zipfile.ZipFile(small_zip) as zf:
        names = set(zf.namelist())
        setup = zf.read("setup.sh").decode()
        settings = Settings.from_json(zf.read("autograder.json").decode())
        modes = {info.filename: info.external_attr >> 16 for info in zf.infolist()}
    assert {
        "setup.sh",
        "run_autograder",
        "autograder.json",
        "oracle/oracle.json",
        "requirements.txt",
    } <= names
    assert any(n.startswith("wheels/grader-") and n.endswith(".whl") for n in names)
    assert "suites/public/micrograd/test_small.py" in names
    assert "suites/hidden/micrograd/test_small_hidden.py" in names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert "/venv" in setup and "useradd" in setup and "download.pytorch.org/whl/cpu" in setup
    assert "torch==" in setup and "python3.11" in setup
    assert settings.assignments == ["micrograd"] and settings.suites_digest
    for script in ("setup.sh", "run_autograder"):
        with zipfile.ZipFile(small_zip) as zf:
            text = zf.read(script).decode()
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0, script


def test_default_limits_fit_gradescope():
    """768 MB for the container (the grader's own process needs ~100 MB beside one worker),
    ten minutes for the whole run, results.json written before that."""
    defaults = Settings()
    assert defaults.memory + 100 <= 768
    assert defaults.budget < defaults.run_seconds < 600
    assert defaults.visibility == "after_published"


def test_the_reference_scores_full_marks(tmp_path, small_zip, site, scratch):
    sub = tmp_path / "reference"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    results, done = run_autograder(tmp_path, small_zip, site, sub, scratch)
    assert results["score"] == 8, done.stdout + done.stderr
    assert all(t["status"] == "passed" for t in results["tests"])
    hidden = [t for t in results["tests"] if "hidden" in t["tags"]]
    assert hidden and all(t["visibility"] == "after_published" for t in hidden)
    assert all(t["name"].startswith("micrograd / hidden case ") for t in hidden)
    assert "isolation: bubblewrap" in done.stdout or "isolation:" in done.stdout


#: hostile submission -> what it must not gain over the honest base's 5 of 8 points
HOSTILE_CASES = [
    "fake_results",
    "read_reference",
    "loop_in_backward",
    "memory_exhaustion",
    "background_thread",
    "thread_around_refusal",
]


@pytest.mark.parametrize("name", HOSTILE_CASES)
def test_hostile_submissions_gain_nothing(name, tmp_path, small_zip, site, scratch):
    sub = honest_base(tmp_path / "sub")
    shutil.copytree(HOSTILE / name / "micrograd", sub / "micrograd", dirs_exist_ok=True)
    results, done = run_autograder(tmp_path, small_zip, site, sub, scratch)
    assert results["score"] <= 5, done.stdout
    tests = by_name(results)
    assert "all" not in tests  # fake_results' own test list
    assert tests["micrograd / ops / tanh [pos]"]["status"] == "failed"
    planted = [p for p in tmp_path.rglob("results.json") if p != tmp_path / "autograder/results/results.json"]
    assert planted == [], "the submission wrote a results.json outside its sandbox"


def test_the_template_scores_only_what_its_forward_code_earns(tmp_path, small_zip, site, scratch):
    sub = tmp_path / "template"
    shutil.copytree(REPO / "student_template" / "micrograd", sub / "micrograd")
    results, _ = run_autograder(tmp_path, small_zip, site, sub, scratch)
    assert results["score"] < 8
    failed = [t for t in results["tests"] if t["status"] == "failed" and "hidden" not in t["tags"]]
    assert failed and all("not implemented yet" in t["output"] for t in failed)


PROBE = """
import os

seen = [f"uid={{os.getuid()}}"]
for path in ({source!r}, {oracle!r}):
    try:
        open(path).read(1)
        seen.append("read " + path)
    except OSError as exc:
        seen.append(type(exc).__name__)
try:
    open(os.path.join({results!r}, "results.json"), "w").write("{{}}")
    seen.append("wrote results")
except OSError as exc:
    seen.append(type(exc).__name__)
raise RuntimeError(" ".join(seen))
"""


def _reachable_by_anyone(folder: Path) -> bool:
    """Every folder down to `folder` may be entered by any user, and `folder` read."""
    folder = folder.resolve()
    return bool(folder.stat().st_mode & 0o004) and all(p.stat().st_mode & 0o001 for p in folder.parents)


@pytest.mark.parametrize("isolation", ["bubblewrap", "mount namespace", "none"])
def test_workers_run_as_the_unprivileged_user(tmp_path, scratch, isolation, monkeypatch, request):
    """Even with no sandbox around it (isolation none, as where bubblewrap cannot start), the
    submission runs as the user: root's 0700 source and 0755 results are closed to it."""
    if isolation == "bubblewrap" and not _bwrap_as_root():
        pytest.skip("bubblewrap cannot start here")
    if isolation == "mount namespace" and not confine.available():
        pytest.skip("needs a mount namespace (Linux, root)")
    if isolation != "bubblewrap" and not _reachable_by_anyone(Path(np.__file__).parent):
        # Gradescope's setup makes the venv readable to all; an interpreter under a 0700 home is not
        pytest.skip("numpy is installed where the unprivileged user cannot read it")
    # a layout the user could reach but for the modes under test (pytest's tmp_path is 0700)
    layout = Path(tempfile.mkdtemp(prefix="gradescope-layout-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(layout, ignore_errors=True))
    os.chmod(layout, 0o755)
    source, results = layout / "source", layout / "results"
    source.mkdir()
    results.mkdir()
    os.chmod(source, 0o700)
    os.chmod(results, 0o755)
    (source / "autograder.json").write_text("{}")
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    probe = PROBE.format(source=str(source / "autograder.json"), oracle=str(source), results=str(results))
    engine_py = sub / "micrograd" / "engine.py"
    engine_py.write_text(engine_py.read_text() + probe)  # runs when the engine is imported
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    cases = collect(SMALL, ["micrograd"], ["public", "hidden"])
    engine = SandboxEngine(sub, SMALL, Limits(timeout=10.0), user=USER, isolation=isolation)
    for run in engine.run_all(cases):  # both suites: the hidden one enters lib/ later
        message = run.fault or (run.failure.message if run.failure else "")
        assert "uid=65534" in message, message
        assert "read " not in message and "wrote results" not in message, message
    assert not (results / "results.json").exists()


def _bwrap_as_root() -> bool:
    from grader.sandbox import bwrap

    return bwrap.available(True)


def test_an_unknown_user_is_a_clear_error(tmp_path):
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    argv = [sys.executable, "-m", "grader", "grade", str(sub), "--user", "no-such-user-here"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "grader: no such user: 'no-such-user-here'"


def test_running_out_of_time_still_writes_results(tmp_path, site, scratch, oracle):
    """The whole run's limit cuts a grader that would go on: every case at zero, with why."""
    settings = dict(assignments=["micrograd"], timeout=60.0, budget=120.0, run_seconds=4.0)
    autograder = make_zip(tmp_path, SMALL, oracle, **settings)
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    (sub / "micrograd" / "__init__.py").write_text("while True:\n    pass\n")
    results, _ = run_autograder(tmp_path, autograder, site, sub, scratch)
    assert results["score"] == 0 and len(results["tests"]) == 7  # 5 public, 2 hidden
    assert "ran out of time (4 s)" in results["output"]
    assert all("ran out of time" in t["output"] for t in results["tests"] if "hidden" not in t["tags"])


def test_a_crashing_grader_still_writes_results(tmp_path, small_zip, site, scratch):
    with zipfile.ZipFile(small_zip) as zf:
        zf.extractall(tmp_path / "broken")
    (tmp_path / "broken" / "suites" / "public" / "micrograd" / "test_small.py").write_text("def (:\n")
    broken = tmp_path / "broken.zip"
    shutil.make_archive(str(broken.with_suffix("")), "zip", tmp_path / "broken")
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
    results, done = run_autograder(tmp_path, broken, site, sub, scratch)
    assert results["score"] == 0 and results["tests"] == []
    assert "the autograder failed" in results["output"], results["output"]
    assert "grader:" in done.stderr


def test_the_full_autograder_grades_the_reference(tmp_path, site, scratch):
    """Both assignments, every suite, Gradescope's default limits."""
    autograder = make_zip(tmp_path, REPO / "tests", Oracle(default_cache_dir()))
    results, done = run_autograder(tmp_path, autograder, site, REPO / "reference", scratch)
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    deep = [t for t in failed if "ran out of memory" in t["output"] and "deep" in t["name"]]
    if failed and failed == deep:
        pytest.xfail("the 10^6-op chain needs more memory than Gradescope's 768 MB (issue 11 §4)")
    assert failed == [], [(t["name"], t["output"][:200]) for t in failed]
