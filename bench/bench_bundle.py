"""What a student pays for the bundle: its set-up, and a run of its public micrograd suite.

    python bench/bench_bundle.py [--repeat 3] [--no-torch-baseline]

Releases the student bundle (`python -m grader release`) into a temporary folder, then:

1. Set-up, as the bundle's README says: a fresh virtual environment and
   `python -m pip install -r requirements.txt` (pip's cache off), timed; and the size of
   everything it downloads (`pip download -r requirements.txt`, wheels only). The same for
   the requirements a bundle had when it needed PyTorch (these plus `torch==<the version
   installed here>`, from the CPU index as the README advised), unless --no-torch-baseline.
2. A student's run: `python -m pytest -q tests/public/micrograd` in the bundle, in its
   environment (no torch), on the reference's micrograd (`--impl`, every case compared with
   the shipped answers) and on the untouched template, each against `python -c "import
   numpy, pytest"` in the same environment. Medians of --repeat runs, in wall and in CPU
   seconds, the commands taking turns (one run of each, then again), so that a drift in the
   machine's speed reaches them all alike. The target: the reference's run in at most 2x
   the import. A micrograd run imports no numpy (it grades scalars), so `import pytest`
   alone is timed too, and pytest running as many empty tests as the suite collects, with
   the bundle's pytest options (`empty_suite`): what pytest itself costs a run of that many
   tests. Under every run lies the floor, that empty run plus the CPU the reference needs to
   run the public cases alone (`cases_alone`); the rest is the kit's own (its plugin, the
   shipped answers, the comparing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from timing import REPO, cases_alone, cpu_timed_together, run_once

from grader import ONE_THREAD

TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def clean_env(venv: Path | None = None) -> dict[str, str]:
    """This machine's environment without what leads to the kit's checkout, and without the
    thread settings importing the kit put in this process's (`ONE_THREAD`)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "VIRTUAL_ENV")) and k not in ONE_THREAD
    }
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def setup(bundle: Path, requirements: Path, work: Path, extra: list[str]) -> tuple[float, int, Path]:
    """Seconds to install `requirements` into a fresh venv, bytes downloaded, the venv."""
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    seconds, _ = run_once(
        [*pip, "install", "-q", "--no-cache-dir", "-r", str(requirements), *extra], bundle, clean_env(venv)
    )
    wheels = work / "wheels"
    run_once(
        [
            *pip,
            "download",
            "-q",
            "--no-cache-dir",
            "--only-binary=:all:",
            "-d",
            str(wheels),
            "-r",
            str(requirements),
            *extra,
        ],
        bundle,
        clean_env(venv),
    )
    size = sum(p.stat().st_size for p in wheels.iterdir())
    return seconds, size, venv


def empty_suite(
    bundle: Path, python: str, env: dict[str, str], folder: Path, paths: list[str]
) -> tuple[Path, int]:
    """A folder of as many empty tests as pytest collects from `paths` in the bundle, with the
    bundle's pytest options (its `addopts`): what pytest alone costs a run of that many tests.
    Returns the folder and the count."""
    listed = subprocess.run(
        [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=bundle, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    count = sum(1 for line in listed.stdout.splitlines() if "::" in line)
    addopts = next(
        line for line in (bundle / "pytest.ini").read_text().splitlines() if line.startswith("addopts")
    )
    folder.mkdir()
    (folder / "pytest.ini").write_text(f"[pytest]\n{addopts}\n")
    (folder / "test_empty.py").write_text("".join(f"def test_{i}():\n    pass\n\n" for i in range(count)))
    return folder, count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-torch-baseline", action="store_true", help="skip the set-up with torch")
    parser.add_argument(
        "--torch-index",
        default=TORCH_INDEX,
        help="where the baseline's torch comes from ('' for pip's own configuration)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        tmp = Path(tmp)
        bundle = tmp / "autodiff"
        subprocess.run(
            [sys.executable, "-m", "grader", "release", str(bundle)],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        requirements = bundle / "requirements.txt"

        figures = []
        if not args.no_torch_baseline:
            with_torch = tmp / "with-torch.txt"
            torch = metadata.version("torch").split("+")[0]
            with_torch.write_text(requirements.read_text() + f"torch=={torch}\n")
            (tmp / "before").mkdir()
            index = ["--extra-index-url", args.torch_index] if args.torch_index else []
            seconds, size, _ = setup(bundle, with_torch, tmp / "before", index)
            figures.append((f"with torch=={torch} (CPU)", seconds, size))
        (tmp / "now").mkdir()
        seconds, size, venv = setup(bundle, requirements, tmp / "now", [])
        figures.append(("the bundle's requirements", seconds, size))
        print("set-up: a fresh venv, pip install -r requirements.txt")
        for name, seconds, size in figures:
            print(f"  {name:32} {seconds:6.1f} s   {size / 1e6:7.1f} MB downloaded")

        env = {**clean_env(venv), "GRADER_CACHE": str(tmp / "cache")}
        python = str(venv / "bin" / "python")
        suite = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        shutil.copytree(REPO / "reference" / "micrograd", bundle / "solved" / "micrograd")
        empty, tests = empty_suite(bundle, python, env, tmp / "empty", ["tests/public/micrograd"])
        commands = {
            "import": [python, "-c", "import numpy, pytest"],
            "pytest": [python, "-c", "import pytest"],
            "empty": [*suite, "-c", str(empty / "pytest.ini"), "--rootdir", str(empty), str(empty)],
            "reference": [*suite, "--impl", "solved", "tests/public/micrograd"],
            "template": [*suite, "tests/public/micrograd"],
        }
        timed = cpu_timed_together(commands, args.repeat, env, bundle, ok={"template": (1,)})
        floor, pytest_only, empty_run, reference, template = (timed[name] for name in commands)
        print(f"a student's run (no torch), median of {args.repeat}: wall, CPU, ratios to the import")
        rows = [
            ("python -c 'import numpy, pytest'", floor),
            ("python -c 'import pytest'", pytest_only),
            (f"pytest, {tests} empty tests", empty_run),
            ("pytest tests/public/micrograd, reference", reference),
            ("pytest tests/public/micrograd, template", template),
        ]
        for name, (wall, cpu) in rows:
            print(
                f"  {name:42} {wall:6.2f} s  {cpu:6.2f} s CPU   {wall / floor[0]:5.2f}x wall  "
                f"{cpu / floor[1]:5.2f}x CPU"
            )
        print("  (target: the reference's run in at most 2x the import of numpy and pytest)")
        alone = cases_alone("micrograd", args.repeat, ("public",))
        under = empty_run[1] + alone
        print(
            f"the floor: the reference runs the public micrograd cases alone in {alone:.2f} s of CPU "
            f"(no pytest, no comparing); with pytest's import alone, which every run needs (a "
            f"micrograd run needs no numpy), no run is under {(pytest_only[1] + alone) / floor[1]:.2f}x "
            f"the import's CPU; with pytest running {tests} tests, {under / floor[1]:.2f}x. The "
            f"kit's own part of the reference's run: {reference[1] - under:.2f} s of CPU"
        )


if __name__ == "__main__":
    main()
