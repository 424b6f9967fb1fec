#!/usr/bin/env bash
# Creates .venv and installs tw_jax (editable) from the locked set in requirements/constraints.txt.
#   bash tools/setup.sh          # the library, its CLI and spaCy's English pipeline (extra
#                                # "spacy-model": salient span masking and the demo need it)
#   bash tools/setup.sh test     # plus test tools, Apache Beam and PyTorch for the parity tests
#                                # against Hugging Face (extra "parity")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==0.13.*"
if [[ ",$extras," != *",spacy-model,"* ]]; then extras="${extras:+$extras,}spacy-model"; fi
if [[ ",$extras," == *",test,"* ]]; then extras="$extras,parity"; fi
if [[ ",$extras," == *",parity,"* ]]; then
  # pip, not uv: pip's configured find-links hold the CPU wheel; an index would give the CUDA build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
spec="."
if [ -n "$extras" ]; then spec=".[$extras]"; fi
.venv/bin/uv pip install --quiet --python .venv/bin/python \
  --constraint requirements/constraints.txt --editable "$spec"
