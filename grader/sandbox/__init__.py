"""Grade untrusted code: cases run in a limited worker process that only returns numbers.

root.py      the worker's private world: lib/ (a few grader modules, the suites run so
             far, numpy) and work/ (a copy of the submission's package); nothing else
             importable
worker.py    runs inside it (`python -s -P -S`, in grader/case): runs each suite (in a
             forked child but the last), collecting the cases by id, running them and
             sending plain results; it never sees an expected value
protocol.py  length-prefixed JSON over a pipe, bounded, parsed strictly by the grader
process.py   one worker seen from the grader: deadlines, memory, SIGKILL of its group
             (and of its PID namespace)
bwrap.py     the worker's world under bubblewrap: an allow-list of paths (runtime, numpy,
             lib/, work/, a scratch /tmp), own PID/network/IPC namespaces, no capabilities
confine.py   the fallback where bwrap cannot start: read-only file system but its own
             directory, the grader's secrets hidden, no network (Linux, as root)
seccomp.py   (in grader/case, via libseccomp) no new processes, no signals to others,
             no raising its limits
engine.py    `SandboxEngine.run_all(cases) -> list[Run]`: one worker per assignment,
             its suites in turn (public first, the hidden suite added only then), a
             fresh worker after each fault, a total budget
"""

from grader.sandbox.engine import Budget, SandboxEngine
from grader.sandbox.process import Limits
from grader.sandbox.root import SandboxError

__all__ = ["Budget", "Limits", "SandboxEngine", "SandboxError"]
