"""The probe tasks' token features are the tokens the lifelong report scores: for every format
and row, ``inputs``/``targets``/``targets_weights`` equal what ``model.span_example`` builds for
the same :func:`tw_jax.tasks.probes.probe_spec` (the model's
``probe_example``), and cutting to the feature lengths keeps T5's
EOS last, as seqio's ``append_eos_after_trim`` did."""

from __future__ import annotations

import pytest
import seqio

from tw_jax.models import GPT2Config, T5Config, model_for
from tw_jax.tasks.probes import FORMATS, ProbeSpec, probe_features, probe_spec

ROW = {"subject": "Trurmouth", "relation": "head of government", "object": "Groris Funley",
       "previous_object": "", "text": "", "cloze": "Trurmouth is led by Groris Funley ."}


def _examples(name: str, lengths=None) -> list[dict]:
    task = seqio.get_mixture_or_task(name)
    return list(task.get_dataset(lengths, split=task.splits[0], shuffle=False).as_numpy_iterator())


@pytest.mark.parametrize("category", ["unchanged", "updated", "new", "deleted", "changed"])
def test_task_features_are_the_reports_scored_tokens(twiki, vocabularies, category):
    for fmt in FORMATS:
        name = f"twiki_probes_0910_{category}{fmt.suffix}"
        rows = seqio.get_mixture_or_task(name).source.rows()
        config = T5Config() if fmt.kind == "t5" else GPT2Config()
        vocabulary = vocabularies["t5" if fmt.kind == "t5" else "gpt2"]
        expected = [model_for(config).probe_example(vocabulary, row, fmt.variant)
                    for row in rows]
        got = _examples(name)
        assert len(got) == len(expected) == len(rows) > 0, name
        for example, want in zip(got, expected, strict=True):
            targets, weights = example["targets"].tolist(), example["targets_weights"].tolist()
            if fmt.kind == "t5":
                assert example["inputs"].tolist() == list(want.inputs)
                assert (targets, weights) == (list(want.targets), [int(w) for w in want.weights])
            else:  # one row: the prompt (context only) then the targets
                prompt = example["inputs"].tolist() if "inputs" in example else []
                assert prompt + targets == list(want.tokens)
                assert [0] * len(prompt) + weights == [int(w) for w in want.weights]


def test_spec_and_features_by_hand(vocabularies):
    t5, gpt2 = vocabularies["t5"], vocabularies["gpt2"]
    spec = probe_spec(ROW, "cloze", sentinel=True)
    assert spec == ProbeSpec("Trurmouth is led by <extra_id_0> .", "<extra_id_0> Groris Funley",
                             ((12, 26),))
    features = probe_features(spec, t5, "t5", prompt=True)
    target = list(t5.encode("<extra_id_0> Groris Funley"))
    assert features == {"inputs": [*t5.encode(spec.source), t5.eos_id],
                        "targets": [*target, t5.eos_id],
                        "targets_weights": [0] + [1] * (len(target) - 1) + [0]}
    # GPT-2 text: ROW has no CSV text, so "subject relation object"; EOS in front as BOS.
    spec = probe_spec(ROW, "text", sentinel=False)
    assert spec == ProbeSpec("", "Trurmouth head of government Groris Funley", None)
    text = list(gpt2.encode(spec.target))
    assert probe_features(spec, gpt2, "causal", prompt=False) == {
        "targets": [gpt2.eos_id, *text], "targets_weights": [0] + [1] * len(text)}
    spec = probe_spec(ROW, "object", sentinel=False)
    assert spec.spans == ((len("Trurmouth head of government"), len(spec.target)),)
    obj = list(gpt2.encode(" Groris Funley"))
    assert probe_features(spec, gpt2, "causal", prompt=True) == {
        "inputs": [gpt2.eos_id, *gpt2.encode("Trurmouth head of government")],
        "targets": obj, "targets_weights": [1] * len(obj)}
    with pytest.raises(ValueError, match="unknown variant 'masked'"):
        probe_spec(ROW, "masked", sentinel=False)


def test_cut_to_lengths_keeps_t5_eos_and_the_weights_aligned(twiki):
    full = _examples("twiki_probes_0910_new_ssm")[0]
    short = _examples("twiki_probes_0910_new_ssm", {"inputs": 4, "targets": 3})[0]
    assert short["inputs"].tolist() == [*full["inputs"][:3], full["inputs"][-1]]
    assert short["targets"].tolist() == [*full["targets"][:2], full["targets"][-1]]
    assert short["targets_weights"].tolist() == [0, 1, 0]
    text = _examples("twiki_probes_0910_new")[0]
    cut = _examples("twiki_probes_0910_new", {"targets": 3})[0]
    assert cut["targets"].tolist() == text["targets"][:3].tolist()
    assert cut["targets_weights"].tolist() == [0, 1, 1]
