"""The evolvingqa TFDS builder on EvolvingQA's released CSVs (made here, as the task tests')."""

from __future__ import annotations

import tensorflow_datasets as tfds

import tw_jax.datasets  # noqa: F401  (registers evolvingqa)


def test_a_split_per_set_with_the_updated_answer(tmp_path):
    from test_evolvingqa_tasks import _release

    root = _release(tmp_path / "eqa")
    (root / "new_04.csv").write_text("question,answer\n", encoding="utf-8")  # no rows: no split
    builder = tfds.builder("evolvingqa", data_dir=str(tmp_path / "tfds"))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(root)))
    loaded = {split: [{k: v.decode() for k, v in ex.items()}
                      for ex in tfds.as_numpy(builder.as_dataset(split=split))]
              for split in builder.info.splits}
    assert loaded == {
        "edited_03": [{"question": "Who is the CEO of Grol Textiles?",
                       "answer": "Granette Naunsberg", "previous_answer": "L. J. Kulric"}],
        "finetune": [
            {"question": "Who directed Silent Islands?", "answer": "Zelel Wernton",
             "previous_answer": ""},
            {"question": "Where is Trurmouth, exactly?", "answer": "Corvania",
             "previous_answer": ""}],
        "new_03": [{"question": "Whom did Bordling marry?", "answer": "Meel Dreirdstad",
                    "previous_answer": ""}],
        "unchanged": [{"question": "Q?", "answer": "A", "previous_answer": ""}],
    }
