"""Trusted only: never copied into the sandbox, never run beside student code.

oracle.py     the expected results: every case run on PyTorch, cached on disk per suite version
cache.py      the oracle's cache folder: its versions, swept of those long unused
compare.py    a submission's numbers against the oracle's, within a documented tolerance
diagnose.py   a failed comparison as a message that names the op whose rule is wrong
integrity.py  is the submission borrowing an autodiff library's gradients?
"""
