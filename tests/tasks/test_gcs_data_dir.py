"""The tasks of a data folder in a bucket (the local GCS server): the same tasks as the local
folder's, TFRecord patterns that are the ``gs://`` URLs themselves, and probe examples read
through the path layer equal to the local ones."""

from __future__ import annotations

import numpy as np
import pytest
import seqio
from gcs_upload import upload_tree

import tw_jax.tasks
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import TFRecordSource


@pytest.fixture
def gcs_data(task_data, gcs_bucket) -> dict:
    """The session's data folder and vocabularies copied to the bucket; afterwards the tasks
    registered from it are removed (the ``twiki`` fixture registers the local ones again)."""
    uploaded = upload_tree(task_data["data_dir"], f"{gcs_bucket}/data")
    upload_tree(task_data["t5"].parent, f"{gcs_bucket}/vocab/t5")
    upload_tree(task_data["gpt2"], f"{gcs_bucket}/vocab/gpt2")
    yield {"data_dir": f"{gcs_bucket}/data", "t5": f"{gcs_bucket}/vocab/t5/spiece.model",
           "gpt2": f"{gcs_bucket}/vocab/gpt2", "uploaded": uploaded}
    Registrar("data_dir")


def _patterns(names: list[str]) -> dict[str, dict[str, str]]:
    """``{task: {split: file pattern}}`` of the registered tasks that read TFRecords."""
    found = {}
    for name in names:
        if name in seqio.TaskRegistry.names():
            source = seqio.get_mixture_or_task(name).source
            if isinstance(source, TFRecordSource):
                found[name] = dict(source._split_to_filepattern)  # noqa: SLF001
    return found


def _examples(name: str, split: str) -> list[dict]:
    task = seqio.get_mixture_or_task(name)
    return list(task.get_dataset(None, split=split, shuffle=False).as_numpy_iterator())


def _rows(name: str) -> list[dict]:
    return seqio.get_mixture_or_task(name).source.rows()


def test_tasks_of_a_bucket_folder_are_the_local_folders(task_data, gcs_data):
    local_dir = str(task_data["data_dir"])
    local = tw_jax.tasks.register_all(local_dir, t5_vocab=str(task_data["t5"]),
                                      gpt2_vocab=str(task_data["gpt2"]))
    local_patterns = _patterns(local)
    remote = tw_jax.tasks.register_all(gcs_data["data_dir"] + "/", t5_vocab=gcs_data["t5"],
                                       gpt2_vocab=gcs_data["gpt2"])
    assert remote == local
    assert len(local) == 3 * (5 + 2 * 5 * 5 + 5 + 1 + 2 * 5 + 2) + 4 * 2  # as test_twiki_tasks
    remote_patterns = _patterns(remote)
    assert set(remote_patterns) == set(local_patterns)
    assert len(remote_patterns) == 3 * 3 + 4 * 2  # diffset/nondiff/ssm per pair, full per month
    for name, splits in local_patterns.items():
        assert remote_patterns[name] == {
            split: gcs_data["data_dir"] + pattern[len(local_dir):]
            for split, pattern in splits.items()
        }, name
    bucket = gcs_data["data_dir"]
    assert remote_patterns["twiki_diffset_0809_ssm"] == {
        "train": f"{bucket}/0809/ssm/diffset.tfrecord-*-of-*",
        "validation": f"{bucket}/0809/ssm/diffset.tfrecord-*-of-*",
    }
    assert remote_patterns["twiki_full_08_lm"]["train"] == f"{bucket}/08/full/full.tfrecord-*-of-*"
    # 09's snapshot is the 0809 pair's full output (no 09/ folder): found in the bucket too.
    assert remote_patterns["twiki_full_09_ssm"]["train"] == f"{bucket}/0809/ssm/full.tfrecord-*-of-*"
    mixture = seqio.get_mixture_or_task("twiki_mixreview_1011_lm")
    assert [t.name for t in mixture.tasks] == ["twiki_diffset_1011_lm", "twiki_full_08_lm"]


def test_probe_examples_read_from_the_bucket_equal_the_local_ones(task_data, gcs_data):
    names = ["twiki_probes_0910_updated", "twiki_probes_0910_changed_object",
             "twiki_probes_0910_new_ssm", "twiki_probes_0910_deleted_ssm_cloze",
             "twiki_lighttuning_1011_all_ssm"]
    tw_jax.tasks.register_all(task_data["data_dir"], t5_vocab=str(task_data["t5"]),
                              gpt2_vocab=str(task_data["gpt2"]))
    local_rows = {n: _rows(n) for n in names}
    split = {n: seqio.get_mixture_or_task(n).splits[0] for n in names}
    local = {n: _examples(n, split[n]) for n in names}

    tw_jax.tasks.register_all(gcs_data["data_dir"], t5_vocab=gcs_data["t5"],
                              gpt2_vocab=gcs_data["gpt2"])
    task = seqio.get_mixture_or_task("twiki_probes_0910_new_ssm")
    assert task.output_features["inputs"].vocabulary.path == gcs_data["t5"]
    for name in names:
        assert _rows(name) == local_rows[name], name
        remote = _examples(name, split[name])
        assert len(remote) == len(local[name]) > 0, name
        for got, want in zip(remote, local[name], strict=True):
            assert got.keys() == want.keys()
            for key in want:
                np.testing.assert_array_equal(got[key], want[key], err_msg=f"{name} {key}")
    # Every row became an example, tokenised with the vocabularies read from the bucket.
    first = local_rows["twiki_probes_0910_updated"][0]
    assert local["twiki_probes_0910_updated"][0]["subject"].decode() == first["subject"]


def test_a_missing_bucket_folder_registers_nothing(gcs_bucket):
    assert tw_jax.tasks.register_all(f"{gcs_bucket}/no-data-here") == []
    Registrar("data_dir")


def test_vocabularies_written_to_and_read_from_a_bucket(gcs_bucket, gcs_server, tmp_path):
    from tw_jax.data.vocab_training import write_demo_vocabularies
    from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary
    from tw_jax.io import paths

    texts = [f"Article {i} about Trurmouth, its river and its {i % 7} bridges." for i in range(300)]
    local = write_demo_vocabularies(texts, tmp_path / "vocab")
    remote = write_demo_vocabularies(texts, f"{gcs_bucket}/vocab")
    assert {k: str(v) for k, v in remote.items()} == {
        "t5": f"{gcs_bucket}/vocab/t5/spiece.model", "gpt2": f"{gcs_bucket}/vocab/gpt2"}
    names = ["gpt2/merges.txt", "gpt2/tokenizer.json", "gpt2/vocab.json", "t5/spiece.model"]
    assert gcs_server.objects(gcs_bucket[5:], "vocab/") == [f"vocab/{n}" for n in names]
    for name in names:
        assert paths.read_bytes(f"{gcs_bucket}/vocab/{name}") == (tmp_path / "vocab" / name
                                                                  ).read_bytes(), name
    text = "Trurmouth has 3 bridges <extra_id_0>."
    t5_local, t5_remote = t5_vocabulary(local["t5"]), t5_vocabulary(f"{gcs_bucket}/vocab/t5")
    assert t5_remote.encode(text) == t5_local.encode(text)
    assert t5_remote.vocab_size == t5_local.vocab_size
    gpt2_local, gpt2_remote = gpt2_vocabulary(local["gpt2"]), gpt2_vocabulary(remote["gpt2"])
    assert gpt2_remote == gpt2_local and gpt2_remote.encode(text) == gpt2_local.encode(text)
    with pytest.raises(FileNotFoundError, match=f"^{gcs_bucket}/nothing: no such SentencePiece model file$"):
        t5_vocabulary(f"{gcs_bucket}/nothing")


def test_released_files_in_a_bucket_register_and_read_in_place(task_data, gcs_bucket, tmp_path):
    """The published release as a folder of zips in a bucket: the same tasks and examples as
    the local folder (zip members read with ranged requests, nothing extracted)."""
    from test_published_tasks import EXPECTED, examples, register, write_release, zip_folder

    source, downloads = tmp_path / "release", tmp_path / "downloads"
    write_release(source)
    downloads.mkdir()
    for top in ("TWiki_Diffsets", "TWiki_Probes", "Wikipedia_Full"):
        zip_folder(source / top, downloads / f"{top}.zip")
    upload_tree(downloads, f"{gcs_bucket}/downloads")
    upload_tree(source, f"{gcs_bucket}/release")
    names = ["twiki_diffset_0809_lm", "twiki_full_08_lm", "twiki_probes_0809_changed_ssm"]
    lengths = {"targets": 8}

    assert sorted(register(task_data, downloads)) == EXPECTED
    local = {n: examples(n, lengths) for n in names}
    for remote in (f"{gcs_bucket}/downloads", f"{gcs_bucket}/release"):
        assert sorted(register(task_data, remote)) == EXPECTED
        for name in names:
            got = examples(name, lengths)
            assert len(got) == len(local[name]) > 0, name
            for a, b in zip(got, local[name], strict=True):
                assert a.keys() == b.keys()
                for key in b:
                    np.testing.assert_array_equal(a[key], b[key], err_msg=f"{remote} {name}")
    Registrar("published")
