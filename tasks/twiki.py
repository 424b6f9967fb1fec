"""The TemporalWiki corpus tasks of a data folder (layout: :mod:`tw_jax.tasks.layout`; names:
:mod:`tw_jax.tasks.names`, ``<P>`` a period's token such as ``0809`` or ``202412_202501``).

Per period P:

- ``twiki_diffset_<P>_ssm`` (T5): ``ssm/diffset.*``, features ``inputs``/``targets`` with EOS.
- ``twiki_diffset_<P>_lm`` (GPT-2): ``diffset/diffset.*`` packed into blocks of the sequence
  length (:func:`tw_jax.tasks.preprocessors.pack_lm`); ``twiki_diffset_<P>_lm_<name>`` the same
  in a named model tokenizer (:mod:`tw_jax.tasks.vocab`), as every ``_lm`` task below.
- ``twiki_nondiff_<P>_lm`` (GPT-2): ``diffset/unchanged.*``, the articles of the new snapshot
  that did not change, for intrinsic evaluation.
- ``twiki_intrinsic_<P>_lm``: the evaluation mixture of those two (TemporalWiki's TWiki-DiffSets
  and NON-TWiki-DiffSets perplexities), each task keeping its own metrics.
- ``twiki_mixreview_<P>_{ssm,lm}``: the DiffSet mixed with the initial snapshot
  (:mod:`tw_jax.tasks.mixreview`).
- ``twiki_replay_<P>_{ssm,lm}``: the DiffSet mixed at a fixed ratio with every earlier DiffSet of
  P's chain and the initial snapshot (:mod:`tw_jax.tasks.replay`), registered when all of them
  are there in that objective.
- probe and light-tuning tasks and their evaluation mixtures ``twiki_probes_<P>[_object|_cloze|
  _ssm|_ssm_cloze]`` (:mod:`tw_jax.tasks.probes`), and the open-book probes
  ``twiki_probes_<P>_<retriever>[...]`` of ``<P>/probes_<retriever>/``.

Per snapshot S with a full snapshot (``08``, ``202412``): ``twiki_full_<S>_ssm`` and
``twiki_full_<S>_lm`` (FULL training and the initial pretraining). Corpus tasks have a ``train`` and a ``validation`` split over the
same files (TemporalWiki evaluates intrinsic perplexity on whole sets, there is no held-out
part), and a perplexity metric from scores.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import seqio

from tw_jax.io import paths
from tw_jax.tasks import metrics, names
from tw_jax.tasks.layout import Layout, shards
from tw_jax.tasks.mixreview import MixReviewMixture
from tw_jax.tasks.preprocessors import cache_point, pack_lm, text_to_targets, tokenize_only
from tw_jax.tasks.probes import register_probe_folder
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.replay import ReplayMixture, ReplaySource, chain, recorded_size
from tw_jax.tasks.sources import stage_source
from tw_jax.tasks.vocab import load_vocabularies
from tw_jax.time import Period

CORPUS_SPLITS = ("train", "validation")


def lm_features(vocabulary: seqio.Vocabulary) -> dict[str, seqio.Feature]:
    # Blocks are already exactly the sequence length, EOS between documents included.
    return {"targets": seqio.Feature(vocabulary, add_eos=False)}


def ssm_features(vocabulary: seqio.Vocabulary) -> dict[str, seqio.Feature]:
    return {k: seqio.Feature(vocabulary, add_eos=True) for k in ("inputs", "targets")}


def register_lm_task(
    registrar: Registrar, name: str, source: seqio.DataSource, vocabulary: seqio.Vocabulary
) -> seqio.Task:
    """A causal-LM corpus task over any source of ``{"text": …}`` examples."""
    return registrar.task(
        name,
        source=source,
        output_features=lm_features(vocabulary),
        preprocessors=[load_vocabularies, text_to_targets, tokenize_only, cache_point(), pack_lm],
        postprocess_fn=metrics.token_count_postprocessor,
        metric_fns=[metrics.perplexity],
    )


def register_ssm_task(
    registrar: Registrar, name: str, pattern: str, stage: str, vocabulary: seqio.Vocabulary
) -> seqio.Task:
    """A T5 task over SSM TFRecords (``inputs``/``targets`` text with sentinel markers)."""
    source = stage_source(
        {split: pattern for split in CORPUS_SPLITS}, ("inputs", "targets"), stage
    )
    return registrar.task(
        name,
        source=source,
        output_features=ssm_features(vocabulary),
        preprocessors=[
            load_vocabularies,
            tokenize_only,
            cache_point(),
            seqio.preprocessors.append_eos_after_trim,
        ],
        postprocess_fn=metrics.token_count_postprocessor,
        metric_fns=[metrics.perplexity],
    )


def text_source(pattern: str, stage: str) -> seqio.DataSource:
    return stage_source({split: pattern for split in CORPUS_SPLITS}, ("text",), stage)


def _lister(folder: str) -> Callable[[str], bool]:
    """Whether a file of ``folder`` exists, from one listing (one request in a bucket, not one
    per probe file)."""
    names = set(paths.listdir(folder))
    return lambda path: os.path.basename(path) in names


def register_layout(
    registrar: Registrar, layout: Layout, vocabularies: Mapping[str, seqio.Vocabulary],
    causal: Mapping[str, seqio.Vocabulary] | None = None,
) -> list[str]:
    """Every task and mixture the folders of ``layout`` support; returns their names.

    ``causal``: the causal-LM task sets, objective -> vocabulary (default: ``lm``, GPT-2's
    vocabulary); each gets its DiffSet, NON-DiffSet, full-snapshot, Mix-Review, replay and probe
    tasks (``twiki_diffset_<P>_lm_<name>`` …, :mod:`tw_jax.tasks.names`)."""
    t5 = vocabularies["t5"]
    causal = dict(causal or {names.LM: vocabularies["gpt2"]})
    diffset_stage = "tw-jax diffset --out DATA_DIR/<period>/diffset"
    ssm_stage = "tw-jax ssm --in DATA_DIR/<period>/diffset --out DATA_DIR/<period>/ssm"
    snapshot_stage = "tw-jax diffset (DATA_DIR/<period>/diffset/full.*) or, for the initial "
    snapshot_stage += "snapshot, the snapshot written to DATA_DIR/<snapshot>/full/"
    lm_tasks: dict[tuple[Period, str], str] = {}
    ssm_tasks: dict[Period, str] = {}
    for period, pair in layout.pairs.items():
        if layout.has(pair.diffset):
            for objective, vocabulary in causal.items():
                lm_tasks[period, objective] = names.diffset(period, objective)
                register_lm_task(
                    registrar,
                    lm_tasks[period, objective],
                    text_source(shards(pair.diffset, "diffset"), diffset_stage),
                    vocabulary,
                )
                register_lm_task(
                    registrar,
                    names.nondiff(period, objective),
                    text_source(shards(pair.diffset, "unchanged"), diffset_stage),
                    vocabulary,
                )
                registrar.eval_mixture(names.intrinsic(period, objective),
                                       [lm_tasks[period, objective],
                                        names.nondiff(period, objective)])
        if layout.has(pair.ssm):
            ssm_tasks[period] = names.diffset(period, "ssm")
            register_ssm_task(
                registrar, ssm_tasks[period], shards(pair.ssm, "diffset"), ssm_stage, t5
            )
        if layout.has(pair.probes):
            register_probe_folder(registrar, period, pair.probes, vocabularies,
                                  _lister(pair.probes), causal=causal)
        for retriever, folder in pair.context_folders().items():
            # open book: twiki_probes_<period>_<retriever>[_<category>][<format>]
            register_probe_folder(registrar, period, folder, vocabularies, _lister(folder),
                                  source=retriever, causal=causal)
    for files in layout.snapshots.values():
        for objective, vocabulary in causal.items() if files.text_pattern else ():
            register_lm_task(
                registrar,
                names.full(files.snapshot, objective),
                text_source(files.text_pattern, snapshot_stage),
                vocabulary,
            )
        if files.ssm_pattern:
            register_ssm_task(
                registrar, names.full(files.snapshot, "ssm"), files.ssm_pattern, ssm_stage, t5
            )
    for period, pair in layout.pairs.items():
        files = layout.snapshots.get(layout.initial_snapshot(pair))
        if files is None:
            continue
        for objective in causal if files.text_pattern else ():
            if (period, objective) in lm_tasks:
                registrar.mixture(
                    MixReviewMixture(
                        names.mixreview(period, objective), lm_tasks[period, objective],
                        names.full(files.snapshot, objective), preset="temporalwiki",
                    )
                )
        if period in ssm_tasks and files.ssm_pattern:
            registrar.mixture(
                MixReviewMixture(
                    names.mixreview(period, "ssm"),
                    ssm_tasks[period],
                    names.full(files.snapshot, "ssm"),
                    preset="temporalwiki",
                )
            )
    register_replay(registrar, layout, lm_tasks, ssm_tasks, causal)
    return list(registrar.names)


def _folder_of(pattern: str) -> str:
    return pattern.rsplit("/", 1)[0]


def register_replay(
    registrar: Registrar, layout: Layout, lm_tasks: Mapping[tuple[Period, str], str],
    ssm_tasks: Mapping[Period, str], causal: Mapping[str, seqio.Vocabulary],
) -> None:
    """``twiki_replay_<P>_<objective>`` for every period whose DiffSet, earlier DiffSets of its
    chain and initial full snapshot are registered in that objective (:mod:`tw_jax.tasks.replay`;
    ``tokens`` sizes from the stages' ``stats.json``)."""
    for period in layout.pairs:
        initial, earlier = chain(period, layout.pairs)
        files = layout.snapshots.get(initial)
        if files is None:
            continue
        for objective in causal if files.text_pattern else ():
            if not all((p, objective) in lm_tasks for p in (*earlier, period)):
                continue
            old = [ReplaySource(names.full(files.snapshot, objective), files.snapshot,
                                recorded_size(_folder_of(files.text_pattern), "full", "tokens"))]
            old += [ReplaySource(lm_tasks[p, objective], p,
                                 recorded_size(layout.pairs[p].diffset, "diffset", "tokens"))
                    for p in earlier]
            registrar.mixture(ReplayMixture(names.replay(period, objective),
                                            lm_tasks[period, objective], old))
        if files.ssm_pattern and all(p in ssm_tasks for p in (*earlier, period)):
            old = [ReplaySource(names.full(files.snapshot, "ssm"), files.snapshot,
                                recorded_size(_folder_of(files.ssm_pattern), "full", "examples"))]
            old += [ReplaySource(ssm_tasks[p], p,
                                 recorded_size(layout.pairs[p].ssm, "diffset", "examples"))
                    for p in earlier]
            registrar.mixture(ReplayMixture(names.replay(period, "ssm"), ssm_tasks[period], old))
