"""What several of the grader's test modules share."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.authoring.release import release


@pytest.fixture(scope="session")
def released_bundle(tmp_path_factory) -> Path:
    """The student bundle, released once per session (`python -m grader release`). Tests
    that change it, or install into it, work on a copy."""
    out = tmp_path_factory.mktemp("release") / "autodiff"
    made = release(out)
    assert made.leaks == [] and out.is_dir()
    return out
