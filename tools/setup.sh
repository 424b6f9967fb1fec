#!/usr/bin/env bash
# Creates .venv and installs tw_jax (editable) from the locked set in requirements/constraints.txt.
#   bash tools/setup.sh          # the library and its CLI
#   bash tools/setup.sh test     # plus test tools, Apache Beam and the spaCy English pipeline
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.*"
spec="."
if [ -n "$extras" ]; then spec=".[$extras]"; fi
.venv/bin/uv pip install --quiet --python .venv/bin/python \
  --constraint requirements/constraints.txt --editable "$spec"
