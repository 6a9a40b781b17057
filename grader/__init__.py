"""Grade automatic-differentiation assignments against PyTorch.

The pipeline, in the order data flows through it:
collect cases (cases.py) -> run the oracle (oracle.py) -> run the submission (runner.py,
through a backend in backends/) -> compare (compare.py) -> score and report
(grading.py, results.py, report.py), with diagnostics that name the op (diagnose.py).
"""

__version__ = "0.1.0"
