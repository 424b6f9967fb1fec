"""Our vocabularies plugged into seqio itself: Task + FunctionDataSource + tokenize + converters."""

from __future__ import annotations

import pytest
import seqio
import tensorflow as tf

from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary

TEXTS = [
    "Paris is the capital of France!",
    "Zoë visited 東京 in 2021 😀",
    "Whitespace  runs\tand\nnewlines",
]


def make_task(name: str, vocabulary: seqio.Vocabulary) -> seqio.Task:
    def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
        del split, shuffle_files, seed
        return tf.data.Dataset.from_tensor_slices({"targets": TEXTS})

    return seqio.Task(
        name,
        source=seqio.FunctionDataSource(dataset_fn, splits=["train"]),
        preprocessors=[seqio.preprocessors.tokenize, seqio.preprocessors.append_eos],
        output_features={"targets": seqio.Feature(vocabulary, add_eos=True)},
    )


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return gpt2_vocabulary(gpt2_dir)


def test_gpt2_vocabulary_in_a_seqio_task(gpt2):
    task = make_task("tw_jax_test_gpt2_vocab", gpt2)
    dataset = task.get_dataset({"targets": 64}, split="train", shuffle=False)
    assert dataset.element_spec["targets"] == tf.TensorSpec([None], tf.int32)
    examples = list(dataset.as_numpy_iterator())
    assert [e["targets_pretokenized"].decode("utf-8") for e in examples] == TEXTS
    assert [e["targets"].tolist() for e in examples] == [
        gpt2.encode(t) + [gpt2.eos_id] for t in TEXTS
    ]
    # seqio's own decode stops at EOS and gives back the text.
    assert [gpt2.decode(e["targets"]) for e in examples] == TEXTS


def test_gpt2_task_through_the_lm_feature_converter(gpt2):
    """The caveats documented on ByteLevelBPEVocabulary: "!" is id 0, which seqio reads as padding."""
    task = make_task("tw_jax_test_gpt2_vocab_lm", gpt2)
    dataset = task.get_dataset({"targets": 64}, split="train", shuffle=False)
    first = gpt2.encode(TEXTS[0]) + [gpt2.eos_id]
    bang = first.index(0)
    assert gpt2.decode([first[bang]]) == "!"

    # pack=False keeps every token; only the loss weights misread the "!".
    unpacked = next(
        seqio.LMFeatureConverter(pack=False)(dataset, {"targets": 64}).as_numpy_iterator()
    )
    targets = unpacked["decoder_target_tokens"]
    assert targets[: len(first)].tolist() == first and not targets[len(first) :].any()
    weights = unpacked["decoder_loss_weights"][: len(first)]
    assert weights[bang] == 0 and weights.sum() == len(first) - 1
    # Decoding the padded row in TF: everything from the first EOS on is dropped.
    assert gpt2.decode_tf(tf.constant(targets)).numpy().decode("utf-8") == TEXTS[0]

    # seqio's packer counts non-zero ids: the example containing "!" loses its last token (EOS).
    packed = next(seqio.LMFeatureConverter(pack=True)(dataset, {"targets": 64}).as_numpy_iterator())
    assert packed["decoder_target_tokens"][: len(first) - 1].tolist() == first[:-1]
    assert packed["decoder_target_tokens"][len(first) - 1] != gpt2.eos_id
    assert packed["decoder_segment_ids"][bang] == 0


def test_t5_vocabulary_in_a_seqio_task(t5_model):
    vocab = t5_vocabulary(t5_model)
    task = make_task("tw_jax_test_t5_vocab", vocab)
    examples = list(
        task.get_dataset({"targets": 64}, split="train", shuffle=False).as_numpy_iterator()
    )
    assert [e["targets"].tolist() for e in examples] == [vocab.encode(t) + [1] for t in TEXTS]
