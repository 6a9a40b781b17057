"""Grade automatic-differentiation assignments against PyTorch.

A case flows through the packages in this order: `case` collects it and runs it on the
submission (in this process, or in a sandboxed worker from `sandbox`), `verdict` runs it
on PyTorch, compares and names the slip, `pipeline` scores it, and `report` renders the one
report model for every front end (`cli`, `plugin` for pytest, `classgrade`, `classroom`,
`autograder` for Gradescope). `assignments` holds what is particular to micrograd and
needle; `authoring` makes what ships (the template, the notebooks, the bundle).
"""

import os

__version__ = "0.1.0"

#: numpy's math libraries on one thread wherever the kit runs, as in the sandbox's workers:
#: a course's arrays are small, and the BLAS numpy ships starts a thread a core that spins
#: for a tenth of a second of CPU as it loads, in every short run
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# Here, since this runs before any module of the kit imports numpy; a setting of the user's
# own is kept, and a numpy already imported keeps its threads.
for _name, _value in ONE_THREAD.items():
    os.environ.setdefault(_name, _value)
