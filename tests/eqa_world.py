"""The sample world's EvolvingQA data built offline, as the retrieval and open-book tests use it:
the EvolvingQA build (passages; ``--min-changed-chars 100``, since the world's prose edits are
shorter than the paper's 500 characters and would leave no Edited pair), the Probes stage with
every fact kept (no caps, no UNCHANGED down-sampling, so the sets are large enough to measure),
then offline QA generation, which keeps New and Edited questions to the build's articles."""

from __future__ import annotations

from pathlib import Path

from tw_jax.cli import main
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.evolvingqa.extract import BuildOptions, build_evolvingqa
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

NO_CAPS = ProbeOptions(unchanged_rate=1.0, max_subject_frac=1.0, max_object_frac=1.0,
                       max_relation_frac=1.0)


def build_eqa_world(sample_world: tuple[Path, dict], out: Path) -> Path:
    """``out`` holding the build's passages, a TemporalWiki folder ``twiki`` of its own DiffSets
    and probes, and the QA sets generated offline from those probes."""
    root, world = sample_world
    months = world["months"]
    summary = build_evolvingqa([wikipedia_dump(root, m) for m in months], out,
                               options=BuildOptions(min_changed_chars=100))
    probes = out / "twiki"
    for old, new, pair in zip(months, months[1:], summary["pairs"], strict=False):
        build_diffset(wikipedia_dump(root, old), wikipedia_dump(root, new),
                      probes / pair / "diffset")
        build_probes(wikidata_dump(root, old), wikidata_dump(root, new), wikipedia_dump(root, new),
                     probes / pair / "diffset", probes / pair / "probes", options=NO_CAPS,
                     old_wikipedia=wikipedia_dump(root, old))
    assert main(["evolvingqa", "generate", "--data", str(out), "--probes", str(probes),
                 "--finetune-fraction", "0.5"]) == 0
    return out


def tiny_dpr_encoders(folder: Path, words: list[str]) -> tuple[Path, Path]:
    """(question encoder, ctx encoder) Hugging Face folders of tiny random DPR encoders over a
    word-piece vocabulary of ``words`` (after the five special tokens)."""
    from tw_jax.retrieval.base import Passage
    from tw_jax.retrieval.bert import BertConfig
    from tw_jax.retrieval.dense import DenseRetriever

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=256,
                        dropout_rate=0.0, attention_dropout=0.0)
    encoders = DenseRetriever.random(0, config, vocab)
    encoders.build([Passage("0", "", "the capital")])
    encoders.save(str(folder))
    return folder / "question_encoder", folder / "ctx_encoder"
