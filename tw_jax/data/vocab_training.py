"""Tiny T5 and GPT-2 vocabularies trained on local text, so tests and the demo download nothing.

The files follow the released models' conventions, so code that loads them also loads the real
ones:

- T5: a SentencePiece unigram model with pad=0, eos=1, unk=2 and no BOS (seqio adds the
  ``<extra_id_N>`` sentinels when it loads the model).
- GPT-2: byte-level BPE laid out like OpenAI's files: ids 0-255 are the 256 byte characters in
  GPT-2's order (so id 0 is ``!``), then one id per merge in merge order, then ``<|endoftext|>``
  last. It is written both as ``tokenizer.json`` (Hugging Face ``tokenizers``) and as
  ``vocab.json`` + ``merges.txt`` (OpenAI / ``GPT2Tokenizer``).

Training is deterministic: the same texts give byte-identical files (SentencePiece runs on one
thread, because its unigram EM gives slightly different pieces with different thread counts, and
the model proto records no output path).

This module needs only ``sentencepiece`` and ``tokenizers`` (not TensorFlow), so the demo can
import it cheaply.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence

from tw_jax.io.atomic import atomic_open
from tw_jax.io.paths import Path, as_path

EOS_TOKEN = "<|endoftext|>"
T5_MODEL_FILE = "spiece.model"
TOKENIZER_FILE = "tokenizer.json"
VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
MERGES_HEADER = "#version: 0.2"

# The demo's sizes: 1000 pieces before seqio's 100 sentinels; 256 bytes + 1000 merges + EOS.
DEMO_T5_PIECES = 1000
DEMO_GPT2_MERGES = 1000


def gpt2_byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, in GPT-2's vocabulary order.

    Byte-level BPE works on characters, so each byte is given a visible stand-in: printable
    Latin-1 bytes stand for themselves, the rest (controls, space, ...) map to U+0100 onwards
    (space becomes ``Ġ``). The dict's order is the order of ids 0-255 in GPT-2's ``vocab.json``.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


def build_byte_level_bpe_tokenizer(
    vocab: Mapping[str, int],
    merges: Sequence[tuple[str, str]],
    eos_token: str = EOS_TOKEN,
):
    """A ``tokenizers.Tokenizer`` configured exactly like GPT-2's ``tokenizer.json``.

    GPT-2's pre-tokenizer regex, no prefix space (so decoding gives back the input exactly), the
    byte-level decoder, and ``eos_token`` as the one special token (it must be in ``vocab``).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    if eos_token not in vocab:
        raise ValueError(f"the vocabulary has no {eos_token!r} token")
    tokenizer = Tokenizer(models.BPE(vocab=dict(vocab), merges=[tuple(m) for m in merges]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(
        add_prefix_space=False, trim_offsets=True, use_regex=True
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(eos_token, special=True, normalized=False)])
    return tokenizer


def _texts(texts: Iterable[str]) -> Iterable[str]:
    if isinstance(texts, str | bytes):
        raise TypeError("texts must be an iterable of strings, not a single string")
    return texts


def _lines(texts: Iterable[str], max_bytes: int) -> Iterator[str]:
    """Non-empty lines, long ones cut at spaces so SentencePiece does not silently drop them."""
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            if len(line.encode("utf-8")) <= max_bytes:
                yield line
                continue
            chunk: list[str] = []
            size = 0
            for word in line.split(" "):
                # A word longer than the limit is cut into pieces that fit (4 bytes per char max).
                pieces = [word[i : i + max_bytes // 4] for i in range(0, len(word), max_bytes // 4)]
                for piece in pieces or [""]:
                    piece_size = len(piece.encode("utf-8")) + 1
                    if chunk and size + piece_size > max_bytes:
                        yield " ".join(chunk)
                        chunk, size = [], 0
                    chunk.append(piece)
                    size += piece_size
            if chunk and any(chunk):
                yield " ".join(chunk)


def train_sentencepiece(
    texts: Iterable[str],
    model_prefix: str | os.PathLike[str],
    vocab_size: int = DEMO_T5_PIECES,
    *,
    character_coverage: float = 1.0,
    max_sentence_bytes: int = 16384,
    hard_vocab_limit: bool = True,
) -> Path:
    """Trains a T5-style SentencePiece unigram model and writes ``{model_prefix}.model``.

    ``vocab_size`` counts the pieces before seqio's extra ids (T5's released model has 32000).
    Each line of each text is one training sentence. Returns the path of the model file.
    """
    import sentencepiece as spm

    if max_sentence_bytes < 64:
        raise ValueError(f"max_sentence_bytes must be at least 64: {max_sentence_bytes}")
    sentences = list(_lines(_texts(texts), max_sentence_bytes))
    if not sentences:
        raise ValueError("train_sentencepiece: no text to train on")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            model_type="unigram",
            vocab_size=vocab_size,
            pad_id=0,
            eos_id=1,
            unk_id=2,
            bos_id=-1,
            character_coverage=character_coverage,
            max_sentence_length=max_sentence_bytes,
            input_sentence_size=0,
            hard_vocab_limit=hard_vocab_limit,
            num_threads=1,
            minloglevel=2,
        )
    except RuntimeError as error:
        raise ValueError(f"SentencePiece training for {model_prefix}: {error}") from error
    path = as_path(f"{os.fspath(model_prefix)}.model")
    with atomic_open(path, "wb") as handle:
        handle.write(model.getvalue())
    return path


def _trained_merges(tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in merges]


def train_byte_level_bpe(
    texts: Iterable[str],
    out_dir: str | os.PathLike[str],
    vocab_size: int = 256 + DEMO_GPT2_MERGES + 1,
    *,
    min_frequency: int = 2,
    eos_token: str = EOS_TOKEN,
) -> Path:
    """Trains GPT-2-style byte-level BPE; writes tokenizer.json, vocab.json and merges.txt.

    ``vocab_size`` counts everything, as GPT-2's 50257 does: 256 bytes + merges + ``eos_token``.
    Training stops earlier when no pair occurs ``min_frequency`` times. Returns ``out_dir``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 257:
        raise ValueError(f"vocab_size must leave room for 256 bytes and {eos_token}: {vocab_size}")
    byte_chars = list(gpt2_byte_to_unicode().values())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[eos_token],
        initial_alphabet=byte_chars,
        show_progress=False,
    )
    trained = Tokenizer(models.BPE())
    trained.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trained.decoder = decoders.ByteLevel()
    trained.train_from_iterator(_texts(texts), trainer)

    # Renumber in GPT-2's layout: bytes, then one id per merge, then EOS last.
    merges = _trained_merges(trained)
    vocab = {char: index for index, char in enumerate(byte_chars)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab[eos_token] = len(vocab)
    if set(vocab) != set(trained.get_vocab(with_added_tokens=True)):
        raise AssertionError("renumbered byte-level vocabulary differs from the trained one")

    out = as_path(out_dir)
    tokenizer = build_byte_level_bpe_tokenizer(vocab, merges, eos_token)
    with atomic_open(out / VOCAB_FILE, "w", encoding="utf-8") as handle:
        json.dump(vocab, handle, ensure_ascii=False)
    with atomic_open(out / MERGES_FILE, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(MERGES_HEADER + "\n")
        handle.writelines(f"{left} {right}\n" for left, right in merges)
    with atomic_open(out / TOKENIZER_FILE, "w", encoding="utf-8") as handle:
        handle.write(tokenizer.to_str(pretty=True))
    return out


def write_demo_vocabularies(
    texts: Iterable[str], out_dir: str | os.PathLike[str]
) -> dict[str, Path]:
    """Trains the demo's tiny vocabularies: ``{"t5": .../t5/spiece.model, "gpt2": .../gpt2}``.

    ``texts`` is read once (both trainers see the same list). On a corpus too small for the
    sizes both vocabularies come out smaller instead of failing.
    """
    texts = list(_texts(texts))
    out = as_path(out_dir)
    (out / "t5").mkdir(parents=True, exist_ok=True)
    t5 = train_sentencepiece(
        texts, out / "t5" / os.path.splitext(T5_MODEL_FILE)[0], DEMO_T5_PIECES, hard_vocab_limit=False
    )
    gpt2 = train_byte_level_bpe(texts, out / "gpt2", 256 + DEMO_GPT2_MERGES + 1)
    return {"t5": t5, "gpt2": gpt2}
