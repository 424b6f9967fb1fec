"""A stage refuses an earlier stage's folder that has no stats.json (the marker every stage
writes last), with one line naming the folder: an interrupted run's shorter files are never taken
for the whole output. Covered: ssm and probes reading a DiffSet folder, the EvolvingQA
generators reading build and probes folders; the EvolvingQA build hands SSM a complete one."""

import json

import pytest

from tw_jax.benchmarks import evolvingqa_cli
from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.preprocess.evolvingqa.generate import generate_with_llm

RECORD = {"id": 1, "title": "Alpha", "text": "Alpha was born in Paris on 4 May 2001.",
          "kind": "new"}


def _refusal(folder, command):
    return (f"{folder}: has no stats.json: the stage that writes it ({command}) did not finish; "
            "run it again")


@pytest.fixture
def cut_diffset(tmp_path):
    """What an interrupted `tw-jax diffset` leaves: its JSON lines, no stats.json."""
    folder = tmp_path / "diffset"
    folder.mkdir()
    for name in ("diffset", "full", "unchanged"):
        (folder / f"{name}.jsonl").write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("runner", ["local", "beam"])
def test_ssm_refuses_a_diffset_folder_without_stats(cut_diffset, tmp_path, capsys, runner):
    if runner == "beam":
        pytest.importorskip("apache_beam")
    out = tmp_path / "ssm"
    assert main(["ssm", "--in", str(cut_diffset), "--out", str(out), "--inputs", "diffset",
                 "--runner", runner]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax ssm: error: {_refusal(cut_diffset, 'tw-jax diffset')}"]
    assert not (out / "stats.json").exists()


def test_ssm_reads_the_folder_once_it_is_complete(cut_diffset, tmp_path, capsys):
    (cut_diffset / "stats.json").write_text("{}\n", encoding="utf-8")
    out = tmp_path / "ssm"
    assert main(["ssm", "--in", str(cut_diffset), "--out", str(out), "--inputs", "diffset"]) == 0
    assert json.loads((out / "stats.json").read_text())["diffset"]["articles"] == 1


def test_probes_refuse_a_diffset_folder_without_stats(cut_diffset, tmp_path, capsys):
    dump = tmp_path / "wikidata.json"
    dump.write_text('{"type": "item", "id": "Q1"}\n', encoding="utf-8")
    wiki = tmp_path / "enwiki.xml"
    wiki.write_text('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"></mediawiki>\n',
                    encoding="utf-8")
    out = tmp_path / "probes"
    assert main(["probes", "--old", str(dump), "--new", str(dump), "--wikipedia", str(wiki),
                 "--diffset", str(cut_diffset), "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax probes: error: {_refusal(cut_diffset, 'tw-jax diffset')}"]
    assert not (out / "stats.json").exists()


def test_evolvingqa_generators_refuse_incomplete_folders(tmp_path, capsys):
    data = tmp_path / "build"
    for folder in (data / "evolvingqa", data / "0809" / "evolvingqa"):
        folder.mkdir(parents=True)
        (folder / "stats.json").write_text("{}")
    passages = {"id": 1, "title": "Alpha", "month": "0809", "text": "x", "entities": []}
    (data / "evolvingqa" / "unchanged.jsonl").write_text(json.dumps(passages) + "\n")
    (data / "0910" / "evolvingqa").mkdir(parents=True)  # an extraction cut short
    (data / "0910" / "evolvingqa" / "new.jsonl").write_text(json.dumps(passages) + "\n")
    with pytest.raises(DumpError) as caught:  # before any request to the LLM
        generate_with_llm(data, client=None)
    assert str(caught.value) == _refusal(data / "0910" / "evolvingqa", "tw-jax evolvingqa build")

    probes = tmp_path / "probes" / "0809" / "probes"
    probes.mkdir(parents=True)
    (probes / "unchanged.csv").write_text("subject,relation,object\n")
    assert evolvingqa_cli.main(["evolvingqa", "generate", "--data", str(tmp_path / "none"),
                                "--probes", str(tmp_path / "probes"),
                                "--out", str(tmp_path / "qa")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax evolvingqa generate: error: {_refusal(probes, 'tw-jax probes')}"]
    assert not (tmp_path / "qa").exists()
