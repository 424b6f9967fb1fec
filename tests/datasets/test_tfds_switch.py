"""The TFDS switch for the CKL, ECBD and EvolvingQA tasks: with ``use_tfds(DIR)`` they read the
``ckl_lama``, ``ecbd`` and ``evolvingqa/qa`` datasets prepared from their folders, and give
exactly the examples, in the same order, that their files give."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import seqio
import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers the builders)
from tw_jax.tasks import sources
from tw_jax.tasks.ckl import register_ckl
from tw_jax.tasks.ecbd import register_ecbd
from tw_jax.tasks.evolvingqa import register_evolvingqa

VOCAB = str(Path(seqio.__file__).parent / "test_data" / "sentencepiece" / "sentencepiece.model")
LENGTHS = {"inputs": 64, "targets": 16}


def _prepare(names: list[str], manual_dir: Path, data_dir: Path) -> None:
    for name in names:
        tfds.builder(name, data_dir=str(data_dir)).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))


def _examples(names: list[str], split: str) -> dict[str, list[dict]]:
    out = {}
    for name in names:
        dataset = seqio.get_mixture_or_task(name).get_dataset(
            LENGTHS, split=split, shuffle=False, num_epochs=1)
        out[name] = [{k: getattr(v, "tolist", lambda v=v: v)() for k, v in ex.items()}
                     for ex in dataset.as_numpy_iterator()]
    return out


def _both_ways(register: Callable[[], list[str]], tfds_dir: Path, split: str
               ) -> tuple[dict, dict, list[str]]:
    """The examples of every task ``register`` registers, from the files, then through TFDS."""
    names = [n for n in register() if n in seqio.TaskRegistry.names()]
    from_files = _examples(names, split)
    sources.use_tfds(str(tfds_dir))
    try:
        assert register() == [*names, *(n for n in register() if n not in names)]
        from_tfds = _examples(names, split)
    finally:
        sources.use_tfds(None)
    return from_files, from_tfds, names


def _fails_unprepared(prepared: Path, register: Callable[[], list[str]], task: str,
                      split: str) -> None:
    """What the tasks read is the prepared split: without it, they fail naming it and the
    command that prepares it (not a quiet fall back to the files beside it)."""
    shutil.rmtree(prepared)
    name = f"{prepared.parent.name}/{prepared.name}"
    sources.use_tfds(str(prepared.parent.parent))
    try:
        with pytest.raises(FileNotFoundError,
                           match=rf"{name}:1\.\*\.\* is not prepared .*`tfds build --imports"):
            register()
            _examples([task], split)
    finally:
        sources.use_tfds(None)


def test_ckl_lama_tasks_read_the_prepared_sets(tmp_path):
    from test_ckl_tasks import write_release

    root = write_release(tmp_path / "ckl")
    out = tmp_path / "tfds"
    _prepare(["ckl_lama/invariant_lama", "ckl_lama/updated_lama", "ckl_lama/new_lama",
              "ckl_lama/new_lama_easy"], root, out)
    from_files, from_tfds, names = _both_ways(
        lambda: [n for n in register_ckl(root, VOCAB, group="ckl_switch")
                 if n.endswith("lama") or "lama_easy" in n], out, "test")
    assert {"ckl_updated_lama", "ckl_new_lama_easy_small_split1"} <= set(names)
    assert all(from_files[n] for n in names)
    assert from_tfds == from_files
    _fails_unprepared(out / "ckl_lama" / "updated_lama",
                      lambda: register_ckl(root, VOCAB, group="ckl_switch"), "ckl_updated_lama",
                      "test")


def test_ecbd_tasks_read_the_prepared_subsets_and_draw_the_same_definitions(tmp_path):
    from test_ecbd_tasks import GPT, STORM, _write

    root = tmp_path / "ecbd"
    other = GPT | {"ex_id": "Gizmo_6001_1_0", "definition": ["Gizmo is a tool of 2019."]}
    _write(root / "2019" / "np_spans_dev.json", [GPT, other])
    _write(root / "2019" / "random_spans_dev.json", [STORM])
    _write(root / "popular" / "random_spans_dev.json", [STORM, GPT])
    out = tmp_path / "tfds"
    _prepare(["ecbd/2019", "ecbd/popular"], root, out)
    from_files, from_tfds, names = _both_ways(
        lambda: register_ecbd(root, VOCAB), out, "validation")
    assert {"ecbd_2019_dev", "ecbd_popular_dev_random_def", "ecbd_dev"} <= set(names) | set(
        seqio.MixtureRegistry.names())
    assert all(from_files[n] for n in names)
    assert from_tfds == from_files  # random_def included: its draws do not depend on the path
    _fails_unprepared(out / "ecbd" / "popular", lambda: register_ecbd(root, VOCAB),
                      "ecbd_popular_dev", "validation")


def test_evolvingqa_tasks_read_the_prepared_qa_sets(tmp_path):
    from test_evolvingqa_tasks import _release

    root = _release(tmp_path / "eqa")
    out = tmp_path / "tfds"
    _prepare(["evolvingqa/qa"], root, out)
    from_files, from_tfds, names = _both_ways(
        lambda: register_evolvingqa(root, t5_vocab=VOCAB), out, "validation")
    assert {"evolvingqa_unchanged", "evolvingqa_new_03", "evolvingqa_edited_03"} <= set(names)
    assert all(from_files[n] for n in names)
    assert from_tfds == from_files
    _fails_unprepared(out / "evolvingqa" / "qa", lambda: register_evolvingqa(root, t5_vocab=VOCAB),
                      "evolvingqa_edited_03", "validation")
