"""The released TemporalWiki files (small CSVs made here) registered under the same names."""

from __future__ import annotations

import csv
import os
import stat
import zipfile

import pytest
import seqio
import tensorflow as tf

import tw_jax.tasks
from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.released import UnsafeArchiveError, extract_safely

DIFF_0809 = [
    "Kreivstad joined Veistdale Rovers, on a two-year contract.",
    'The film, "Silent Islands", grossed 13.7 million dollars.\nIt was re-released.',
    "Trurmouth elected Groris Funley as mayor.",
]
SUBSET_0809 = ["not used: the gpt2 file wins"]
SUBSET_0910 = ["Dravminster's population grew to 24042.", "A new bridge opened in Krandale."]
FULL_08 = [
    ["Trurmouth is a city in Corvania.", "Wiro Derncroft is its mayor."],
    ["Krandale has 1697607 inhabitants.", "Silent Islands is a comedy film from 2016."],
]
CHANGED = [
    ("Trurmouth", "head of government", "Groris Funley"),
    ("Dravminster", "population", "24042"),
]
UNCHANGED = [("Silent Islands", "director", "Zelel Wernton")]


def write_csv(path, header, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_release(root) -> None:
    diffsets, probes = root / "TWiki_Diffsets", root / "TWiki_Probes"
    write_csv(diffsets / "wikipedia_0809_gpt2.csv", ["text"], [[t] for t in DIFF_0809])
    write_csv(
        diffsets / "wikipedia_0809_subset.csv",
        ["id", "url", "title", "text"],
        [[1, "https://en.wikipedia.org/wiki/X", "X", t] for t in SUBSET_0809],
    )
    write_csv(
        diffsets / "wikipedia_0910_subset.csv",
        ["id", "url", "title", "text"],
        [[i, f"https://en.wikipedia.org/wiki/{i}", str(i), t] for i, t in enumerate(SUBSET_0910)],
    )
    write_csv(probes / "0801-0901_changed.csv", ["subject", "relation", "object"], CHANGED)
    # The reference evaluation files called the object column "objective".
    write_csv(probes / "0801-0901_unchanged.csv", ["subject", "relation", "objective"], UNCHANGED)
    for index, texts in enumerate(FULL_08):
        part = root / "Wikipedia_Full" / "wikipedia_08" / f"part-{index:05d}.csv"
        write_csv(part, ["text"], [[t] for t in texts])


EXPECTED = sorted(
    [
        "twiki_diffset_0809_lm",
        "twiki_diffset_0910_lm",
        "twiki_full_08_lm",
        "twiki_mixreview_0809_lm",
        "twiki_mixreview_0910_lm",
        "twiki_replay_0809_lm",
        "twiki_replay_0910_lm",
    ]
    + [
        f"twiki_probes_0809_{category}{suffix}"
        for category in ("changed", "unchanged")
        for suffix in ("", "_object", "_cloze", "_ssm", "_ssm_cloze")
    ]
)


def register(task_data, path) -> list[str]:
    return tw_jax.tasks.register_published(
        path, t5_vocab=str(task_data["t5"]), gpt2_vocab=str(task_data["gpt2"])
    )


def examples(name, sequence_length=None):
    task = seqio.get_mixture_or_task(name)
    dataset = task.get_dataset(sequence_length, split=task.splits[0], shuffle=False)
    return list(dataset.as_numpy_iterator())


def stream(texts, vocabulary) -> list[int]:
    return [t for text in texts for t in [*vocabulary.encode(text), vocabulary.eos_id]]


def test_release_folder_registers_the_same_task_names(task_data, vocabularies, tmp_path):
    write_release(tmp_path)
    assert sorted(register(task_data, tmp_path)) == EXPECTED
    gpt2 = vocabularies["gpt2"]
    for name, texts in (
        ("twiki_diffset_0809_lm", DIFF_0809),
        ("twiki_diffset_0910_lm", SUBSET_0910),
    ):
        tokens = stream(texts, gpt2)
        blocks = [b["targets"].tolist() for b in examples(name, {"targets": 8})]
        assert [t for block in blocks for t in block] == tokens[: len(tokens) // 8 * 8], name
    full = examples("twiki_full_08_lm", {"targets": 8})
    assert len(full) == len(stream(FULL_08[0] + FULL_08[1], gpt2)) // 8
    changed = examples("twiki_probes_0809_changed_ssm")
    assert [(e["subject"], e["relation"], e["object"]) for e in changed] == [
        tuple(v.encode() for v in row) for row in CHANGED
    ]
    unchanged = examples("twiki_probes_0809_unchanged")
    assert [e["targets_pretokenized"].decode() for e in unchanged] == [
        "Silent Islands director Zelel Wernton"
    ]
    mixture = seqio.get_mixture_or_task("twiki_mixreview_0910_lm")
    assert [t.name for t in mixture.tasks] == ["twiki_diffset_0910_lm", "twiki_full_08_lm"]
    replay = seqio.get_mixture_or_task("twiki_replay_0910_lm")
    assert replay.members == ("twiki_diffset_0910_lm", "twiki_full_08_lm", "twiki_diffset_0809_lm")


def zip_folder(folder, archive, strip_top: bool = False) -> None:
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(folder.rglob("*.csv")):
            name = path.relative_to(folder).as_posix()
            handle.write(path, name.split("/", 1)[1] if strip_top else name)


def test_release_zip_and_folder_of_zips_read_in_place(task_data, tmp_path):
    source = tmp_path / "release"
    write_release(source)
    zip_folder(source, tmp_path / "TemporalWiki.zip")
    assert sorted(register(task_data, tmp_path / "TemporalWiki.zip")) == EXPECTED
    assert len(examples("twiki_probes_0809_changed")) == 2
    # As downloaded: three zips whose members sit at their top level.
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    for top in ("TWiki_Diffsets", "TWiki_Probes", "Wikipedia_Full"):
        zip_folder(source / top, downloads / f"{top}.zip")
    assert sorted(register(task_data, downloads)) == EXPECTED
    assert len(examples("twiki_diffset_0809_lm", {"targets": 8})) > 3
    assert not any(p.suffix == ".csv" for p in downloads.rglob("*"))  # nothing extracted


def malicious_zip(path, member: str, symlink: bool = False) -> None:
    with zipfile.ZipFile(path, "w") as handle:
        handle.writestr("TWiki_Probes/0801-0901_changed.csv", "subject,relation,object\na,b,c\n")
        info = zipfile.ZipInfo(member)
        if symlink:
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        handle.writestr(info, "/etc/passwd" if symlink else "text\nx\n")


@pytest.mark.parametrize(
    ("member", "symlink", "reason"),
    [
        ("../../escaped.csv", False, "'..' path component"),
        ("TWiki_Diffsets/..\\..\\escaped.csv", False, "'..' path component"),
        ("/tmp/absolute.csv", False, "absolute path"),
        ("C:/absolute.csv", False, "absolute path"),
        ("TWiki_Diffsets/wikipedia_0809_gpt2.csv", True, "symbolic link"),
    ],
)
def test_unsafe_archive_is_refused_whole(task_data, tmp_path, member, symlink, reason):
    archive = tmp_path / "evil.zip"
    malicious_zip(archive, member, symlink)
    with pytest.raises(UnsafeArchiveError, match=rf"evil\.zip, .*: unsafe member: {reason}"):
        register(task_data, archive)
    target = tmp_path / "out" / "inner"
    with pytest.raises(UnsafeArchiveError):
        extract_safely(archive, target)
    assert not target.exists() or not any(target.rglob("*"))
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["evil.zip"]


def test_extract_safely_unpacks_inside_the_target(tmp_path):
    source = tmp_path / "release"
    write_release(source)
    zip_folder(source, tmp_path / "release.zip")
    written = extract_safely(tmp_path / "release.zip", tmp_path / "unpacked")
    assert len(written) == 7
    assert all(p.is_relative_to((tmp_path / "unpacked").resolve()) for p in written)
    part = tmp_path / "unpacked" / "Wikipedia_Full" / "wikipedia_08" / "part-00000.csv"
    assert part.read_bytes() == (source / "Wikipedia_Full/wikipedia_08/part-00000.csv").read_bytes()


def test_bad_rows_name_file_and_line(task_data, tmp_path):
    write_release(tmp_path)
    part = tmp_path / "Wikipedia_Full" / "wikipedia_08" / "part-00001.csv"
    part.write_text('text\nfine\n"two","fields"\n', encoding="utf-8")
    probes = tmp_path / "TWiki_Probes" / "0801-0901_changed.csv"
    probes.write_text("subject,relation,object\nTrurmouth,,Groris Funley\n", encoding="utf-8")
    register(task_data, tmp_path)
    with pytest.raises((DumpError, tf.errors.OpError), match=r"part-00001\.csv, line 3: 2 fields"):
        examples("twiki_full_08_lm", {"targets": 8})
    with pytest.raises(DumpError, match=r"0801-0901_changed\.csv, line 2: empty relation"):
        examples("twiki_probes_0809_changed")
    os.remove(probes)
    names = register(task_data, tmp_path)
    assert "twiki_probes_0809_changed" not in names
    assert "twiki_probes_0809_changed" not in seqio.TaskRegistry.names()
