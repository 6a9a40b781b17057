"""What runs beside student code: defining and running a case, the results tape, loading
a submission, the worker's end of the wire.

This package is copied whole into the sandbox (with the assignments' folders, less their
oracles) and shipped in the student bundle. It imports nothing from the trusted side
(`grader.verdict`, `grader.sandbox`, `grader.report`, the oracles): a test checks it.

    define.py    @case, Case, collect: a graded case is a function of a backend `lib`
    backend.py   what every `lib` shares: applying ops through the tape, flattening results
    trace.py     Node and Tape: expressions that remember how they were built
    quantity.py  Quantity: the plain numbers that cross to the verdict
    run.py       run one case on one `lib` -> Run (results, tape, or the error)
    loading.py   import a submission's package from its directory, fresh every time
    limits.py    how long a case may run: the probe, the short budgets, the cut-off
    inprocess.py the in-process engine: cases run in this process, within those limits
    worker.py    the sandbox worker's main loop; wire.py its messages; seccomp.py its
                 system-call filter; hang.py where a timed-out case was stuck
"""

from grader.case.define import Case, case, collect

__all__ = ["Case", "case", "collect"]
