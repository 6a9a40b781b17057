"""Grade a whole class: `python -m grader grade-class ROOT`.

layout.py     which submissions ROOT holds: one directory per student, nbgrader's
              `submitted/<student>/<assignment>/`, or an LMS zip (unpacked safely)
hashing.py    the hash of a submission's files, and of the cases it is graded on
runner.py     one submission's sandboxed run (in a forked worker or a Dask task), replayed
              through `pipeline.grade` so a class grades exactly as `grader grade` does
pool.py       fresh processes forked from a warm fork server, a deadline each
gradebook.py  SQLite: per student and case, one transaction per submission; resume; merge
engine.py     the class run: one oracle run, skip what is unchanged, grade the rest
dask.py       the same submissions as tasks on a Dask distributed cluster
exports.py    nbgrader's export CSV, a per-case CSV, one Gradescope results.json per student
progress.py   the progress bar and the summary table (rich)
nbgrader.py   the fast path: a course's submitted notebooks into nbgrader's gradebook
cli.py        the `grade-class` and `merge` commands
"""
