"""Parity with the reference implementation: Hugging Face ``BartForConditionalGeneration`` (PyTorch).

Skipped where torch is absent (install the ``parity`` extra). Two tiny random BARTs written by
``save_pretrained`` into folders made here: BART's own recipe (GELU, unscaled embeddings) and one
with scaled embeddings, ReLU, and encoder and decoder of different depths, widths and heads. The
layer norms and ``final_logits_bias`` are randomised too (Hugging Face starts them at 1/0), so
every tensor's place is checked. Logits agree to 1e-4 in float32, teacher-forced scores equal
Hugging Face's loss, greedy decodes equal ``generate(num_beams=1)`` token for token, and export
writes Hugging Face's own file.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file  # noqa: E402

from tw_jax.models import BART, decoding, forward_logits, load_pretrained, model_for  # noqa: E402
from tw_jax.models.bart_io import load_bart, save_bart  # noqa: E402
from tw_jax.models.token_scores import Seq2SeqExample  # noqa: E402

VOCAB = 99
KINDS = {
    "bart": dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64),
    "scaled": dict(d_model=32, encoder_layers=1, decoder_layers=3, encoder_attention_heads=2,
                   decoder_attention_heads=8, encoder_ffn_dim=48, decoder_ffn_dim=80,
                   scale_embedding=True, activation_function="relu"),
}


def _build(kind: str, folder, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.BartConfig(vocab_size=VOCAB, max_position_embeddings=40, init_std=0.2,
                                     dropout=0.0, **KINDS[kind])
    hf = transformers.BartForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "layer_norm" in name or "layernorm" in name:
                weight = name.endswith("weight")
                param.copy_(torch.randn_like(param) * (1.0 if weight else 0.5) + float(weight))
        if kind == "scaled":  # a bias in every test of one reference; the other keeps zeros
            hf.final_logits_bias.copy_(torch.randn_like(hf.final_logits_bias))
    hf.save_pretrained(folder, safe_serialization=True)
    return hf


@pytest.fixture(scope="module", params=list(KINDS))
def reference(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(f"hf_bart_{request.param}")
    hf = _build(request.param, folder)
    model, params = load_pretrained(folder)
    assert isinstance(model, BART)
    assert model.config.scale_embedding == (request.param == "scaled")
    return hf, folder, model, params


def _hf_logits(hf, ids, dec, mask=None, dec_mask=None) -> np.ndarray:
    kwargs = {}
    if mask is not None:
        kwargs["attention_mask"] = torch.tensor(mask)
    if dec_mask is not None:
        kwargs["decoder_attention_mask"] = torch.tensor(dec_mask)
    with torch.no_grad():
        return hf(input_ids=torch.tensor(ids), decoder_input_ids=torch.tensor(dec),
                  **kwargs).logits.numpy()


def test_logits_match_hugging_face(reference):
    hf, _, model, params = reference
    rs = np.random.RandomState(0)
    ids, dec = rs.randint(3, VOCAB, (3, 30)), rs.randint(0, VOCAB, (3, 25))
    diff = np.max(np.abs(forward_logits(model, params, ids, dec) - _hf_logits(hf, ids, dec)))
    print(f"BART logits max |ours - Hugging Face|: {diff:.3g}")
    assert diff <= 1e-4, diff
    mask, dec_mask = np.ones_like(ids), np.ones_like(dec)
    mask[1, 17:] = 0  # encoder padding
    dec_mask[2, 20:] = 0  # decoder padding (right): real positions never see it
    ours = np.asarray(jax.jit(model.apply)({"params": params}, ids, dec, attention_mask=mask,
                                           decoder_attention_mask=dec_mask))
    theirs = _hf_logits(hf, ids, dec, mask, dec_mask)
    real = dec_mask.astype(bool)
    padded = np.max(np.abs(ours[real] - theirs[real]))
    print(f"BART padded logits max |ours - Hugging Face|: {padded:.3g}")
    assert padded <= 1e-4, padded


def test_scores_equal_hugging_faces_loss_with_shift_tokens_right(reference):
    """Our teacher-forced score of ``<s> … </s>`` targets is Hugging Face's ``labels`` loss, whose
    decoder inputs are ``shift_tokens_right`` after ``decoder_start_token_id`` (2)."""
    hf, _, model, params = reference
    rs = np.random.RandomState(3)
    ids, labels = rs.randint(3, VOCAB, (2, 12)), rs.randint(3, VOCAB, (2, 9))
    labels[:, 0], labels[:, -1] = 0, 2
    examples = [Seq2SeqExample(tuple(i), tuple(t), (1.0,) * len(t)) for i, t in zip(ids, labels,
                                                                                 strict=True)]
    scores = model_for(model).score(params, examples, batch_size=2)
    with torch.no_grad():
        loss = hf(input_ids=torch.tensor(ids), labels=torch.tensor(labels)).loss.item()
    ours = -scores.log_likelihood.sum() / scores.num_tokens.sum()
    assert abs(ours - loss) <= 1e-5, (ours, loss)


def _hf_greedy(hf, ids, mask, new: int, eos: int | None) -> np.ndarray:
    with torch.no_grad():
        out = hf.generate(
            torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False, num_beams=1,
            max_new_tokens=new, min_new_tokens=0, eos_token_id=eos, forced_eos_token_id=None,
            pad_token_id=1,
        ).numpy()
    assert (out[:, 0] == 2).all()  # BART's decoder starts from EOS
    out = out[:, 1:]
    return np.pad(out, ((0, 0), (0, new - out.shape[1])), constant_values=1)  # HF stops early


def test_greedy_decodes_match_hugging_face_generate(reference):
    hf, _, model, params = reference
    ids = np.random.RandomState(1).randint(3, VOCAB, (3, 12))
    mask = np.ones_like(ids)
    mask[2, 8:] = 0
    ours = np.asarray(decoding.greedy_decode(model, params, ids, mask, max_new_tokens=8,
                                             eos_id=None, pad_id=1))
    assert len(np.unique(ours)) >= 3  # not one repeated token
    np.testing.assert_array_equal(ours, _hf_greedy(hf, ids, mask, 8, None))
    eos = int(ours[1, 2])  # a token row 1 emits: as EOS it ends that row early
    ours = np.asarray(decoding.greedy_decode(model, params, ids, mask, max_new_tokens=8,
                                             eos_id=eos, pad_id=1))
    first = ours[1].tolist().index(eos)
    assert first <= 2 and ours[1, first + 1:].tolist() == [1] * (7 - first)
    np.testing.assert_array_equal(ours, _hf_greedy(hf, ids, mask, 8, eos))


def test_import_export_import_is_exact_and_writes_hugging_faces_file(reference, tmp_path):
    hf, folder, model, params = reference
    save_bart(tmp_path, model.config, params)
    theirs, ours = load_file(folder / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert set(ours) == set(theirs)
    for name, array in ours.items():
        np.testing.assert_array_equal(array, theirs[name], err_msg=name)
    config, again = load_bart(tmp_path)
    assert config == model.config
    assert jax.tree.structure(again) == jax.tree.structure(params)
    for x, y in zip(jax.tree.leaves(again), jax.tree.leaves(params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    reloaded = transformers.BartForConditionalGeneration.from_pretrained(tmp_path).eval()
    ids, dec = np.arange(3, 13)[None], np.arange(2, 7)[None]
    np.testing.assert_array_equal(_hf_logits(reloaded, ids, dec), _hf_logits(hf, ids, dec))
