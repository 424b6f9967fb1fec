"""Parity with the reference implementation: Hugging Face ``DPRQuestionEncoder`` /
``DPRContextEncoder`` / ``BertModel`` (PyTorch) and their WordPiece tokenizer.

Skipped where torch is absent (install the ``parity`` extra). Tiny random encoders are written by
``save_pretrained(safe_serialization=True)`` into folders made here, with a ``vocab.txt`` made
here; LayerNorms are randomised too (Hugging Face starts them at 1/0), so every tensor's place is
checked. Our pooled embeddings equal Hugging Face's ``pooler_output`` within 1e-4 (with padding,
with segment ids, ``projection_dim`` 0 and 6), our tokenizer's ids equal Hugging Face's
``DPRContextEncoderTokenizerFast``'s, and the dense retriever over the imported folders ranks
passages exactly as Hugging Face's embeddings do.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tw_jax.retrieval.base import Passage  # noqa: E402
from tw_jax.retrieval.bert import BertEncoder  # noqa: E402
from tw_jax.retrieval.bert_io import (  # noqa: E402
    WordPieceTokenizer,
    load_bert_encoder,
    save_bert_encoder,
)
from tw_jax.retrieval.dense import DenseRetriever  # noqa: E402

WORDS = ["the", "a", "of", "in", "is", "was", "who", "what", "which", "when", "where", "city",
         "capital", "river", "country", "king", "queen", "paris", "france", "berlin", "germany",
         "london", "england", "rome", "italy", "seine", "thames", "tiber", "born", "died",
         "president", "minister", "##s", "##ed", "##ing", ".", ",", "?"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS] + [f"[unused{i}]" for i in range(20)]
SHAPES = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=48, max_position_embeddings=48, initializer_range=0.2,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
CLASSES = {"question": "DPRQuestionEncoder", "ctx": "DPRContextEncoder", "bert": "BertModel"}


def _build(role: str, folder, projection_dim: int = 0, seed: int = 0):
    torch.manual_seed(seed)
    if role == "bert":
        hf = transformers.BertModel(transformers.BertConfig(**SHAPES), add_pooling_layer=True)
    else:
        config = transformers.DPRConfig(projection_dim=projection_dim, **SHAPES)
        hf = getattr(transformers, CLASSES[role])(config)
    hf = hf.eval()
    with torch.no_grad():
        for name, param in hf.named_parameters():
            if "LayerNorm" in name:
                weight = name.endswith("weight")
                param.copy_(torch.randn_like(param) * (1.0 if weight else 0.5) + float(weight))
    hf.save_pretrained(folder, safe_serialization=True)
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB), encoding="utf-8")
    return hf


def _hf_pooled(hf, ids, mask=None, types=None) -> np.ndarray:
    kwargs = {"attention_mask": None if mask is None else torch.tensor(mask),
              "token_type_ids": None if types is None else torch.tensor(types)}
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(ids), **kwargs)
    if isinstance(hf, transformers.BertModel):
        return out.last_hidden_state[:, 0].numpy()
    return out.pooler_output.numpy()


def _ours(config, params, ids, mask=None, types=None) -> np.ndarray:
    return np.asarray(BertEncoder(config).apply({"params": params}, ids, mask, types))


@pytest.mark.parametrize(("role", "projection_dim"),
                         [("question", 0), ("ctx", 0), ("question", 6), ("ctx", 6), ("bert", 0)])
def test_pooled_embeddings_match_hugging_face(tmp_path, role, projection_dim):
    hf = _build(role, tmp_path, projection_dim, seed=projection_dim)
    config, params, found = load_bert_encoder(tmp_path)
    assert found == role and config.projection_dim == projection_dim
    assert config.embedding_dim == (projection_dim or 32)
    rs = np.random.RandomState(1)
    ids = rs.randint(5, len(VOCAB), (3, 20))
    ids[:, 0] = 2
    diff = np.abs(_ours(config, params, ids) - _hf_pooled(hf, ids)).max()
    mask = np.ones_like(ids)
    mask[1, 12:] = 0
    mask[2, 5:] = 0
    ids = ids * mask  # pads are [PAD] (0), as our batches have them
    types = np.zeros_like(ids)
    types[:, 8:] = 1
    padded = np.abs(_ours(config, params, ids, mask, types) - _hf_pooled(hf, ids, mask, types))
    print(f"DPR {role} projection_dim={projection_dim}: max |ours - Hugging Face| "
          f"{diff:.3g}, padded {padded.max():.3g}")
    assert diff <= 1e-4 and padded.max() <= 1e-4, (diff, padded.max())


def test_exported_folder_loads_in_hugging_face_with_the_same_outputs(tmp_path):
    hf = _build("ctx", tmp_path / "original", projection_dim=6)
    config, params, _ = load_bert_encoder(tmp_path / "original")
    save_bert_encoder(tmp_path / "exported", config, params, "ctx",
                      WordPieceTokenizer.from_folder(tmp_path / "original"))
    again = transformers.DPRContextEncoder.from_pretrained(tmp_path / "exported").eval()
    ids = np.random.RandomState(2).randint(5, len(VOCAB), (2, 11))
    np.testing.assert_array_equal(_hf_pooled(again, ids), _hf_pooled(hf, ids))


def test_tokenizer_ids_equal_hugging_faces(tmp_path):
    _build("ctx", tmp_path)
    theirs = transformers.DPRContextEncoderTokenizerFast.from_pretrained(tmp_path)
    ours = WordPieceTokenizer.from_folder(tmp_path, max_length=12)
    titles = ["Paris", "", "The Seine River", "Rome"]
    texts = ["Paris is the capital of France, born in London.", "Who was the king?",
             "The Seine is a river in Paris and France, which was ...",
             "Rome was the capital city of Italy where kings died."]
    encoded = ours.encode(texts, titles)
    for title, text, ids, types in zip(titles, texts, encoded.ids, encoded.type_ids, strict=True):
        args = (title, text) if title else (text,)
        expected = theirs(*args, truncation=True, max_length=12)
        assert ids == expected["input_ids"], (title, text)
        assert types == expected["token_type_ids"], (title, text)
    assert ours.encode(texts[1:2]).ids == [theirs(texts[1])["input_ids"]]


PASSAGES = [
    Passage("0", "Paris", "Paris is the capital of France."),
    Passage("1", "Berlin", "Berlin is the capital city of Germany."),
    Passage("2", "Seine", "The Seine is a river in France; it runs through Paris."),
    Passage("3", "London", "London is the capital of England, on the river Thames."),
    Passage("4", "Rome", "Rome is the capital of Italy, on the Tiber."),
    Passage("5", "", "The king of England was born in London and died in Rome."),
    Passage("6", "Italy", "Italy is a country. Its president was born in Rome."),
    Passage("7", "France", "France is a country; its president and minister are in Paris."),
]
QUESTIONS = ["What is the capital of France?", "Which river runs through Paris?",
             "Where was the king of England born?", "Who is the president of Italy?"]


def test_retriever_over_imported_folders_ranks_as_hugging_face(tmp_path):
    question = _build("question", tmp_path / "q", seed=10)
    ctx = _build("ctx", tmp_path / "c", seed=11)
    retriever = DenseRetriever(question_encoder=str(tmp_path / "q"),
                               ctx_encoder=str(tmp_path / "c"), max_length=24, batch_size=3)
    retriever.build(PASSAGES)
    found = retriever.search(QUESTIONS, k=len(PASSAGES))

    tokenizer = transformers.DPRContextEncoderTokenizerFast.from_pretrained(tmp_path / "c")

    def hf_embed(model, args) -> np.ndarray:
        batch = tokenizer(*args, truncation=True, max_length=24, padding=True,
                          return_tensors="pt")
        with torch.no_grad():  # no token_type_ids: zeros, as DPR's reference code feeds
            return model(input_ids=batch["input_ids"],
                         attention_mask=batch["attention_mask"]).pooler_output.numpy()

    untitled = [p for p in PASSAGES if not p.title]
    titled = [p for p in PASSAGES if p.title]
    p_vectors = np.zeros((len(PASSAGES), 32), np.float32)
    p_vectors[[PASSAGES.index(p) for p in titled]] = hf_embed(
        ctx, ([p.title for p in titled], [p.text for p in titled]))
    p_vectors[[PASSAGES.index(p) for p in untitled]] = hf_embed(ctx, ([p.text for p in untitled],))
    np.testing.assert_allclose(retriever.embeddings, p_vectors, atol=1e-4)
    scores = hf_embed(question, (QUESTIONS,)) @ p_vectors.T
    for row, hits in zip(scores, found, strict=True):
        expected = np.argsort(-row, kind="stable")
        assert [i for i, _ in hits] == expected.tolist()
        np.testing.assert_allclose([s for _, s in hits], row[expected], rtol=1e-4, atol=1e-3)
    gaps = np.diff(np.sort(scores, axis=1), axis=1).min()
    print(f"DPR retriever: smallest score gap between passages {gaps:.3g}")
