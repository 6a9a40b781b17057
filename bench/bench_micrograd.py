"""The micrograd suite against the import floor, and the reference against micrograd 0.1.0.

    python bench/bench_micrograd.py [--repeat 3] [--steps 100]

1. `python -m pytest -q tests/public/micrograd` in a fresh process (the graded suite on the
   reference, PyTorch oracle included) against `python -c "import torch, pytest"`, the floor
   any such run pays: medians of --repeat runs, and their ratio.
2. The same training loop on the reference engine and on the original micrograd package
   from the registry (micrograd==0.1.0, installed on first use into bench/.cache): MLP(2,
   [16, 16, 1]) on 100 two-moons points, the SVM max-margin loss with L2 regularisation
   of micrograd's demo notebook, SGD with its decaying learning rate, the same initial
   weights, timed in this process: the time ratio, and the two final losses.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache" / "micrograd-0.1.0"
sys.path.insert(0, str(REPO))

from grader.loading import load_package  # noqa: E402


def original_micrograd() -> dict:
    if not (CACHE / "micrograd" / "__init__.py").is_file():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(CACHE),
                "micrograd==0.1.0",
            ],
            check=True,
        )
    return load_package(CACHE, "micrograd", ("engine", "nn"))


def moons(n: int = 100, noise: float = 0.1, seed: int = 1) -> tuple[list[list[float]], list[int]]:
    """Two interleaving half circles, labelled -1 and 1 (as sklearn's make_moons)."""
    rng = random.Random(seed)
    X, y = [], []
    for i in range(n):
        t = math.pi * (i % (n // 2)) / (n // 2 - 1)
        if i < n // 2:
            x0, x1, label = math.cos(t), math.sin(t), -1
        else:
            x0, x1, label = 1 - math.cos(t), 0.5 - math.sin(t), 1
        X.append([x0 + rng.gauss(0, noise), x1 + rng.gauss(0, noise)])
        y.append(label)
    return X, y


def train(modules: dict, weights: list[float], X, y, steps: int) -> tuple[float, float]:
    """micrograd's demo loop; returns (final loss, seconds)."""
    Value, nn = modules["engine"].Value, modules["nn"]
    random.seed(0)
    model = nn.MLP(2, [16, 16, 1])
    for p, w in zip(model.parameters(), weights, strict=True):
        p.data = w
    started = time.perf_counter()
    for k in range(steps):
        inputs = [list(map(Value, row)) for row in X]
        scores = list(map(model, inputs))
        losses = [(1 + -yi * si).relu() for yi, si in zip(y, scores, strict=True)]
        data_loss = sum(losses) * (1.0 / len(losses))
        reg_loss = 1e-4 * sum(p * p for p in model.parameters())
        total = data_loss + reg_loss
        model.zero_grad()
        total.backward()
        lr = 1.0 - 0.9 * k / steps
        for p in model.parameters():
            p.data -= lr * p.grad
    return float(total.data), time.perf_counter() - started


def timed_subprocess(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    floor = timed_subprocess([sys.executable, "-c", "import torch, pytest"], args.repeat)
    suite = [sys.executable, "-m", "pytest", "-q", "tests/public/micrograd"]
    cold = timed_subprocess([*suite, "--no-oracle-cache"], args.repeat)
    warm = timed_subprocess(suite, args.repeat)
    print(f"`import torch, pytest`: {floor:.2f} s")
    print(f"public micrograd suite, PyTorch oracle run afresh: {cold:.2f} s; ratio {cold / floor:.1f}x")
    print(f"public micrograd suite, oracle from its disk cache: {warm:.2f} s; ratio {warm / floor:.1f}x")

    X, y = moons()
    rng = random.Random(42)
    weights = [rng.uniform(-1, 1) for _ in range(2 * 16 + 16 + 16 * 16 + 16 + 16 + 1)]
    ours = load_package(REPO / "reference", "micrograd", ("engine", "nn"))
    theirs = original_micrograd()
    loss_ref, t_ref = train(ours, weights, X, y, args.steps)
    loss_orig, t_orig = train(theirs, weights, X, y, args.steps)
    print(
        f"training MLP(2, [16, 16, 1]), 100 points, {args.steps} steps: reference {t_ref:.2f} s, "
        f"micrograd 0.1.0 {t_orig:.2f} s; ratio {t_ref / t_orig:.2f}x "
        f"(final loss {loss_ref:.6f} vs {loss_orig:.6f})"
    )


if __name__ == "__main__":
    main()
