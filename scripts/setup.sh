#!/usr/bin/env bash
# Install everything the project needs on a fresh machine: Graphviz's `dot` (graph
# pictures) when the system package manager is at hand, and the grader package with its
# pinned PyTorch (torch==2.13.0, the CPU build), the development tools and nbgrader (the
# course under assignments/ and its end-to-end test).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v dot >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null && apt-get install -y -qq graphviz >/dev/null
    else
        echo "note: Graphviz's dot is not installed; graph pictures will not render" \
             "(apt-get install graphviz, brew install graphviz or conda install graphviz)" >&2
    fi
fi
python -m pip install --quiet --disable-pip-version-check -e ".[dev,nbgrader]"
