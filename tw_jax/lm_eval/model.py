"""A tw_jax model as an lm-evaluation-harness ``LM`` (``--model tw_jax``).

    lm_eval --model tw_jax --model_args pretrained=HF_FOLDER ...          (tw-jax lm-eval ...)
    lm_eval --model tw_jax --model_args model_dir=MODEL_DIR[,step=N][,vocab=DIR] ...

``pretrained`` is a Hugging Face folder read by :func:`tw_jax.models.load_pretrained`'s loader
(its tokenizer from the same folder); ``model_dir`` a tw_jax run (its ``config.gin`` builds the
model, or ``gin_file=A.gin;B.gin``; the latest step, or ``step``), its tokenizer from
``MODEL_DIR/tokenizer/`` for a model with a tokenizer of its own, else ``vocab`` (default: the
run's ``tw_jax.tasks.register_all.gpt2_vocab``). Other arguments: ``batch_size`` (rows per
compiled batch, default 32) and ``max_length`` (default: the model's).

Requests are scored as ``tw-jax eval`` scores a probe (:mod:`tw_jax.tasks.probes`): a row is
the vocabulary's BOS (EOS standing for it where there is none, lm-eval's ``prefix_token_id``)
then the context and continuation, and the continuation's tokens are those overlapping its
characters (``model.span_example``); lm-eval's habit of moving a context's trailing spaces into
the continuation is kept. ``loglikelihood_rolling`` uses lm-eval's own disjoint windows of
``max_length`` tokens after that prefix. ``generate_until`` decodes greedily from the model's
prompt (``model.prompt_ids``: BOS first where the tokenizer has one, as Hugging Face's
tokenizers start a prompt) and cuts at the first ``until`` string. Sampling is not supported.
Decoder-only models only: an encoder-decoder (T5, BART) is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from lm_eval import utils as lm_utils
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from tw_jax.data.tokens import prefix_id
from tw_jax.errors import UsageError
from tw_jax.evaluate.run_config import run_config_path
from tw_jax.evaluate.runs import LoadedRun, ModelSource, load_params, source_config
from tw_jax.evaluate.seqio_eval import prompt_length, until_eos
from tw_jax.io import paths
from tw_jax.lm_eval.scores import score_with_greedy
from tw_jax.models import hf_folder_config
from tw_jax.models.base import DecoderOnlyModel
from tw_jax.models.sharding import activate
from tw_jax.models.token_scores import CausalExample
from tw_jax.runtime import checkpoints
from tw_jax.runtime.run_model import build_run_model

NAME = "tw_jax"
DEFAULT_MAX_LENGTH = 2048
DEFAULT_MAX_GEN_TOKS = 256


def _run_vocabulary(model: Any, model_dir: str, vocab: str | None) -> Any:
    """The vocabulary of a tw_jax run (see the module docstring)."""
    if vocab is None and getattr(model.config, "tokenizer", None):
        from tw_jax.runtime.model_tokenizer import tokenizer_folder

        vocab = tokenizer_folder(model_dir)
    if vocab is None:
        import gin

        with contextlib.suppress(ValueError):
            vocab = gin.query_parameter("tw_jax.tasks.register_all.gpt2_vocab")
    if vocab is None:
        raise ValueError(f"{model_dir}: no vocabulary found for the run: pass vocab=DIR "
                         "(--model_args model_dir=...,vocab=DATA/vocab/gpt2)")
    return model.load_vocabulary(str(vocab))


def load_for_lm_eval(*, pretrained: str | None = None, model_dir: str | None = None,
                     gin_file: str | None = None, step: int | None = None,
                     vocab: str | None = None) -> tuple[LoadedRun, Any]:
    """``(loaded run, vocabulary)`` of a Hugging Face folder or a tw_jax run."""
    if (pretrained is None) == (model_dir is None):
        raise ValueError("pass one of pretrained=HF_FOLDER or model_dir=MODEL_DIR")
    if pretrained is not None:
        source = ModelSource(hf_dir=pretrained)
    else:
        files = gin_file.split(";") if gin_file else [run_config_path(model_dir)]
        if not gin_file and not paths.exists(files[0]):
            raise UsageError(f"{model_dir}: not a tw_jax run folder ({files[0]} not found): "
                             "pass model_dir=MODEL_DIR of a trained run, its gin files "
                             "(gin_file=A.gin;B.gin) or pretrained=HF_FOLDER")
        source = ModelSource(model_dir=model_dir, gin_files=files, step=step)
    if pretrained is not None:  # the folder's tokenizer names the model's (task) vocabulary
        config, mesh = hf_folder_config(pretrained), None
    else:
        config, mesh = source_config(source)
    run = build_run_model(config, tuple(mesh or (-1, 1, 1)))
    try:
        with activate(run.mesh):
            params, found = load_params(run, source.hf_dir or source.model_dir, step=step)
    except checkpoints.CheckpointError as error:
        # no step, a step of another model: one line (tw-jax lm-eval exits 2), no traceback
        raise UsageError(str(error)) from error
    loaded = LoadedRun(run, params, found)
    if pretrained is not None and checkpoints.is_hf_folder(pretrained):
        vocabulary = loaded.model.load_vocabulary(pretrained)
    else:
        vocabulary = _run_vocabulary(loaded.model, str(model_dir), vocab)
    return loaded, vocabulary


def _batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@register_model(NAME)
class TwJaxLM(LM):
    """lm-eval's three request types on a tw_jax decoder-only model (module docstring)."""

    def __init__(self, pretrained: str | None = None, model_dir: str | None = None,
                 gin_file: str | None = None, step: int | str | None = None,
                 vocab: str | None = None, batch_size: int | str | None = 32,
                 max_length: int | str | None = None, **ignored: Any) -> None:
        super().__init__()
        del ignored  # lm-eval's device, max_batch_size…: the mesh decides where it runs
        self.loaded, self.vocabulary = load_for_lm_eval(
            pretrained=pretrained, model_dir=model_dir, gin_file=gin_file,
            step=int(step) if step not in (None, "") else None, vocab=vocab)
        self.model = self.loaded.model
        if not isinstance(self.model, DecoderOnlyModel):
            raise ValueError(f"--model {NAME} scores decoder-only models; "
                             f"{type(self.model).__name__} is an encoder-decoder")
        self.batch_size = int(batch_size) if str(batch_size or "").isdigit() else 32
        self.max_length = int(max_length or self.model.max_length or DEFAULT_MAX_LENGTH)
        self.prefix = int(prefix_id(self.vocabulary))

    @classmethod
    def create_from_arg_string(cls, arg_string: str,
                               additional_config: dict[str, Any] | None = None) -> TwJaxLM:
        """``--model_args`` over lm-eval's own settings (``--batch_size``, ``--device``): a
        ``batch_size`` in both is the model argument's."""
        return cls.create_from_arg_obj(lm_utils.simple_parse_args_string(arg_string),
                                       additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict[str, Any],
                            additional_config: dict[str, Any] | None = None) -> TwJaxLM:
        extra = {k: v for k, v in (additional_config or {}).items()
                 if v is not None and k not in arg_dict}
        return cls(**arg_dict, **extra)

    # --- scoring ------------------------------------------------------------------------

    def _score(self, examples: Sequence[CausalExample]) -> Any:
        with activate(self.loaded.run.mesh):
            return score_with_greedy(self.model.module, self.loaded.params, examples,
                                     batch_size=self.batch_size, max_length=self.max_length)

    def continuation_example(self, context: str, continuation: str) -> CausalExample:
        """BOS + context + continuation, the continuation's tokens scored; cut on the left to
        :attr:`max_length` tokens."""
        spaces = len(context) - len(context.rstrip())
        if spaces and context.strip():
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        example = self.model.span_example(self.vocabulary, context, continuation)
        return self.model.truncate_left(example, self.max_length)[0]

    def loglikelihood(self, requests: Sequence[Any], disable_tqdm: bool = False
                      ) -> list[tuple[float, bool]]:
        examples = [self.continuation_example(*r.args) for r in requests]
        scores = self._score(examples)
        out = []
        for request, ll, greedy in zip(requests, scores.log_likelihood, scores.greedy,
                                       strict=True):
            result = (float(ll), bool(greedy))
            self.cache_hook.add_partial("loglikelihood", request.args, result)
            out.append(result)
        return out

    def rolling_examples(self, text: str) -> list[CausalExample]:
        """lm-eval's disjoint windows of ``text`` after the prefix token, each scoring its new
        tokens."""
        ids = [int(t) for t in self.vocabulary.encode(text)]
        windows = map(lm_utils.make_disjoint_window, lm_utils.get_rolling_token_windows(
            token_list=ids, prefix_token=self.prefix, max_seq_len=self.max_length,
            context_len=1))
        return [CausalExample((*context, *predicted), (0.0,) * len(context)
                              + (1.0,) * len(predicted)) for context, predicted in windows]

    def loglikelihood_rolling(self, requests: Sequence[Any], disable_tqdm: bool = False
                              ) -> list[float]:
        owners, examples = [], []
        for i, request in enumerate(requests):
            windows = self.rolling_examples(request.args[0])
            owners += [i] * len(windows)
            examples += windows
        totals = np.zeros(len(requests), np.float64)
        if examples:
            np.add.at(totals, owners, self._score(examples).log_likelihood)
        for request, total in zip(requests, totals, strict=True):
            self.cache_hook.add_partial("loglikelihood_rolling", request.args, float(total))
        return [float(t) for t in totals]

    # --- generation ---------------------------------------------------------------------

    def generate_until(self, requests: Sequence[Any], disable_tqdm: bool = False) -> list[str]:
        out: list[str | None] = [None] * len(requests)
        groups: dict[tuple[tuple[str, ...], int], list[int]] = {}
        for i, request in enumerate(requests):
            kwargs = dict(request.args[1]) if len(request.args) > 1 else {}
            if kwargs.get("do_sample") or float(kwargs.get("temperature", 0.0) or 0.0) > 0:
                raise ValueError(f"--model {NAME} decodes greedily; sampling is not supported")
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            tokens = int(kwargs.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS))
            groups.setdefault((tuple(until), tokens), []).append(i)
        for (until, new_tokens), members in groups.items():
            for chunk in _batched(members, self.batch_size):
                texts = self._decode([requests[i].args[0] for i in chunk], new_tokens)
                for i, text in zip(chunk, texts, strict=True):
                    for stop in until:
                        if stop:
                            text = text.split(stop, 1)[0]
                    self.cache_hook.add_partial("generate_until", requests[i].args, text)
                    out[i] = text
        return [text or "" for text in out]

    def _decode(self, contexts: Sequence[str], new_tokens: int) -> list[str]:
        budget = max(self.max_length - new_tokens, 1)
        prompts = [self.model.prompt_ids(self.vocabulary, c)[-budget:] for c in contexts]
        ids, mask = self.model.prompt_rows(prompts, self.batch_size,
                                           prompt_length(max(len(p) for p in prompts)))
        eos = self.vocabulary.eos_id
        with activate(self.loaded.run.mesh):
            rows = np.asarray(self.model.decode(self.loaded.params, ids, mask,
                                                max_new_tokens=new_tokens, eos_id=eos, pad_id=0))
        return [self.vocabulary.decode(until_eos(rows[i], eos)) for i in range(len(contexts))]
