#!/usr/bin/env bash
# Creates .venv and installs tw_jax (editable) from the locked set in requirements/constraints.txt.
#   bash tools/setup.sh          # the library, its CLI and spaCy's English pipeline (extra
#                                # "spacy-model": salient span masking and the demo need it)
#   bash tools/setup.sh test     # plus test tools, Apache Beam, PyTorch for the parity tests
#                                # against Hugging Face (extra "parity") and lm-evaluation-harness
#                                # (extra "lm-eval", docs/lm_eval.md)
#   bash tools/setup.sh tpu      # on a Cloud TPU VM: jax[tpu] (libtpu); what tools/tpu_vm.sh setup
#                                # runs on every worker. No PyTorch (see below)
#   bash tools/setup.sh t5x      # plus the real T5X (python -m t5x.train ...; docs/t5x.md), from
#                                # GitHub at the commits of requirements/t5x.txt; "test" adds it too.
#   TW_JAX_T5X_WHEELS=DIR bash tools/setup.sh t5x
#                                # the same from a folder of wheels built from those commits
#                                # (t5x-*.whl, airio-*.whl, jestimator-*.whl), for machines that
#                                # reach PyPI but not GitHub
set -euo pipefail
cd "$(dirname "$0")/.."
# uv installs without byte-compiling: every fresh interpreter then compiles TensorFlow, JAX and
# T5X from source on import (about 15 s of CPU a process where the environment sets
# PYTHONDONTWRITEBYTECODE, as this workplace's machines do), and the tests start dozens of them.
export UV_COMPILE_BYTECODE=1
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
if [[ ",$extras," == *",test,"* && "$tpu" = 0 ]]; then extras="$extras,parity,lm-eval"; fi
if [[ ",$extras," == *",parity,"* && "$tpu" = 0 ]]; then
  # pip, not uv: pip's configured find-links hold the CPU wheel; an index would give the CUDA build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
spec="."
if [ -n "$extras" ]; then spec=".[$extras]"; fi
.venv/bin/uv pip install --quiet --python .venv/bin/python \
  --constraint requirements/constraints.txt --editable "$spec"
# The real T5X (docs/t5x.md): not on PyPI, so from GitHub at pinned commits or from a wheel folder,
# without their dependency metadata (git URLs that would move the locked set), then what they
# import beyond it.
if [[ ",$extras," == *",t5x,"* || ",$extras," == *",test,"* ]]; then
  if [ -n "${TW_JAX_T5X_WHEELS:-}" ]; then
    wheels=()
    for name in t5x airio jestimator; do
      found=("$TW_JAX_T5X_WHEELS"/"$name"-*.whl)
      if [ ! -e "${found[0]}" ]; then
        echo "setup.sh: no $name-*.whl in TW_JAX_T5X_WHEELS=$TW_JAX_T5X_WHEELS" >&2
        exit 1
      fi
      wheels+=("${found[0]}")
    done
    .venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps "${wheels[@]}"
  else
    .venv/bin/uv pip install --quiet --python .venv/bin/python --no-deps -r requirements/t5x.txt
  fi
  .venv/bin/uv pip install --quiet --python .venv/bin/python \
    --constraint requirements/constraints.txt -r requirements/t5x-deps.txt
fi
