#!/usr/bin/env bash
# Creates .venv and installs tw_jax (editable) from the locked set in requirements/constraints.txt.
#   bash tools/setup.sh          # the library, its CLI and spaCy's English pipeline (extra
#                                # "spacy-model": salient span masking and the demo need it)
#   bash tools/setup.sh test     # plus test tools, Apache Beam and PyTorch for the parity tests
#                                # against Hugging Face (extra "parity")
#   bash tools/setup.sh tpu      # on a Cloud TPU VM: jax[tpu] (libtpu); what tools/tpu_vm.sh setup
#                                # runs on every worker. No PyTorch (see below)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
tpu=0
if [[ ",$extras," == *",tpu,"* ]]; then tpu=1; fi
python=python3
if [ "$tpu" = 1 ]; then
  # Cloud TPU VM images (Ubuntu 22.04) have python3 3.10 and tw_jax needs 3.11+: take the first
  # interpreter that is new enough (tools/tpu_vm.sh setup installs python3.11 where none is).
  python=""
  for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      python="$candidate" && break
    fi
  done
  if [ -z "$python" ]; then
    echo "setup.sh: tpu needs Python 3.11+ (e.g. sudo apt-get install python3.11 python3.11-venv)" >&2
    exit 1
  fi
fi
"$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.*"
if [[ ",$extras," != *",spacy-model,"* ]]; then extras="${extras:+$extras,}spacy-model"; fi
# On a TPU VM the test tools come without the PyTorch parity tests: the CPU torch wheel is a local
# wheel of this workplace's machines, and from an index Linux gets the CUDA build (gigabytes).
if [[ ",$extras," == *",test,"* && "$tpu" = 0 ]]; then extras="$extras,parity"; fi
if [[ ",$extras," == *",parity,"* && "$tpu" = 0 ]]; then
  # pip, not uv: pip's configured find-links hold the CPU wheel; an index would give the CUDA build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
spec="."
if [ -n "$extras" ]; then spec=".[$extras]"; fi
.venv/bin/uv pip install --quiet --python .venv/bin/python \
  --constraint requirements/constraints.txt --editable "$spec"
