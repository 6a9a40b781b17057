"""Under bubblewrap a worker sees an allow-list, not the machine: a probe submission looks
for files of another clone of the kit under /tmp and in the home directory, for other
processes, for the network and for torch, and reports what it found in its import error."""

from __future__ import annotations

import importlib.util
import json
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader.pipeline import ISOLATION
from grader.sandbox import Limits, engine
from tests.harness.grading import grade

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "harness" / "hostile" / "suites"
LIMITS = Limits(timeout=5.0, budget=60.0, memory=1024)

PROBE = """
import importlib, json, os, socket, sys

found = {{}}
for path in {secrets!r}:
    try:
        with open(path) as fh:
            found[path] = fh.read()
    except OSError as exc:
        found[path] = type(exc).__name__
found["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found["me"] = os.getpid()
found["parent"] = os.getppid()
found["interfaces"] = [name for _, name in socket.if_nameindex()]
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    found["connect"] = "connected"
except OSError as exc:
    found["connect"] = type(exc).__name__
# the import guard gives a placeholder for torch: a submission can take it away, and only the
# file system's allow-list is left between it and the real library
sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ImportGuard"]
for name in [m for m in sys.modules if m.partition(".")[0] == "to" + "rch"]:
    del sys.modules[name]
sys.path.append({site!r})
try:
    module = importlib.import_module("to" + "rch")  # a computed name: the static scan does not see it
    found["torch"] = "imported " + str(getattr(module, "__file__", None))
except Exception as exc:
    found["torch"] = type(exc).__name__
found["home"] = sorted(os.listdir({home!r})) if os.path.isdir({home!r}) else None
raise RuntimeError("PROBE" + json.dumps(found) + "END")
"""

pytestmark = pytest.mark.skipif(
    engine.strongest_isolation() != "bubblewrap", reason="bubblewrap cannot start here"
)


def test_a_worker_sees_only_what_it_is_given(tmp_path, oracle):
    other = tmp_path / "another-clone" / "reference"  # like a second copy of the kit under /tmp
    other.mkdir(parents=True)
    (other / "engine.py").write_text("SECRET-IN-TMP\n")
    victim = subprocess.Popen(["sleep", "60"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    home = Path.home()
    with tempfile.NamedTemporaryFile("w", dir=home, prefix=".grader-probe-", suffix=".txt") as in_home:
        in_home.write("SECRET-IN-HOME\n")
        in_home.flush()
        try:
            sub = tmp_path / "sub"
            shutil.copytree(REPO / "reference" / "micrograd", sub / "micrograd")
            site = str(Path(importlib.util.find_spec("torch").origin).resolve().parent.parent)
            secrets = [str(other / "engine.py"), in_home.name]
            code = PROBE.format(secrets=secrets, port=listener.getsockname()[1], site=site, home=str(home))
            # in engine.py, which every case imports: a failing __init__.py only costs a note
            # (the loader goes on without it), while a module a case needs that fails to import
            # fails the case with its error, which carries the probe's findings
            engine_py = sub / "micrograd" / "engine.py"
            engine_py.write_text(engine_py.read_text() + code)
            report = grade(sub, "public", ["micrograd"], SMALL, oracle, limits=LIMITS)
        finally:
            victim.kill()
            victim.wait()
            listener.close()
    message = report.results[0].message
    assert not report.results[0].passed and "PROBE" in message, message
    found = json.loads(message[message.index("PROBE") + 5 : message.index("END")])
    assert found[secrets[0]] == "FileNotFoundError"  # another directory under /tmp
    assert found[secrets[1]] == "FileNotFoundError"  # the home directory
    # bwrap's init, the worker and its child that runs the cases (this one): nothing else
    assert set(found["pids"]) == {1, found["parent"], found["me"]}
    assert found["interfaces"] == ["lo"] and found["connect"] != "connected"
    assert found["torch"] == "ModuleNotFoundError"
    assert Path(in_home.name).name not in (found["home"] or [])
    assert ISOLATION["bubblewrap"] in report.notes and not any("seccomp" in n for n in report.notes)


LISTING = """
import json, os, sys
found = {}
for path in sys.argv[1:]:
    try:
        found[path] = sorted(os.listdir(path))
    except OSError as exc:
        found[path] = type(exc).__name__
import numpy  # what the worker needs is still there
print(json.dumps(found))
"""

VENV_LISTING = """
import subprocess, sys, tempfile
from pathlib import Path
from grader.sandbox import bwrap

with tempfile.TemporaryDirectory() as scratch:
    lib, work = Path(scratch, "lib"), Path(scratch, "work")
    lib.mkdir()
    work.mkdir()
    args = bwrap.argv(lib, work, {"PATH": "/usr/bin:/bin"})
    numpy_home = str(bwrap.numpy_dirs()[0].parent)
    code = "import sys; sys.path.insert(0, %r)\\n" % numpy_home + sys.argv[1]
    done = subprocess.run([*args, bwrap.interpreter(), "-I", "-S", "-c", code, *sys.argv[2:]])
sys.exit(done.returncode)
"""


@pytest.mark.parametrize("system_site_packages", [True, False], ids=["system-site-packages", "own-packages"])
def test_from_a_virtual_environment_no_package_directory_is_listable(tmp_path, system_site_packages):
    """Gradescope's image runs the grader from a virtual environment: its base interpreter's
    site-packages (torch, nbgrader, everything installed there) is bound with the stdlib's
    prefix, though the environment's `site` does not list it. From a venv, the base's
    site-packages, the user's and the system's dist-packages show the worker nothing but
    numpy. Without --system-site-packages, the packages come from a `.pth` file."""
    import site
    import sys
    import sysconfig

    venv = tmp_path / "venv"
    flags = ["--system-site-packages"] if system_site_packages else []
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *flags, str(venv)], check=True)
    python = venv / "bin" / "python"
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    base_site = Path(sysconfig.get_paths(vars=base)["purelib"]).resolve()
    assert (base_site / "torch").is_dir() or (base_site / "nbgrader").is_dir()  # it holds the kit's packages
    if not system_site_packages:
        venv_site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        (Path(venv_site) / "base.pth").write_text(f"{base_site}\n")
    listed = [base_site, Path(site.getusersitepackages()), *Path("/usr/lib").glob("python3*/dist-packages")]
    listed += Path("/usr/local/lib").glob("python3*/*-packages")
    done = subprocess.run(
        [str(python), "-c", VENV_LISTING, LISTING, *map(str, listed)],
        capture_output=True, text=True, cwd=REPO, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found[str(base_site)] in (["numpy"], ["numpy", "numpy.libs"])
    for path, what in found.items():
        assert what == "FileNotFoundError" or set(what) <= {"numpy", "numpy.libs"}, (path, what)
