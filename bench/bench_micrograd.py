"""The micrograd suite against the import floor, and the reference against micrograd 0.1.0.

    python bench/bench_micrograd.py [--repeat 3] [--steps 100]

1. `python -m pytest -q tests/public/micrograd` in a fresh process (the graded suite on the
   reference, PyTorch oracle included) against `python -c "import torch, pytest"`, the floor
   any such run pays: medians of --repeat runs, and their ratio.
2. The same training loop on the reference engine and on the original micrograd package
   from the registry (micrograd==0.1.0, installed on first use into bench/.cache): MLP(2,
   [16, 16, 1]) on 100 two-moons points, the SVM max-margin loss with L2 regularisation
   of micrograd's demo notebook, SGD with its decaying learning rate, the same initial
   weights, the two engines taking steps in turn, timed in this process: the time ratio,
   and the two final losses (which must agree up to float rounding; a warning says when
   they do not).

Each training step leaves ~65k nodes whose `_backward` closures refer back to them: cyclic
garbage that only Python's cycle collector frees. Left on, the collector takes ~85% of the
loop's time on both engines alike (it scans the whole heap, whatever the engine does) and
100 steps take minutes, so the loop runs with automatic collection off, and after each step,
outside the timed region, every node's `_backward` is reset to a no-op: that breaks the
cycles, and reference counting frees the graph (what still sits in a cycle, as micrograd
0.1.0's recursive `build_topo` closure does, is collected untimed once enough piles up).
The times are the engines' own work: building the graph, backward, the update.
"""

from __future__ import annotations

import argparse
import gc
import math
import random
import subprocess
import sys
import time

from timing import REPO, cpu_timed

CACHE = REPO / "bench" / ".cache" / "micrograd-0.1.0"
sys.path.insert(0, str(REPO))

from grader.case.loading import load_package  # noqa: E402


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


def _noop() -> None:
    return None


def release(root) -> None:
    """Break the node <-> `_backward` closure cycles of root's graph so that reference
    counting frees it without the cycle collector (uses only `_prev` and `_backward`)."""
    seen, stack = {id(root)}, [root]
    while stack:
        node = stack.pop()
        node._backward = _noop
        for child in node._prev:
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)


class Trainer:
    """micrograd's demo training loop on one engine, one step at a time."""

    def __init__(self, modules: dict, weights: list[float], X, y, steps: int) -> None:
        self.Value, nn = modules["engine"].Value, modules["nn"]
        random.seed(0)
        self.model = nn.MLP(2, [16, 16, 1])
        for p, w in zip(self.model.parameters(), weights, strict=True):
            p.data = w
        self.X, self.y, self.steps = X, y, steps
        self.loss, self.elapsed = math.nan, 0.0

    def step(self, k: int) -> None:
        Value, model, y = self.Value, self.model, self.y
        started = time.perf_counter()
        inputs = [list(map(Value, row)) for row in self.X]
        scores = list(map(model, inputs))
        losses = [(1 + -yi * si).relu() for yi, si in zip(y, scores, strict=True)]
        data_loss = sum(losses) * (1.0 / len(losses))
        reg_loss = 1e-4 * sum(p * p for p in model.parameters())
        total = data_loss + reg_loss
        model.zero_grad()
        total.backward()
        lr = 1.0 - 0.9 * k / self.steps
        for p in model.parameters():
            p.data -= lr * p.grad
        self.elapsed += time.perf_counter() - started
        self.loss = float(total.data)
        # Not timed: free the step's graph. Whatever is still held in a cycle (micrograd
        # 0.1.0's recursive build_topo closure keeps its topo list alive) is collected
        # once enough has piled up, so memory stays bounded.
        release(total)
        del inputs, scores, losses, data_loss, reg_loss, total
        if gc.get_count()[0] > 1_000_000:
            gc.collect()


def train(engines: list[dict], weights: list[float], X, y, steps: int) -> list[tuple[float, float]]:
    """Train one model per engine, step by step in turn (the first to go alternates), so
    that a change in the machine's load falls on every engine alike. Returns each
    engine's (final loss, seconds spent in its steps)."""
    trainers = [Trainer(modules, weights, X, y, steps) for modules in engines]
    gc.collect()
    gc.disable()
    try:
        for k in range(steps):
            for trainer in trainers if k % 2 == 0 else trainers[::-1]:
                trainer.step(k)
    finally:
        gc.enable()
    return [(t.loss, t.elapsed) for t in trainers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()

    floor, floor_cpu, _ = cpu_timed([sys.executable, "-c", "import torch, pytest"], args.repeat)
    suite = [sys.executable, "-m", "pytest", "-q", "tests/public/micrograd"]
    cold, cold_cpu, _ = cpu_timed([*suite, "--no-oracle-cache"], args.repeat)
    cpu_timed(suite, 1)  # fills the disk cache (the afresh runs above do not write it): not timed
    warm, warm_cpu, _ = cpu_timed(suite, args.repeat)
    print(f"`import torch, pytest`: {floor:.2f} s ({floor_cpu:.2f} s CPU)")
    print(
        f"public micrograd suite, PyTorch oracle run afresh: {cold:.2f} s ({cold_cpu:.2f} s CPU); "
        f"ratio {cold / floor:.1f}x ({cold_cpu / floor_cpu:.1f}x in CPU)"
    )
    print(
        f"public micrograd suite, oracle from its disk cache: {warm:.2f} s ({warm_cpu:.2f} s CPU); "
        f"ratio {warm / floor:.1f}x ({warm_cpu / floor_cpu:.1f}x in CPU; target <= 2x)"
    )

    X, y = moons()
    rng = random.Random(42)
    weights = [rng.uniform(-1, 1) for _ in range(2 * 16 + 16 + 16 * 16 + 16 + 16 + 1)]
    ours = load_package(REPO / "reference", "micrograd", ("engine", "nn"))
    theirs = original_micrograd()
    (loss_ref, t_ref), (loss_orig, t_orig) = train([ours, theirs], weights, X, y, args.steps)
    print(
        f"training MLP(2, [16, 16, 1]), 100 points, {args.steps} steps: reference {t_ref:.2f} s, "
        f"micrograd 0.1.0 {t_orig:.2f} s; ratio {t_ref / t_orig:.2f}x "
        f"(final loss {loss_ref:.6f} vs {loss_orig:.6f})"
    )
    if not math.isclose(loss_ref, loss_orig, rel_tol=1e-9, abs_tol=1e-12):
        print(f"WARNING: the final losses differ ({loss_ref!r} vs {loss_orig!r}): the engines disagree")


if __name__ == "__main__":
    main()
