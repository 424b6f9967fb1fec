"""Training throughput of the PyTorch reference: the same run as ``bench_train.py``, with
Hugging Face ``transformers`` on PyTorch, eager or ``torch.compile`` (``--compile``).

    python tools/bench_train_reference.py --model gpt2_large --method diff --batch 16 --seq 512 \\
        --steps 20 [--compile]

What is the same as ``bench_train.py``: the gin files (model sizes, variant, freeze policy,
optimizer and its options, clipping, compute dtype, rematerialisation, dropout), the batch and
feature lengths, the synthetic batches, the loss (token cross-entropy of float32 logits, mean over
the loss tokens), the FLOP count, MFU and the JSON fields. Run it on the same machine right after
``bench_train.py`` so that the two are measured side by side.

The model is ``GPT2LMHeadModel`` / ``T5ForConditionalGeneration`` / ``LlamaForCausalLM`` built
from our config's ``to_hf_config()`` (random weights; nothing is downloaded), attention as
transformers picks it (``attn_implementation``, SDPA by default). Methods, as tw_jax defines them:

- diff / recadam: every parameter trains (RecAdam: Adam with ``lr·λ(t)`` plus the decoupled pull
  ``lr·(1 − λ(t))·γ·(θ − θ*)`` on the parameters before the step, as ``tw_jax.train.recadam``;
  Adam moments and the anchor copy, three copies of the parameters);
- lora: LoRA's ``scale·(x A) B`` on the projections the LoRA config targets: GPT-2's fused
  ``c_attn`` gets low-rank deltas on its query and value slices, T5's ``q``/``v`` in every
  self- and cross-attention, Llama's ``q_proj``/``v_proj`` (the value's output is the key/value
  heads'); ``A ~ N(0, init_stddev)``, ``B = 0``;
- kadapter: full transformer layers of the base model's kind (``GPT2Block``; T5 encoder
  ``T5Block`` with the encoder's relative position bias) fed from the hidden states after the
  tapped layers (forward hooks), chained, added as ``base + 0.1·LayerNorm(adapter)`` (GPT-2 after
  ``ln_f``, T5 to the encoder output);
- modular (T5): a T5-small-size ``T5EncoderModel`` with its own embedding, ``+ 0.05·Linear(·)``
  on the encoder output;

frozen as ``param_labels`` freezes (``freeze`` policy: GPT-2 base frozen for LoRA / K-Adapter, T5
encoder frozen but the shared embedding trains). The trainable and total parameter counts must
equal ``count_params`` of our config, or the script stops: it never measures something else
under the method's name. A LoRA target or option combination it cannot reproduce stops it too.

Optimizers: ``torch.optim.AdamW`` (fused on CUDA) for ``adamw``; transformers' ``Adafactor``
(``relative_step=False``, ``scale_parameter`` as our ``multiply_by_parameter_scale``, decay
-0.8, update clipping 1.0, no momentum) for ``adafactor`` (it factors every 2-D weight; ours
factors matrices whose two largest dims are >= 128); the RecAdam above; ``torch.optim.SGD``.
The learning rate is the gin's base LR held constant (the schedule's shape costs nothing).
``bfloat16`` compute (``runs/gpu.gin``) is ``torch.autocast`` over float32 parameters, as our
``dtype``/``param_dtype`` split; ``remat`` is transformers' gradient checkpointing (and
``torch.utils.checkpoint`` around adapter blocks).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_common  # noqa: E402
from bench_common import BenchError  # noqa: E402

# Our projection names -> (module attribute, slice of GPT-2's fused c_attn or None).
GPT2_LORA_TARGETS: dict[str, tuple[str, int | None]] = {
    "query": ("attn.c_attn", 0), "key": ("attn.c_attn", 1), "value": ("attn.c_attn", 2),
    "out": ("attn.c_proj", None), "c_fc": ("mlp.c_fc", None), "c_proj": ("mlp.c_proj", None),
}
T5_LORA_TARGETS: dict[str, str] = {
    "query": "q", "key": "k", "value": "v", "out": "o", "wi": "wi", "wo": "wo", "wi_0": "wi_0",
    "wi_1": "wi_1",
}
# Our decoder's projection names (tw_jax/models/decoder.py) -> transformers' Llama modules.
LLAMA_LORA_TARGETS: dict[str, str] = {
    "query": "self_attn.q_proj", "key": "self_attn.k_proj", "value": "self_attn.v_proj",
    "out": "self_attn.o_proj", "gate": "mlp.gate_proj", "up": "mlp.up_proj",
    "down": "mlp.down_proj",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    bench_common.add_run_arguments(parser)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the forward and loss (stack 'pytorch-compile')")
    parser.add_argument("--compile-mode", default=None,
                        help="torch.compile mode (default, reduce-overhead, max-autotune)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--peak-flops", type=float, default=None,
                        help="peak FLOP/s per device for MFU (default: the device table)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    return args


def _modules() -> tuple[Any, Any, Any]:
    import torch
    import transformers

    return torch, torch.nn, transformers


def _lora_module(base: Any, in_features: int, out_features: int, slices: list[int] | None,
                 rank: int, scale: float, stddev: float) -> Any:
    """``base`` (Linear or Conv1D) plus LoRA: on the whole output, or on some equal slices of it
    (GPT-2's fused ``c_attn``: 0 query, 1 key, 2 value)."""
    torch, nn, _ = _modules()

    class LoRA(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = base
            self.parts = 3 if slices is not None else 1
            self.targets = list(slices) if slices is not None else [0]
            width = out_features // self.parts
            self.lora_a = nn.ParameterList(
                [nn.Parameter(torch.randn(in_features, rank) * stddev) for _ in self.targets]
            )
            self.lora_b = nn.ParameterList(
                [nn.Parameter(torch.zeros(rank, width)) for _ in self.targets]
            )

        def forward(self, x: Any) -> Any:
            y = self.base(x)
            deltas = [scale * ((x @ a.to(x.dtype)) @ b.to(x.dtype))
                      for a, b in zip(self.lora_a, self.lora_b, strict=True)]
            if self.parts == 1:
                return y + deltas[0].to(y.dtype)
            pieces = list(y.chunk(self.parts, dim=-1))
            for index, delta in zip(self.targets, deltas, strict=True):
                pieces[index] = pieces[index] + delta.to(y.dtype)
            return torch.cat(pieces, dim=-1)

    return LoRA()


def _get(module: Any, dotted: str) -> Any:
    for name in dotted.split("."):
        module = getattr(module, name)
    return module


def _set(module: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for name in parents:
        module = getattr(module, name)
    setattr(module, last, value)


def _add_llama_lora(hf: Any, lora: Any) -> None:
    """LoRA on the Linear layers of every decoder layer that our targets name."""
    unknown = [t for t in lora.targets if t not in LLAMA_LORA_TARGETS]
    if unknown:
        raise BenchError(f"reference LoRA: Llama targets {unknown} are not reproduced")
    for layer in hf.model.layers:
        for target in lora.targets:
            path = LLAMA_LORA_TARGETS[target]
            base = _get(layer, path)
            _set(layer, path, _lora_module(base, base.in_features, base.out_features, None,
                                           lora.rank, lora.scale, lora.init_stddev))


def _add_lora(hf: Any, config: Any) -> None:
    """Wrap the projections our LoRA config targets, in place."""
    lora = config.lora
    if config.model_type == "llama":
        _add_llama_lora(hf, lora)
        return
    if config.model_type == "gpt2":
        unknown = [t for t in lora.targets if t not in GPT2_LORA_TARGETS]
        if unknown:
            raise BenchError(f"reference LoRA: GPT-2 targets {unknown} are not reproduced")
        d = config.n_embd
        for block in hf.transformer.h:
            fused = sorted(GPT2_LORA_TARGETS[t][1] for t in lora.targets
                           if GPT2_LORA_TARGETS[t][0] == "attn.c_attn")
            if fused:
                _set(block, "attn.c_attn", _lora_module(
                    block.attn.c_attn, d, 3 * d, fused, lora.rank, lora.scale, lora.init_stddev))
            for target in lora.targets:
                path, piece = GPT2_LORA_TARGETS[target]
                if piece is None:
                    base = _get(block, path)
                    weight = base.weight  # Conv1D: (in, out)
                    _set(block, path, _lora_module(
                        base, weight.shape[0], weight.shape[1], None, lora.rank, lora.scale,
                        lora.init_stddev))
        return
    from transformers.models.t5 import modeling_t5

    unknown = [t for t in lora.targets if t not in T5_LORA_TARGETS]
    if unknown:
        raise BenchError(f"reference LoRA: T5 targets {unknown} are not reproduced")
    owners = [m for stack in (hf.encoder, hf.decoder) for m in stack.modules()
              if isinstance(m, modeling_t5.T5Attention | modeling_t5.T5DenseActDense
                            | modeling_t5.T5DenseGatedActDense)]
    for owner in owners:
        for target in lora.targets:
            name = T5_LORA_TARGETS[target]
            base = getattr(owner, name, None)
            if base is None:
                continue
            setattr(owner, name, _lora_module(
                base, base.in_features, base.out_features, None, lora.rank, lora.scale,
                lora.init_stddev))


class _Taps:
    """Forward hooks that keep the outputs of the tapped layers (and what adapters need)."""

    def __init__(self) -> None:
        self.outputs: dict[int, Any] = {}
        self.call: tuple[tuple, dict] = ((), {})
        self.first_output: Any = None

    def tap(self, index: int) -> Any:
        def hook(_module: Any, _args: Any, output: Any) -> None:
            self.outputs[index] = output[0] if isinstance(output, tuple) else output

        return hook

    def pre(self, _module: Any, args: tuple, kwargs: dict) -> None:
        self.call = (args, kwargs)

    def first(self, _module: Any, _args: Any, output: Any) -> None:
        self.first_output = output


def _llama_reference(config: Any) -> Any:
    """``LlamaForCausalLM`` from our config's ``config.json`` (grouped-query attention, llama3
    RoPE scaling, tied head as the config says): the module that returns its logits."""
    _, nn, transformers = _modules()
    if config.model_type != "llama":
        raise BenchError(f"reference: model_type {config.model_type!r} is not reproduced "
                         "(Llama only of the decoder family)")
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config.to_hf_config()))

    class LlamaReference(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hf = hf

        def forward(self, batch: dict[str, Any]) -> Any:
            hidden = self.hf.model(
                input_ids=batch["decoder_input_tokens"], attention_mask=batch["decoder_mask"],
                use_cache=False,
            ).last_hidden_state
            return self.hf.lm_head(hidden)

    return LlamaReference()


def build_reference(setup: bench_common.BenchSetup) -> Any:
    """The reference ``nn.Module``: ``forward(batch) -> float32 logits``."""
    torch, nn, transformers = _modules()
    config = setup.config
    variants = [v for v in ("lora", "kadapter", "modular") if getattr(config, v, None) is not None]
    if len(variants) > 1:
        raise BenchError(f"reference: variants {variants} together are not reproduced")
    if hasattr(config, "num_key_value_heads"):  # the open LLMs' decoders: Llama's is reproduced
        return _finish(_llama_reference(config), config)
    remat = bool(config.remat)
    checkpoint = torch.utils.checkpoint.checkpoint

    def maybe_remat(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if remat and torch.is_grad_enabled():
            return checkpoint(fn, *args, use_reentrant=False, **kwargs)
        return fn(*args, **kwargs)

    if config.model_type == "gpt2":
        hf_config = transformers.GPT2Config(**config.to_hf_config())
        hf = transformers.GPT2LMHeadModel(hf_config)

        class GPT2Reference(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.hf = hf
                self.taps = _Taps()
                self.tap_layers: tuple[int, ...] = ()
                if config.kadapter is not None:
                    self.tap_layers = config.kadapter.tap_layers(config.n_layer)
                    self.kadapter = nn.ModuleDict({
                        "adapters": nn.ModuleList([
                            transformers.models.gpt2.modeling_gpt2.GPT2Block(
                                hf_config, layer_idx=config.n_layer + i)
                            for i in range(len(self.tap_layers))
                        ]),
                        "output_norm": nn.LayerNorm(
                            config.n_embd, eps=config.kadapter.norm_epsilon),
                    })
                    for i, layer in enumerate(self.tap_layers):
                        hf.transformer.h[layer].register_forward_hook(self.taps.tap(i))
                    hf.transformer.h[0].register_forward_pre_hook(self.taps.pre, with_kwargs=True)

            def forward(self, batch: dict[str, Any]) -> Any:
                hidden = self.hf.transformer(
                    input_ids=batch["decoder_input_tokens"], attention_mask=batch["decoder_mask"],
                    use_cache=False,
                ).last_hidden_state
                if config.kadapter is not None:
                    args, kwargs = self.taps.call
                    h = None
                    for i, block in enumerate(self.kadapter["adapters"]):
                        tapped = self.taps.outputs[i]
                        h = tapped if h is None else tapped + h
                        h = maybe_remat(block, h, *args[1:], **kwargs)
                        h = h[0] if isinstance(h, tuple) else h
                    norm = self.kadapter["output_norm"](h)
                    hidden = hidden + config.kadapter.output_scale * norm.to(hidden.dtype)
                return self.hf.lm_head(hidden)

        model = GPT2Reference()
    else:
        from transformers.models.t5 import modeling_t5

        hf_config = transformers.T5Config(**config.to_hf_config())
        hf = transformers.T5ForConditionalGeneration(hf_config)

        class T5Reference(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.hf = hf
                self.taps = _Taps()
                if config.kadapter is not None:
                    self.tap_layers = config.kadapter.tap_layers(config.num_layers)
                    encoder_config = hf.encoder.config
                    self.kadapter = nn.ModuleDict({
                        "adapters": nn.ModuleList([
                            modeling_t5.T5Block(encoder_config, has_relative_attention_bias=False,
                                                layer_idx=config.num_layers + i)
                            for i in range(len(self.tap_layers))
                        ]),
                        "output_norm": nn.LayerNorm(
                            config.d_model, eps=config.kadapter.norm_epsilon),
                    })
                    for i, layer in enumerate(self.tap_layers):
                        hf.encoder.block[layer].register_forward_hook(self.taps.tap(i))
                    first = hf.encoder.block[0]
                    first.register_forward_pre_hook(self.taps.pre, with_kwargs=True)
                    first.register_forward_hook(self.taps.first)
                if config.modular is not None:
                    small = config.modular_encoder_config
                    self.modular = nn.ModuleDict({
                        "encoder": transformers.T5EncoderModel(
                            transformers.T5Config(**small.to_hf_config())),
                        "projection": nn.Linear(small.d_model, config.d_model, bias=True),
                    })

            def forward(self, batch: dict[str, Any]) -> Any:
                mask = batch["encoder_mask"]
                encoded = self.hf.encoder(
                    input_ids=batch["encoder_input_tokens"], attention_mask=mask,
                ).last_hidden_state
                if config.kadapter is not None:
                    args, kwargs = self.taps.call
                    attention_mask = args[1] if len(args) > 1 else kwargs.get("attention_mask")
                    position_bias = self.taps.first_output[1]
                    h = None
                    for i, block in enumerate(self.kadapter["adapters"]):
                        tapped = self.taps.outputs[i]
                        h = tapped if h is None else tapped + h
                        h = maybe_remat(block, h, attention_mask, position_bias)[0]
                    norm = self.kadapter["output_norm"](h)
                    encoded = encoded + config.kadapter.output_scale * norm.to(encoded.dtype)
                if config.modular is not None:
                    small = self.modular["encoder"](
                        input_ids=batch["encoder_input_tokens"], attention_mask=mask,
                    ).last_hidden_state
                    projected = self.modular["projection"](small)
                    encoded = encoded + config.modular.output_scale * projected.to(encoded.dtype)
                decoded = self.hf.decoder(
                    input_ids=batch["decoder_input_tokens"], attention_mask=batch["decoder_mask"],
                    encoder_hidden_states=encoded, encoder_attention_mask=mask, use_cache=False,
                ).last_hidden_state
                if config.scale_decoder_outputs:
                    decoded = decoded * (config.d_model**-0.5)
                return self.hf.lm_head(decoded)

        model = T5Reference()
    return _finish(model, config)


def _finish(model: Any, config: Any) -> Any:
    """LoRA, gradient checkpointing (our ``remat``) and freezing, the same for every family."""
    if config.lora is not None:
        _add_lora(model.hf, config)
    if config.remat:
        model.hf.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    _freeze(model, config)
    return model


def _freeze(model: Any, config: Any) -> None:
    """``requires_grad`` as ``param_labels``: new modules train; the base by the freeze policy."""
    from tw_jax.models.variants import freeze_policy

    policy = freeze_policy(config)
    shared = getattr(model.hf, "shared", None)
    shared_weight = shared.weight if shared is not None else None
    for name, param in model.named_parameters():
        new = name.startswith(("kadapter.", "modular.")) or ".lora_" in name
        if new or policy == "none":
            trains = True
        elif policy == "base":
            trains = False
        else:  # "encoder": the encoder stack; the shared embedding feeds the decoder too
            trains = not name.startswith("hf.encoder.") or param is shared_weight
        param.requires_grad_(trains)
    if policy == "encoder" and shared_weight is not None:
        shared_weight.requires_grad_(True)


def parameter_counts(model: Any) -> tuple[int, int]:
    """``(trainable, total)``, each tensor once (tied weights are one parameter)."""
    trainable = total = 0
    for param in model.parameters():
        total += param.numel()
        trainable += param.numel() if param.requires_grad else 0
    return trainable, total


class RecAdam:
    """RecAdam in PyTorch, the update of ``tw_jax.train.recadam``: Adam's step at ``lr·λ(t)``
    plus ``lr·(1 − λ(t))·γ·(θ_{t−1} − θ*)`` (and decoupled weight decay), θ* the start."""

    def __init__(self, params: list[Any], *, lr: float, betas: tuple[float, float], eps: float,
                 gamma: float, k: float, t0: float, anneal: str, total_steps: int | None,
                 weight_decay: float, fused: bool) -> None:
        import torch

        self.params = params
        self.lr, self.gamma, self.k, self.t0 = lr, gamma, k, t0
        self.anneal, self.total_steps, self.weight_decay = anneal, total_steps, weight_decay
        self.anchor = [p.detach().clone() for p in params]
        self.adam = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps,
                                     fused=True if fused else None)
        self.count = 0

    def lam(self, step: int) -> float:
        t = step / self.total_steps if self.total_steps else float(step)
        if self.anneal == "sigmoid":
            return 1.0 / (1.0 + math.exp(-self.k * (t - self.t0)))
        if self.anneal == "linear":
            return min(1.0, t / self.t0)
        return 1.0

    def step(self) -> None:
        import torch

        self.count += 1
        lam = self.lam(self.count)
        with torch.no_grad():
            pull = torch._foreach_sub(self.params, self.anchor)
            decay = torch._foreach_mul(self.params, self.weight_decay) if self.weight_decay else None
            for group in self.adam.param_groups:
                group["lr"] = self.lr * lam
            self.adam.step()
            torch._foreach_add_(self.params, pull, alpha=-self.lr * (1.0 - lam) * self.gamma)
            if decay is not None:
                torch._foreach_add_(self.params, decay, alpha=-self.lr)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.adam.zero_grad(set_to_none=set_to_none)


def make_optimizer(setup: bench_common.BenchSetup, params: list[Any], cuda: bool) -> Any:
    """The torch optimizer matching the gin's optimizer config (``OPTIMIZER``)."""
    import torch

    options = setup.optimizer
    name = options.name
    lr = setup.base_lr
    wd = float(getattr(options, "weight_decay", 0.0) or 0.0)
    betas = (float(getattr(options, "b1", 0.9)), float(getattr(options, "b2", 0.999)))
    eps = float(getattr(options, "eps", 1e-8))
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd,
                                 fused=True if cuda else None)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(
            params, lr=lr, eps=(1e-30, 1e-3),
            clip_threshold=float(options.clipping_threshold or 1.0),
            decay_rate=-float(options.decay_rate),
            beta1=options.momentum, weight_decay=wd,
            scale_parameter=bool(options.multiply_by_parameter_scale),
            relative_step=False, warmup_init=False,
        )
    if name == "recadam":
        return RecAdam(
            params, lr=lr, betas=betas, eps=eps,
            gamma=float(options.gamma), k=float(options.k), t0=float(options.t0),
            anneal=str(options.anneal), total_steps=options.total_steps, weight_decay=wd,
            fused=cuda,
        )
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    raise BenchError(f"reference: optimizer {name!r} is not reproduced")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the reference benchmark; prints and returns the JSON record."""
    args = parse_args(argv)
    torch, _, transformers = _modules()
    import torch.nn.functional as F  # noqa: N812

    from tw_jax.models import count_params
    from tw_jax.train.flops import peak_flops_per_device

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda and not torch.cuda.is_available():
        raise BenchError("--device cuda: torch sees no CUDA device")
    device = torch.device("cuda" if cuda else "cpu")
    cpus = bench_common.limit_threads(args.threads, jax_flags=False)
    if args.threads:
        torch.set_num_threads(args.threads)
    setup = bench_common.load_setup(args, "gpu" if cuda else "cpu")
    config = setup.config
    torch.manual_seed(setup.seed)
    model = build_reference(setup).to(device)
    model.train()
    trainable, total = parameter_counts(model)
    ours = count_params(config)
    if (trainable, total) != (ours.trainable, ours.total):
        raise BenchError(
            f"reference {setup.model_name}/{setup.method} has {trainable:,} trainable / "
            f"{total:,} total parameters, tw_jax {ours.trainable:,} / {ours.total:,}: not the "
            "same model, not measured"
        )
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(setup, params, cuda)
    clip = setup.optimizer.clip_norm
    vocab = config.vocab_size

    def loss_of(batch: dict[str, Any]) -> Any:
        logits = model(batch)
        return F.cross_entropy(logits.float().reshape(-1, vocab),
                               batch["decoder_target_tokens"].reshape(-1))

    step_loss = torch.compile(loss_of, mode=args.compile_mode) if args.compile else loss_of
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if config.dtype == "bfloat16" else contextlib.nullcontext()
    )
    batches = [
        {k: torch.from_numpy(v).to(device=device, dtype=torch.long) for k, v in b.items()}
        for b in bench_common.synthetic_batches(setup, seed=setup.seed)
    ]
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)

    times: list[float] = []
    cpu_seconds = 0.0
    first_step_s = 0.0
    loss_value = float("nan")
    k = setup.accumulate_steps
    for index in range(args.warmup + args.steps):
        batch = batches[index % len(batches)]
        cpu_started = bench_common.process_cpu_seconds()
        started = time.perf_counter()
        with autocast:
            loss = step_loss(batch)
        loss.backward()
        if (index + 1) % k == 0:
            if clip:
                torch.nn.utils.clip_grad_norm_(params, float(clip), foreach=True)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        loss_value = float(loss.detach())
        if cuda:
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - started
        cpu_used = bench_common.process_cpu_seconds() - cpu_started
        if index == 0:
            first_step_s = elapsed
        if index >= args.warmup:
            times.append(elapsed)
            cpu_seconds += cpu_used

    if cuda:
        kind = torch.cuda.get_device_name(device)
        peak_bytes, source = int(torch.cuda.max_memory_allocated(device)), "torch_cuda_max_allocated"
    else:
        kind = "cpu"
        peak_bytes, source = bench_common.process_max_rss_bytes(), "process_max_rss"
    peak = args.peak_flops or peak_flops_per_device(kind)
    stack = "pytorch-compile" if args.compile else "pytorch-eager"
    record = bench_common.train_record(
        stack=stack, setup=setup, steps=args.steps, warmup=args.warmup, times=times,
        cpu_seconds=cpu_seconds, first_step_s=first_step_s, final_loss=loss_value,
        params_total=total, params_trainable=trainable, device="gpu" if cuda else "cpu", device_kind=kind,
        num_devices=1, peak_flops_per_device=peak, peak_memory_bytes=peak_bytes,
        peak_memory_source=source,
        extra={
            # torch.compile compiles during the first step: its time, compilation included.
            "compile_s": first_step_s if args.compile else None,
            "xla_flops_per_step": None,
            "compile_mode": args.compile_mode if args.compile else None,
            "attn_implementation": getattr(model.hf.config, "_attn_implementation", None),
            "threads": args.threads,
            "cpu_affinity": cpus,
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
    )
    bench_common.emit(record, args.jsonl)
    return record


if __name__ == "__main__":
    # Our config code imports jax: keep it off the accelerator that PyTorch is measured on.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.exit(bench_common.run_main(main))
