"""Submissions as tasks on a Dask distributed cluster (`--dask ADDRESS`).

Each task carries one submission's files (workers need not share a file system with the
client) and runs it in the worker's sandbox (`runner.sandbox_runs_of_files`); what comes
back is the same `Outcome` a local worker sends, scored and written to the gradebook by
the client. A task whose worker dies is retried by Dask on another worker; one that kills
workers again (`KilledWorker`) or raises is recorded as an error with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from grader.classgrade.hashing import submission_files
from grader.classgrade.pool import Finished
from grader.classgrade.runner import Job, Outcome, sandbox_runs_of_files

#: the largest submission shipped to a worker, in bytes (a class's code is small)
MAX_SHIPPED = 64 << 20


def files_of(job: Job) -> dict[str, bytes]:
    """The submission's files, by relative path, as a worker elsewhere gets them."""
    found, total = {}, 0
    for path in submission_files(job.path):
        data = path.read_bytes()
        total += len(data)
        if total > MAX_SHIPPED:
            raise ValueError(f"{job.student}'s submission is larger than {MAX_SHIPPED >> 20} MiB")
        found[path.relative_to(job.path).as_posix()] = data
    return found


def run_task(job: Job, files: dict[str, bytes]) -> Outcome:
    """What a Dask worker runs (a module-level function: workers import it by name)."""
    return sandbox_runs_of_files(job, files)


@dataclass
class DaskBackend:
    """Runs each job as a task on the cluster at `address` (a scheduler, or a `Client`)."""

    address: object
    retries: int = 1
    client: Any = field(default=None, init=False, repr=False)

    def start(self) -> None:
        """Reach the scheduler now, before the class is read: a malformed address raises
        ValueError, an unreachable one OSError (after Dask's connect timeout), at once rather
        than after the submissions were found."""
        if self.client is None:
            from distributed import Client

            self.client = self.address if isinstance(self.address, Client) else Client(self.address)

    def run(self, jobs: Iterable[Job]) -> Iterator[Finished]:
        from distributed import as_completed

        self.start()
        client = self.client
        try:
            futures = {}
            for job in jobs:
                try:
                    files = files_of(job)
                except (OSError, ValueError) as exc:
                    yield Finished(job.student, fault=str(exc))
                    continue
                key = f"grade-{job.student}-{id(job)}"
                future = client.submit(run_task, job, files, key=key, pure=False, retries=self.retries)
                futures[future] = job.student
            for future in as_completed(futures):
                student = futures[future]
                try:
                    yield Finished(student, future.result())
                except Exception as exc:  # the task failed on the cluster: an error with the reason
                    reason = f"the cluster could not grade it: {type(exc).__name__}: {exc}"
                    yield Finished(student, fault=reason)
        finally:
            if client is not self.address:
                client.close()
                self.client = None
