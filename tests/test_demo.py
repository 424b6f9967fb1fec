"""The README's main command: the demo runs the pipeline on the embedded sample world."""

import csv

from tw_jax.cli import main


def test_demo_builds_diffsets_and_probes_for_every_pair(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for pair in ("0809", "0910", "1011"):
        assert f"DiffSet {pair}:" in out and "precision 1.000, recall 1.000" in out
        folder = tmp_path / "data" / pair
        assert (folder / "diffset" / "stats.json").exists()
        assert (folder / "probes" / "stats.json").exists()
        with open(folder / "probes" / "unchanged.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) > 100
        assert list(rows[0])[:3] == ["subject", "relation", "object"]
    assert (tmp_path / "sample_world" / "world.json").exists()
    data = tmp_path / "data"
    assert (data / "08" / "full" / "stats.json").exists()
    for folder in ("08", "0809", "0910", "1011"):
        assert (data / folder / "ssm" / "stats.json").exists()
    assert (data / "vocab" / "t5" / "spiece.model").exists()
    assert (data / "vocab" / "gpt2" / "tokenizer.json").exists()
    # The tasks register from exactly this layout.
    from tw_jax.tasks import register_all

    names = set(register_all(data))
    for pair in ("0809", "0910", "1011"):
        assert {f"twiki_diffset_{pair}_ssm", f"twiki_diffset_{pair}_lm",
                f"twiki_mixreview_{pair}_lm", f"twiki_probes_{pair}_updated"} <= names
    assert {"twiki_full_08_lm", "twiki_full_08_ssm", "twiki_full_11_lm"} <= names
