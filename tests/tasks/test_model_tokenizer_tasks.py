"""The causal-LM tasks exist for any model tokenizer a run names: ``*_lm_<name>`` beside GPT-2's
``*_lm`` tasks (whose names and examples stay as they were), documents framed by the tokenizer's
own BOS/EOS, and probe features that are exactly what the model's ``probe_example`` scores, the
ids ``transformers`` gives for the same text."""

from __future__ import annotations

from pathlib import Path

import pytest
import seqio

from tw_jax.data.hf_tokenizer import ModelTokenizerVocabulary
from tw_jax.data.tokenizer_styles import write_tokenizer
from tw_jax.models import LlamaConfig, model_for
from tw_jax.tasks import names
from tw_jax.tasks.probes import CAUSAL, FORMATS
from tw_jax.time import Period

PERIOD = Period.parse("0910")
NAMES = {"llama3": "tiny_llama3", "qwen2": "tiny_qwen"}


@pytest.fixture(scope="module")
def tokenizers(task_data, tmp_path_factory) -> dict[str, Path]:
    from twiki_data import read_jsonl

    texts = [r["text"] for r in read_jsonl(task_data["data_dir"] / "0910" / "diffset"
                                            / "full.jsonl")]
    root = tmp_path_factory.mktemp("model_tokenizers")
    return {NAMES[style]: Path(write_tokenizer(root / style, style, texts, vocab_size=500))
            for style in NAMES}


@pytest.fixture()
def registered(task_data, tokenizers):
    import tw_jax.tasks

    gpt2_only = tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                                          gpt2_vocab=str(task_data["gpt2"]))
    both = tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                                     gpt2_vocab=str(task_data["gpt2"]),
                                     tokenizers={k: str(v) for k, v in tokenizers.items()})
    yield set(gpt2_only), set(both)
    tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                              gpt2_vocab=str(task_data["gpt2"]))


def test_every_lm_task_per_tokenizer_and_gpt2_names_unchanged(registered):
    gpt2_only, both = registered
    assert gpt2_only < both
    added = both - gpt2_only
    for name in NAMES.values():
        objective = f"lm_{name}"
        for task in (names.diffset(PERIOD, objective), names.nondiff(PERIOD, objective),
                     names.intrinsic(PERIOD, objective), names.full(Period.parse("0809").old,
                                                                    objective),
                     names.mixreview(PERIOD, objective),
                     names.probes(PERIOD, "updated", f"_{objective}"),
                     names.probes(PERIOD, "changed", f"_{objective}_object"),
                     names.probes(PERIOD, None, f"_{objective}_cloze"),
                     names.lighttuning(PERIOD, "all", f"_{objective}_object")):
            assert task in added, task
    # nothing else is added: every new name carries one of the tokenizers' objectives
    assert all(any(f"_lm_{name}" in task for name in NAMES.values()) for task in added)


def _first(name: str, lengths=None) -> dict:
    task = seqio.get_mixture_or_task(name)
    dataset = task.get_dataset(lengths, split=task.splits[0], shuffle=False)
    return next(dataset.as_numpy_iterator())


def test_documents_framed_by_the_tokenizers_bos_and_eos(registered, task_data, tokenizers):
    from twiki_data import read_jsonl

    documents = [r["text"] for r in read_jsonl(task_data["data_dir"] / "0910" / "diffset"
                                               / "diffset.jsonl")]
    for name, folder in tokenizers.items():
        vocabulary = ModelTokenizerVocabulary(folder)
        block = _first(names.diffset(PERIOD, f"lm_{name}"), {"targets": 64})["targets"].tolist()
        head = [] if vocabulary.bos_id is None else [vocabulary.bos_id]  # Qwen: none
        stream = [i for text in documents for i in (*head, *vocabulary.encode(text),
                                                   vocabulary.eos_id)]
        assert block == stream[:64], name
        assert (block[0] == vocabulary.bos_id) == (name == NAMES["llama3"])


@pytest.mark.parametrize("category", ["updated", "changed"])
def test_probe_features_are_the_models_scored_tokens(registered, tokenizers, category):
    from transformers import AutoTokenizer

    for name, folder in tokenizers.items():
        vocabulary = ModelTokenizerVocabulary(folder)
        model = model_for(LlamaConfig(tokenizer=name, vocab_size=vocabulary.vocab_size))
        assert model.objective == f"lm_{name}" and model.vocabulary_kind == "model"
        reference = AutoTokenizer.from_pretrained(folder)
        for fmt in (f for f in FORMATS if f.kind == CAUSAL):
            task = names.probes(PERIOD, category, names.probe_suffix(model.objective,
                                                                     fmt.variant))
            rows = seqio.get_mixture_or_task(task).source.rows()
            examples = list(seqio.get_mixture_or_task(task).get_dataset(
                None, split="validation", shuffle=False).as_numpy_iterator())
            assert len(examples) == len(rows) > 0, task
            for row, example in zip(rows, examples, strict=True):
                want = model.probe_example(vocabulary, row, fmt.variant)
                prompt = example["inputs"].tolist() if "inputs" in example else []
                assert prompt + example["targets"].tolist() == list(want.tokens), task
                weights = [0] * len(prompt) + example["targets_weights"].tolist()
                assert weights == [int(w) for w in want.weights], task
                if fmt.variant == "text":  # the whole sentence: transformers' own framing
                    text = example["targets_pretokenized"].decode("utf-8")
                    framed = reference(text)["input_ids"]
                    if vocabulary.bos_id is None:  # EOS stands for the BOS Qwen lacks
                        framed = [vocabulary.eos_id, *framed]
                    assert list(want.tokens) == framed, task


def test_a_name_given_to_two_different_tokenizers_is_refused(registered, tokenizers):
    import tw_jax.tasks
    from tw_jax.errors import UsageError

    tw_jax.tasks.register_tokenizer("shared_name", str(tokenizers[NAMES["llama3"]]))
    tw_jax.tasks.register_tokenizer("shared_name", str(tokenizers[NAMES["llama3"]]))  # same
    with pytest.raises(UsageError, match="'shared_name' is .*whose tokenizer differs"):
        tw_jax.tasks.register_tokenizer("shared_name", str(tokenizers[NAMES["qwen2"]]))
    with pytest.raises(ValueError, match="must be lower-case"):
        tw_jax.tasks.register_tokenizer("Bad-Name", str(tokenizers[NAMES["qwen2"]]))
    from tw_jax import tasks as package

    package._named_tokenizers.pop("shared_name")
