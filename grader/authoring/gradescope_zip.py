"""`python -m grader gradescope OUT.zip`: the autograder an instructor uploads to Gradescope.

Gradescope unpacks the zip into `/autograder/source`, runs `setup.sh` once as root on Ubuntu
22.04 to build the image, then `run_autograder` as root for every submission. The zip holds:

    setup.sh            Python 3.11 in a venv under /autograder, torch (CPU), the grader's
                        wheel and its pinned dependencies, libseccomp, an unprivileged user
    run_autograder      `python -m grader autograde`: grades /autograder/submission, writes
                        /autograder/results/results.json (see `grader.autograder`)
    autograder.json     what to grade and how: assignments, suite, limits, visibility, user
    wheels/             the grader package, built here and scanned for leaks before it ships
    requirements.txt    the dependencies pinned to what this kit was tested with
    suites/             the public and hidden suites
    oracle/oracle.json  every case's expected run, computed here: grading imports no torch

Only the grader's wheel is scanned for leaks: the zip itself holds the hidden suites by
design, and never reaches a student (run_autograder makes /autograder/source root-only).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import tomllib
import zipfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from grader.assignments import NAMES
from grader.authoring.leaks import scan, secrets
from grader.authoring.wheel import WheelError, wheel_file
from grader.case.define import collect
from grader.pipeline import REPO, SUITES_DIR, suites_for
from grader.scope import ScopeError, parse
from grader.verdict.oracle import Oracle

#: Gradescope's defaults: a 768 MB container and ten minutes for the whole run
CONTAINER_MIB = 768
RUN_SECONDS = 600.0
#: the unprivileged user setup.sh creates and the workers run as
USER = "grader-student"
#: torch comes from PyTorch's CPU index (no CUDA libraries: a smaller, faster image)
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
PYTHON = "python3.11"
TEMPLATES = Path(__file__).resolve().parent / "gradescope"


class BuildError(RuntimeError):
    """The zip cannot be built: a one-line reason for the instructor."""


@dataclass
class Settings:
    """What `autograder.json` holds; `grader.autograder` reads it back."""

    assignments: list[str] = field(default_factory=lambda: list(NAMES))
    suite: str = "all"
    visibility: str = "after_published"
    user: str = USER
    timeout: float = 10.0  # seconds per case
    #: seconds for all of the sandbox's work; the rest of RUN_SECONDS is for starting and writing
    budget: float = 540.0
    #: seconds after which run_autograder stops the grader and writes results.json anyway
    run_seconds: float = RUN_SECONDS - 30.0
    #: MiB one worker may use; with the grader's own ~100 MiB the run stays under CONTAINER_MIB
    memory: int = 560
    suites_digest: str = ""
    #: the scope files given (`grader.scope`), as their TOML text: out-of-scope cases are not run
    scopes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = json.loads(text)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def suites_digest(suites: Path, assignments: list[str]) -> str:
    """A hash of the suite files: the frozen oracle is used only for the suites it was made from."""
    digest = hashlib.sha256()
    for suite in ("public", "hidden"):
        for name in sorted(assignments):
            for path in sorted((suites / suite / name).rglob("*.py")):
                digest.update(f"\0{path.relative_to(suites).as_posix()}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:24]


def build_wheel(repo: Path, dest: Path) -> Path:
    """The grader package as pip would install it, built from a clean copy of `repo`."""
    try:
        return wheel_file(repo, dest)
    except WheelError as exc:
        raise BuildError(f"building the grader's wheel failed: {exc}") from None


def check_wheel(wheel: Path, repo: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="grader-wheel-scan-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp)
        leaks = scan(Path(tmp), secrets(repo / "reference", repo / "tests"))
    if leaks:
        raise BuildError(f"the grader's wheel leaks {len(leaks)} secret(s), first: {leaks[0]}")


def _name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[]", requirement, maxsplit=1)[0]


def requirements(repo: Path) -> str:
    """The package's dependencies, each pinned to the version installed here (torch apart:
    setup.sh takes it from the CPU index first)."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    lines = []
    for requirement in project["dependencies"]:
        name = _name(requirement)
        marker = requirement.split(";", 1)[1].strip() if ";" in requirement else ""
        if name == "torch":
            continue
        try:
            pinned = f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            pinned = requirement.split(";", 1)[0].strip()
        lines.append(f"{pinned}; {marker}" if marker else pinned)
    return "\n".join(lines) + "\n"


def torch_requirement(repo: Path) -> str:
    """torch pinned to the version installed here (without its +cpu label), which computed
    the frozen oracle; else what pyproject.toml asks for."""
    try:
        return f"torch=={metadata.version('torch').split('+')[0]}"
    except metadata.PackageNotFoundError:
        project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
        found = [r.split(";", 1)[0].strip() for r in project["dependencies"] if _name(r) == "torch"]
        return found[0] if found else "torch"


def build(
    out: Path,
    settings: Settings | None = None,
    suites: Path = SUITES_DIR,
    repo: Path = REPO,
    oracle: Oracle | None = None,
) -> Path:
    """Write the autograder zip to `out`; returns it. The oracle (default: the disk cache)
    computes the expected runs once; later builds reuse them."""
    settings = settings or Settings()
    out = Path(out)
    if out.suffix != ".zip":
        raise BuildError(f"{out}: the autograder must be a .zip file")
    unknown = [a for a in settings.assignments if a not in NAMES]
    if unknown:
        raise BuildError(f"unknown assignment(s): {', '.join(unknown)} (known: {', '.join(NAMES)})")
    settings.suites_digest = suites_digest(suites, settings.assignments)
    try:
        for text in settings.scopes:
            parse(tomllib.loads(text), "given with --scope", suites)
    except (ScopeError, tomllib.TOMLDecodeError) as exc:
        raise BuildError(str(exc)) from None
    cases = collect(suites, settings.assignments, suites_for(settings.suite))
    if not cases:
        raise BuildError(f"no cases under {suites} for {', '.join(settings.assignments)}")
    with tempfile.TemporaryDirectory(prefix="grader-gradescope-") as tmp:
        stage = Path(tmp) / "zip"
        (stage / "wheels").mkdir(parents=True)
        wheel = build_wheel(repo, stage / "wheels")
        check_wheel(wheel, repo)
        for suite in suites_for(settings.suite):
            for name in settings.assignments:
                if (suites / suite / name).is_dir():
                    shutil.copytree(
                        suites / suite / name,
                        stage / "suites" / suite / name,
                        ignore=shutil.ignore_patterns("__pycache__"),
                    )
        frozen = (oracle or Oracle()).freeze(cases)
        (stage / "oracle").mkdir()
        (stage / "oracle" / "oracle.json").write_text(json.dumps(frozen))
        (stage / "autograder.json").write_text(settings.to_json())
        (stage / "requirements.txt").write_text(requirements(repo))
        setup = (TEMPLATES / "setup.sh").read_text()
        setup = setup.replace("@PYTHON@", PYTHON).replace("@USER@", settings.user)
        setup = setup.replace("@TORCH@", torch_requirement(repo)).replace("@TORCH_INDEX@", TORCH_INDEX)
        (stage / "setup.sh").write_text(setup)
        shutil.copy(TEMPLATES / "run_autograder", stage / "run_autograder")
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(p for p in stage.rglob("*") if p.is_file()):
                rel = path.relative_to(stage).as_posix()
                info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (0o755 if rel in ("setup.sh", "run_autograder") else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
        partial.replace(out)
    return out
