"""The model families and the retrievers import without TensorFlow, seqio, spaCy, Beam or orbax:
a machine that only runs models (an accelerator VM scoring or encoding, a notebook) needs JAX,
Flax and the tokenizers, and pays TensorFlow's import time only where seqio's tasks are used."""

import subprocess
import sys

HEAVY = ("tensorflow", "seqio", "spacy", "apache_beam", "orbax")


def test_models_and_retrievers_import_without_the_data_stack():
    code = (
        "import sys\n"
        "import tw_jax.models, tw_jax.models.families\n"
        "import tw_jax.retrieval.dense, tw_jax.retrieval.bm25\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
