"""What one Gradescope submission costs: run_autograder's wall time and peak memory.

    python bench/bench_gradescope.py [--repeat 3]

Builds the autograder zip (`python -m grader gradescope`, every assignment and suite, the
default limits), unzips it into a simulated /autograder, installs the zip's own wheel where
only these runs look (the venv step of setup.sh skipped) and runs `run_autograder` as
Gradescope does (as root, workers as `nobody`) on the reference and on a hostile submission
(the reference whose backward() hoards memory). For each: the median wall time, and the peak
resident memory of the whole process tree (supervisor, grader, workers: the sum sampled every
20 ms, which is what Gradescope's 768 MB container limit counts), against `import numpy`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from timing import REPO, timed

HOARD = """
_hoard = []
from micrograd.engine import Value


def backward(self):
    while True:
        _hoard.append(bytearray(64 << 20))


Value.backward = backward
"""
CONTAINER_MIB = 768


def tree_rss_mib(pid: int) -> float:
    """Resident memory of `pid` and all its descendants, in MiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21])
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += rss.get(current, 0)
        todo += children.get(current, [])
    return total * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak tree RSS (MiB) of one run."""
    peak = 0.0
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss_mib(proc.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    proc.wait()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: run_autograder switches the submission to another user")
    with tempfile.TemporaryDirectory(prefix="bench-gradescope-") as tmp:
        tmp = Path(tmp)
        os.chmod(tmp, 0o711)
        built = time.perf_counter()
        autograder = tmp / "autograder.zip"
        subprocess.run([sys.executable, "-m", "grader", "gradescope", str(autograder)], cwd=REPO, check=True)
        size = autograder.stat().st_size / 1e6
        print(f"built the zip in {time.perf_counter() - built:.1f} s ({size:.1f} MB)")
        site = tmp / "site"
        with zipfile.ZipFile(autograder) as zf:
            (wheel,) = [n for n in zf.namelist() if n.startswith("wheels/")]
            zf.extract(wheel, tmp)
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site)]
        subprocess.run([*pip, str(tmp / wheel)], check=True, capture_output=True)
        hostile = tmp / "hostile"
        shutil.copytree(REPO / "reference", hostile, ignore=shutil.ignore_patterns("__pycache__"))
        (hostile / "micrograd" / "__init__.py").write_text(HOARD)
        numpy_time, _ = timed([sys.executable, "-c", "import numpy"], args.repeat)
        for name, submission in (("reference", REPO / "reference"), ("memory hoarder", hostile)):
            times, peaks, scores = [], [], []
            for _ in range(args.repeat):
                root = tmp / "autograder"
                shutil.rmtree(root, ignore_errors=True)
                with zipfile.ZipFile(autograder) as zf:
                    zf.extractall(root / "source")
                shutil.copytree(submission, root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
                scratch = tmp / "scratch"
                scratch.mkdir(exist_ok=True)
                os.chmod(scratch, 0o711)
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "TMPDIR": str(scratch),
                    "PYTHONPATH": str(site),
                    "GRADER_AUTOGRADER_ROOT": str(root),
                    "GRADER_AUTOGRADER_PYTHON": sys.executable,
                    "GRADER_AUTOGRADER_USER": "nobody",
                }
                seconds, peak = run(["bash", str(root / "source" / "run_autograder")], env)
                results = json.loads((root / "results" / "results.json").read_text())
                total = sum(t["max_score"] for t in results["tests"])
                times.append(seconds)
                peaks.append(peak)
                scores.append(f"{results['score']:g}/{total:g}")
            median, worst = statistics.median(times), max(peaks)
            fits = "fits" if worst < CONTAINER_MIB else "DOES NOT FIT"
            print(
                f"{name:<15} run_autograder {median:6.2f} s ({median / numpy_time:5.0f} x import numpy), "
                f"peak RSS {worst:6.0f} MiB ({fits} in {CONTAINER_MIB} MB), score {scores[-1]}"
            )
        print(f'python -c "import numpy": {numpy_time:.3f} s')


if __name__ == "__main__":
    main()
