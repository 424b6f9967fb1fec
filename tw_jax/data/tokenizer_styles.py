"""Tiny tokenizers shaped like today's open LLMs', trained on a text sample: for tests, the demo
and the sample world, where no real model folder may be downloaded.

Each style writes the files a Hugging Face model folder has (``tokenizer.json``,
``tokenizer_config.json``) with the parts that decide ids and framing as the family ships them:

- ``llama3``: byte-level BPE behind Llama 3's split regex, ``<|begin_of_text|>`` put in front of
  every text by the post-processor, ``<|end_of_text|>`` the EOS;
- ``qwen2`` (Qwen 2, 2.5 and 3 share it): NFC normalisation, byte-level BPE behind Qwen's split
  regex, no BOS, ``<|endoftext|>`` the EOS;
- ``gemma3``: SentencePiece-style BPE (spaces as ``▁``, byte fallback for characters it lacks),
  ``<pad>``/``<eos>``/``<bos>``/``<unk>`` as ids 0-3, ``add_bos_token`` true.

The vocabulary learned is tiny; the rules are what :class:`tw_jax.data.hf_tokenizer.
ModelTokenizerVocabulary` and ``transformers.AutoTokenizer`` read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from tw_jax.io import paths

# The split patterns of Llama 3's and Qwen 2's tokenizer.json (tiktoken's cl100k-style regex).
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

STYLES = ("llama3", "qwen2", "gemma3")
_SPECIALS = {
    "llama3": ("<|begin_of_text|>", "<|end_of_text|>"),
    "qwen2": ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    "gemma3": ("<pad>", "<eos>", "<bos>", "<unk>"),
}
_CONFIG = {
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
    "qwen2": {"bos_token": None, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
              "add_prefix_space": False},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
               "unk_token": "<unk>", "add_bos_token": True, "add_eos_token": False},
}


def _byte_level(style: str, texts: Iterable[str], vocab_size: int):
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tokenizer = Tokenizer(models.BPE(ignore_merges=style == "llama3"))
    if style == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    pattern = LLAMA3_SPLIT if style == "llama3" else QWEN2_SPLIT
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(_SPECIALS[style]), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    byte_level = processors.ByteLevel(trim_offsets=False)
    if style == "llama3":
        bos = _SPECIALS[style][0]
        template = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tokenizer.token_to_id(bos))])
        tokenizer.post_processor = processors.Sequence([byte_level, template])
    else:
        tokenizer.post_processor = byte_level
    return tokenizer


def _sentencepiece_like(texts: Iterable[str], vocab_size: int):
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    specials = list(_SPECIALS["gemma3"])
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.normalizer = normalizers.Replace(" ", "▁")
    draft.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    draft.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False))
    learned = json.loads(draft.to_str())["model"]
    # Gemma's ids: the four specials, then the 256 byte pieces of byte fallback, then the rest.
    vocab = {token: index for index, token in enumerate(specials)}
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = len(vocab)
    for token, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
              for m in learned["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>",
                                     byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse()])
    tokenizer.add_special_tokens(specials)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", vocab["<bos>"])])
    return tokenizer


def write_tokenizer(folder: str | os.PathLike[str], style: str, texts: Iterable[str], *,
                    vocab_size: int = 600) -> str:
    """Train a ``style`` tokenizer (:data:`STYLES`) on ``texts`` and write its model-folder files
    into ``folder``; returns the folder."""
    if style not in STYLES:
        raise ValueError(f"unknown tokenizer style {style!r}; expected one of {STYLES}")
    folder = os.fspath(folder)
    texts = list(texts)
    tokenizer = (_sentencepiece_like(texts, vocab_size) if style == "gemma3"
                 else _byte_level(style, texts, vocab_size))
    paths.makedirs(folder)
    paths.write_text(paths.join(folder, "tokenizer.json"), tokenizer.to_str())
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 131072,
              "clean_up_tokenization_spaces": False, **_CONFIG[style]}
    paths.write_text(paths.join(folder, "tokenizer_config.json"), json.dumps(config, indent=2))
    return folder
