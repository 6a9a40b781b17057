"""The reference needle against PyTorch, and the needle suite against the import floor.

    python bench/bench_needle.py [--repeat 3] [--examples 60000]

1. One epoch of a 2-layer MLP on synthetic MNIST-sized data (60,000 x 784 float32 inputs,
   10 classes, hidden 100, batch 100, softmax cross-entropy written in needle ops as
   log-sum-exp minus the true logit, SGD with lr 0.1), in the reference needle and in
   PyTorch (with its default number of threads, and with one), from the same initial
   weights, timed in this process: the time ratios, and how far apart the final weights are.
2. `python -m pytest -q tests/public/needle` in a fresh process (the graded suite on the
   reference, PyTorch oracle included) against `python -c "import torch, pytest"`, the
   floor any such run pays: medians of --repeat runs.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from timing import REPO, timed

sys.path.insert(0, str(REPO))

from grader.case.loading import load_package  # noqa: E402

HIDDEN, CLASSES, BATCH, LR = 100, 10, 100, 0.1


def data(examples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inputs, labels and the initial weights (as the course's homework draws them)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((examples, 784), dtype=np.float32) / 10.0
    y = rng.integers(0, CLASSES, examples).astype(np.uint8)
    W1 = (rng.standard_normal((784, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32)
    W2 = (rng.standard_normal((HIDDEN, CLASSES)) / np.sqrt(CLASSES)).astype(np.float32)
    return X, y, W1, W2


def needle_epoch(ndl, X, y, W1, W2):
    W1, W2 = ndl.Tensor(W1), ndl.Tensor(W2)
    eye = np.eye(CLASSES, dtype=np.float32)
    for start in range(0, len(X), BATCH):
        Xb = ndl.Tensor(X[start : start + BATCH], requires_grad=False)
        Yb = ndl.Tensor(eye[y[start : start + BATCH]], requires_grad=False)
        Z = ndl.matmul(ndl.relu(ndl.matmul(Xb, W1)), W2)
        lse = ndl.log(ndl.summation(ndl.exp(Z), axes=(1,)))
        loss = (ndl.summation(lse) - ndl.summation(Z * Yb)) / Z.shape[0]
        loss.backward()
        W1 = ndl.Tensor(W1.numpy() - LR * W1.grad.numpy())
        W2 = ndl.Tensor(W2.numpy() - LR * W2.grad.numpy())
    return W1.numpy(), W2.numpy()


def torch_epoch(torch, X, y, W1, W2):
    W1 = torch.tensor(W1, requires_grad=True)
    W2 = torch.tensor(W2, requires_grad=True)
    X, eye = torch.from_numpy(X), torch.eye(CLASSES, dtype=torch.float32)
    y = torch.from_numpy(y.astype(np.int64))
    for start in range(0, len(X), BATCH):
        Xb, Yb = X[start : start + BATCH], eye[y[start : start + BATCH]]
        Z = torch.relu(Xb @ W1) @ W2
        loss = (Z.exp().sum(dim=1).log().sum() - (Z * Yb).sum()) / Z.shape[0]
        loss.backward()
        with torch.no_grad():
            W1 -= LR * W1.grad
            W2 -= LR * W2.grad
        W1.grad = None
        W2.grad = None
    return W1.detach().numpy(), W2.detach().numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each subprocess (median)")
    parser.add_argument("--examples", type=int, default=60_000, help="training examples in the epoch")
    args = parser.parse_args()

    import torch

    modules = load_package(REPO / "reference", "needle", ("autograd", "ops", "init"))
    ndl = modules["needle"]
    X, y, W1, W2 = data(args.examples)

    started = time.perf_counter()
    n1, n2 = needle_epoch(ndl, X, y, W1, W2)
    needle_s = time.perf_counter() - started
    torch_s = {}
    for threads in dict.fromkeys([torch.get_num_threads(), 1]):
        torch.set_num_threads(threads)
        started = time.perf_counter()
        t1, t2 = torch_epoch(torch, X, y, W1, W2)
        torch_s[threads] = time.perf_counter() - started
    apart = max(float(np.abs(n1 - t1).max()), float(np.abs(n2 - t2).max()))

    print(
        f"MLP epoch ({args.examples} x 784 float32, hidden {HIDDEN}, batch {BATCH}, softmax loss, SGD {LR}):"
    )
    print(f"  reference needle             {needle_s:7.2f} s")
    for threads, seconds in torch_s.items():
        print(
            f"  PyTorch {torch.__version__}, {threads} thread{'s' if threads > 1 else ' '} {seconds:7.2f} s"
            f"   ratio needle / PyTorch: {needle_s / seconds:.2f}x"
        )
    print(f"  final weights of the two differ by at most {apart:.1e}")

    suite = timed([sys.executable, "-m", "pytest", "-q", "tests/public/needle"], args.repeat)[0]
    floor = timed([sys.executable, "-c", "import torch, pytest"], args.repeat)[0]
    print(f"needle public suite (median of {args.repeat}):")
    print(f"  python -m pytest -q tests/public/needle  {suite:6.2f} s")
    print(f"  python -c 'import torch, pytest'         {floor:6.2f} s")
    print(f"  ratio suite / import floor: {suite / floor:.2f}x")


if __name__ == "__main__":
    main()
