"""The continual-learning variants as data, and which parameters each one trains.

A variant is a small frozen dataclass on the model config (``GPT2Config.lora``, ``T5Config.kadapter``
...), so the same model object carries it into training, scoring and decoding alike: there is no
separate "generation" path that could bypass an adapter, as the reference code's ``generate()`` did.

- LoRA (Hu et al. 2021) lives inside :class:`~tw_jax.models.layers.DenseGeneral`: parameters
  ``lora_a``/``lora_b`` beside the projection's ``kernel``, the update scaled by rank / alpha
  (0.25) as the reference code does, or Hu et al.'s alpha / rank (:data:`LORA_SCALINGS`).
- K-Adapter (Wang et al. 2021, as CKL and TemporalWiki use it) is a submodule named ``kadapter``:
  ``num_adapters`` full transformer layers of the base model's kind and size, fed from the hidden
  states after the ``taps`` layers, chained, and added as ``base + 0.1 * LayerNorm(adapter)``
  (GPT-2 Large: taps 1st and 11th block, +39,357,440 parameters; see :class:`KAdapterConfig` for
  how TemporalWiki's "+103M" arises).
- Modular (CKL) is a submodule named ``modular`` of T5: a second, smaller encoder with its own
  embedding whose output is projected to the main width and added with weight 0.05.

Freezing is a labelling of parameter paths (:func:`param_labels`) that the trainer turns into an
optax partition. New parameters (the names in :data:`NEW_PARAMETER_NAMES`) always train; of the base
model, the ``freeze`` policy decides: ``"none"`` (everything trains: vanilla, RecAdam, Mix-Review),
``"encoder"`` (CKL's choice for T5 expansion methods: the encoder stack is frozen, the decoder trains;
the shared token embedding also feeds the decoder and the tied LM head, so it trains with them) or
``"base"`` (TemporalWiki's GPT-2: every base parameter frozen).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import numpy as np

TRAINABLE, FROZEN = "trainable", "frozen"
FREEZE_POLICIES = ("none", "encoder", "base")
# The config fields a method sets to switch its variant on (lora.gin: T5Config.lora = ...).
VARIANT_FIELDS = ("lora", "kadapter", "modular")
# Module or parameter names that only variants create: never part of a pretrained checkpoint.
NEW_PARAMETER_NAMES = frozenset({"lora_a", "lora_b", "kadapter", "modular"})


# How LoRA's update is scaled, by name. TemporalWiki, Section 5.2: "We use hyperparameters
# identical to the optimal setting of the original implementation" (Hu et al. 2021, Section 4.1:
# "We then scale ΔWx by α/r"), but the TemporalWiki and CKL reference code computes
# ``scale_factor = self.adapter_dim / self.adapter_alpha``, i.e. rank / alpha = 4 / 16 = 0.25:
# 16 times less than Hu et al.'s 16 / 4 = 4. The reference code is what produced the papers'
# numbers, so it is the default; Hu et al.'s scale is the named alternative.
LORA_SCALINGS: dict[str, Callable[[int, float], float]] = {
    "rank_over_alpha": lambda rank, alpha: rank / alpha,  # the reference code (default)
    "alpha_over_rank": lambda rank, alpha: alpha / rank,  # Hu et al. 2021
}


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
    """LoRA on the projections named in ``targets`` (``query``, ``key``, ``value``, ``out`` of every
    attention, T5's cross-attention included; or MLP names such as ``wi``/``wo``, ``c_fc``/``c_proj``).

    The update ``x A B`` is multiplied by :attr:`scale`, which ``scaling`` names (see
    :data:`LORA_SCALINGS`): ``"rank_over_alpha"`` (default: 4 / 16 = 0.25, as the TemporalWiki and
    CKL reference code computes it) or ``"alpha_over_rank"`` (Hu et al.'s alpha / rank = 4).
    """

    rank: int = 4
    alpha: float = 16.0
    targets: tuple[str, ...] = ("query", "value")
    scaling: str = "rank_over_alpha"
    init_stddev: float = 0.02  # A ~ N(0, init_stddev); B starts at zero (the reference code).

    def __post_init__(self) -> None:
        if self.rank < 1:
            raise ValueError(f"LoRA rank must be >= 1, got {self.rank}")
        if self.alpha <= 0:
            raise ValueError(f"LoRA alpha must be > 0, got {self.alpha}")
        if self.scaling not in LORA_SCALINGS:
            raise ValueError(f"LoRA scaling {self.scaling!r} is not one of {sorted(LORA_SCALINGS)}")
        object.__setattr__(self, "targets", tuple(self.targets))

    @property
    def scale(self) -> float:
        return LORA_SCALINGS[self.scaling](self.rank, self.alpha)

    def applies_to(self, projection: str) -> bool:
        return projection in self.targets


@dataclasses.dataclass(frozen=True)
class KAdapterConfig:
    """``num_adapters`` adapters reading the hidden states after layers ``taps`` (0-based).

    Default taps: the 2nd and the last layer for two adapters (EvolvingQA, Section 3.1: "We use k=2
    where the adapters are inserted after the second and the last layers"); for more, spread
    evenly from the 2nd to the last. Adapter ``i`` reads ``h[taps[i]] + out[i-1]``.

    TemporalWiki's GPT-2 Large taps ``(0, 10)`` (``gin/models/gpt2_large.gin``): the reference
    code reads Hugging Face's ``hidden_states[1]`` and ``hidden_states[11]``, where index 0 is the
    embedding output and index ``k`` the output of the ``k``-th block, i.e. after the 1st and the
    11th block. Two GPT-2 Large blocks and the output LayerNorm are 2 x 19,677,440 + 2,560 =
    39,357,440 new parameters. TemporalWiki, Section 5.2, reports "an increase of 103M
    parameters": 39,357,440 plus the 64,335,360 of the LM head (50,262 x 1,280 after the
    reference adds five special tokens), which the reference code selects by name together with
    the adapters (``'kadapter' in name or 'lm_head' in name``). GPT-2's LM head is its token
    embedding (tied), a pretrained parameter rather than a new one, so 103,692,800 counts it a
    second time. (PyTorch lists the tied matrix once, as ``transformer.wte.weight``, so that
    name filter never unfreezes it: the reference trains the adapters alone, as
    ``freeze="base"`` does here.) ``tests/models/test_variants.py`` checks the arithmetic on
    GPT-2 Large's real shapes.
    """

    num_adapters: int = 2
    taps: tuple[int, ...] | None = None
    output_scale: float = 0.1
    norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        if self.num_adapters < 1:
            raise ValueError(f"K-Adapter needs at least one adapter, got {self.num_adapters}")
        if self.taps is not None:
            object.__setattr__(self, "taps", tuple(int(t) for t in self.taps))
            if len(self.taps) != self.num_adapters:
                raise ValueError(
                    f"K-Adapter taps {self.taps} name {len(self.taps)} layers for "
                    f"{self.num_adapters} adapters"
                )

    def tap_layers(self, num_layers: int) -> tuple[int, ...]:
        """The 0-based layers whose outputs feed the adapters, for a stack of ``num_layers``."""
        if self.taps is not None:
            taps = tuple(t % num_layers if t < 0 else t for t in self.taps)
        elif self.num_adapters == 1:
            taps = (num_layers - 1,)
        else:
            first, last = min(1, num_layers - 1), num_layers - 1
            step = (last - first) / (self.num_adapters - 1)
            taps = tuple(first + round(i * step) for i in range(self.num_adapters))
        if any(not 0 <= t < num_layers for t in taps) or list(taps) != sorted(set(taps)):
            raise ValueError(
                f"K-Adapter taps {taps} must be distinct increasing layers of 0..{num_layers - 1}"
            )
        return taps


@dataclasses.dataclass(frozen=True)
class ModularConfig:
    """CKL's Modular: a second encoder of these (T5-small) dimensions, projected and added."""

    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_heads: int = 8
    output_scale: float = 0.05


def freeze_policy(config: Any) -> str:
    """The config's ``freeze`` policy, or the method's default when it is None."""
    policy = config.freeze
    if policy is None:
        variants = (getattr(config, name, None) for name in VARIANT_FIELDS)
        if not any(v is not None for v in variants):
            policy = "none"
        elif config.model_type == "t5":
            policy = "encoder"
        else:
            policy = "base"
    if policy not in FREEZE_POLICIES:
        raise ValueError(f"freeze={policy!r} is not one of {FREEZE_POLICIES}")
    if policy == "encoder" and config.model_type != "t5":
        raise ValueError(f"freeze='encoder' needs an encoder-decoder model, not {config.model_type}")
    return policy


def path_names(path: Sequence[Any]) -> tuple[str, ...]:
    """Plain names of a ``jax.tree_util`` key path (dict keys and attribute names)."""
    names = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                names.append(str(getattr(entry, attr)))
                break
        else:
            names.append(str(entry))
    return tuple(names)


def is_new_parameter(names: Sequence[str]) -> bool:
    return any(name in NEW_PARAMETER_NAMES for name in names)


def trainable_predicate(config: Any) -> Callable[[tuple[str, ...]], bool]:
    """``path names -> trains?`` for this config's variants and freeze policy."""
    policy = freeze_policy(config)

    def trains(names: tuple[str, ...]) -> bool:
        if is_new_parameter(names):
            return True
        if policy == "base":
            return False
        if policy == "encoder":
            return "encoder" not in names
        return True

    return trains


def _is_box(x: Any) -> bool:
    return isinstance(x, nn.meta.AxisMetadata)


def param_labels(config: Any, params: Any) -> Any:
    """The tree of ``"trainable"`` / ``"frozen"`` labels for ``params`` (boxed or unboxed).

    A leading ``params`` collection name in the path is ignored, so both ``variables`` and
    ``variables["params"]`` work.
    """
    trains = trainable_predicate(config)
    return jax.tree_util.tree_map_with_path(
        lambda path, _: TRAINABLE if trains(path_names(path)) else FROZEN, params, is_leaf=_is_box
    )


@dataclasses.dataclass(frozen=True)
class ParamCount:
    trainable: int
    total: int

    def __str__(self) -> str:
        return f"{self.trainable:,} trainable / {self.total:,} total"


def count_params(config: Any, params: Any) -> ParamCount:
    """Trainable and total parameters of ``params`` (arrays or shapes) under ``config``'s method.

    A tied LM head is one tensor and counts once.
    """
    params = nn.unbox(params)
    labels = param_labels(config, params)
    sizes = jax.tree.map(lambda leaf: int(math.prod(leaf.shape)), params)
    pairs = zip(jax.tree.leaves(sizes), jax.tree.leaves(labels), strict=True)
    trainable = total = 0
    for size, label in pairs:
        total += size
        trainable += size if label == TRAINABLE else 0
    return ParamCount(trainable, total)


def fill_missing(fresh: Any, loaded: Any) -> tuple[Any, list[str]]:
    """``fresh`` with every tensor that ``loaded`` has replaced by the loaded one.

    Returns the merged tree and the paths taken from ``fresh`` (the new LoRA / adapter / Modular
    weights a pretrained checkpoint cannot have), for the log. A loaded tensor with no place in
    ``fresh``, or of another shape, is an error: it means the config does not fit the checkpoint.
    """
    missing: list[str] = []

    def merge(path: tuple[str, ...], new: Any, old: Any) -> Any:
        if not isinstance(new, dict):
            if old is None:
                missing.append("/".join(path))
                return new
            if tuple(np.shape(old)) != tuple(np.shape(new)):
                raise ValueError(
                    f"checkpoint tensor {'/'.join(path)} has shape {np.shape(old)}, "
                    f"the model expects {np.shape(new)}"
                )
            return old
        old = {} if old is None else old
        unexpected = sorted(set(old) - set(new))
        if unexpected:
            where = "/".join(path) or "the top level"
            raise ValueError(f"checkpoint has tensors the model lacks under {where}: {unexpected}")
        return {key: merge((*path, key), value, old.get(key)) for key, value in new.items()}

    merged = merge((), nn.unbox(fresh), loaded)
    return merged, missing


def merge_lora(params: Any, config: Any) -> Any:
    """The base parameter tree with each LoRA update folded into its kernel (for export).

    ``kernel + scale * A @ B`` over the kernel's input and output axes; ``lora_a``/``lora_b`` are
    dropped. Other variants cannot be folded into the base architecture.
    """
    lora = getattr(config, "lora", None)

    def fold(tree: Any) -> Any:
        if not isinstance(tree, dict):
            return tree
        tree = {key: fold(value) for key, value in tree.items()}
        if "lora_a" in tree:
            if lora is None:
                raise ValueError("parameters hold LoRA weights but the config has no LoRA")
            a, b = np.asarray(tree.pop("lora_a")), np.asarray(tree.pop("lora_b"))
            kernel = np.asarray(tree["kernel"])
            delta = np.tensordot(a, b, axes=([a.ndim - 1], [0])) * lora.scale
            tree["kernel"] = (kernel + delta.astype(np.float64)).astype(kernel.dtype)
        return tree

    return fold(nn.unbox(params))


def export_params(params: Any, config: Any) -> Any:
    """The base-architecture parameters to export to Hugging Face format.

    LoRA folds into the kernels (the exported model computes the same function); K-Adapter and
    Modular have no place in a Hugging Face T5 or GPT-2, so exporting them is refused rather than
    silently dropping what the model learned.
    """
    extra = [name for name in ("kadapter", "modular") if getattr(config, name, None) is not None]
    if extra:
        raise ValueError(
            f"a model with {' and '.join(extra)} cannot be exported as a Hugging Face checkpoint; "
            "keep its orbax checkpoint instead"
        )
    return merge_lora(params, config)
