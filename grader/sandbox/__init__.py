"""Grade untrusted code: cases run in a limited worker process that only returns numbers.

root.py      the worker's private world: lib/ (a few grader modules, one suite, numpy)
             and work/ (a copy of the submission)
worker.py    runs inside it: collects the cases by id, runs them, sends plain results
protocol.py  length-prefixed JSON over a pipe, parsed strictly by the grader
process.py   one worker seen from the grader: deadlines, memory, SIGKILL of its group
engine.py    `SandboxEngine.run_all(cases) -> list[Run]`: fresh workers after faults
"""

from grader.sandbox.engine import Budget, SandboxEngine
from grader.sandbox.process import Limits
from grader.sandbox.root import SandboxError

__all__ = ["Budget", "Limits", "SandboxEngine", "SandboxError"]
