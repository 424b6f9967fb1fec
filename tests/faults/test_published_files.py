"""Hostile released files: a zip bomb is refused before it is inflated, an oversized CSV field
is an error naming the file and line, and a file that could be read from two places (two
members of one name, a folder and a zip) is refused naming both (tw_jax.preprocess.dumps.released,
tw_jax.io.csv_reader)."""

import csv
import io
import subprocess
import sys
import textwrap
import zipfile

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.released import csv_texts, index_files
from tw_jax.preprocess.probes.probe_csv import read_probe_rows

BOMB_BYTES = 1 << 30  # 1 GiB of CSV expanded, about 1 MiB stored


@pytest.fixture(autouse=True)
def _csv_limit_restored():
    """The csv module's field limit is process-wide: leave it as found for other tests."""
    before = csv.field_size_limit()
    yield
    csv.field_size_limit(before)


def _zip_bomb(path):
    """A TemporalWiki-looking zip whose one CSV inflates to BOMB_BYTES (written in chunks)."""
    chunk = b"a" * (1 << 20)
    with (zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
          archive.open("TWiki_Diffsets/0809/diffset.csv", "w", force_zip64=True) as member):
        member.write(b"id,title,text\n1,Bomb,")
        for _ in range(BOMB_BYTES // len(chunk)):
            member.write(chunk)
        member.write(b"\n")
    return path


def test_a_zip_bomb_is_refused_unread_with_bounded_memory(tmp_path):
    bomb = _zip_bomb(tmp_path / "TWiki_Diffsets.zip")
    assert bomb.stat().st_size < BOMB_BYTES // 100
    # In a child process, so its peak memory is the reader's alone.
    script = textwrap.dedent(f"""
        from tw_jax.errors import DumpError
        from tw_jax.preprocess.dumps.released import csv_texts, index_files
        (file,) = index_files({str(bomb)!r})
        try:
            list(csv_texts(file))
        except DumpError as error:
            print(error)
        # VmHWM: this process's peak since its exec (ru_maxrss would carry the forking
        # pytest process's peak across exec).
        status = open("/proc/self/status").read().split("VmHWM:")[1]
        print(int(status.split()[0]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=True)
    message, peak_kib = done.stdout.strip().splitlines()
    assert message.startswith(f"{bomb}!TWiki_Diffsets/0809/diffset.csv: expands ")
    assert "refused as a zip bomb (the limit is 100" in message
    # The interpreter and the imports, not a gigabyte of inflated text.
    assert int(peak_kib) < 600 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"


def test_the_expansion_limit_is_configurable(tmp_path, monkeypatch):
    archive = tmp_path / "TWiki_Probes.zip"
    text = "subject,relation,object\n" + "Ada,occupation,mathematician\n" * 200_000
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as handle:
        handle.writestr("TWiki_Probes/0809/unchanged.csv", text)
    (file,) = index_files(archive)
    monkeypatch.setenv("TW_JAX_MAX_ZIP_RATIO", "10")
    with pytest.raises(DumpError, match="refused as a zip bomb"), file.open_text():
        pass
    monkeypatch.setenv("TW_JAX_MAX_ZIP_RATIO", "100000")
    with file.open_text() as handle:
        assert len(read_probe_rows(handle, file.name)) == 200_000


def test_an_oversized_field_names_the_file_and_line(tmp_path, monkeypatch):
    path = tmp_path / "diffset.csv"
    path.write_text("id,title,text\n1,Short,fine\n2,Long," + "x" * 5000 + "\n")
    (file,) = [f for f in index_files(tmp_path) if f.location == str(path)]
    monkeypatch.setenv("TW_JAX_CSV_FIELD_LIMIT", "4096")
    with pytest.raises(DumpError, match=r"diffset\.csv, line 3: a field is longer than 4,096 "
                                        r"characters \(set \$TW_JAX_CSV_FIELD_LIMIT"):
        list(csv_texts(file))
    monkeypatch.delenv("TW_JAX_CSV_FIELD_LIMIT")
    assert [len(t) for t in csv_texts(file)] == [4, 5000]
    with pytest.raises(DumpError, match=r"probes\.csv, line 2: a field is longer than 10"):
        monkeypatch.setenv("TW_JAX_CSV_FIELD_LIMIT", "10")
        read_probe_rows(io.StringIO("subject,relation,object\nAda,occupation,mathematician\n"),
                        "probes.csv")


def test_extracting_a_zip_bomb_writes_nothing(tmp_path):
    from tw_jax.preprocess.dumps.released import extract_safely

    bomb = _zip_bomb(tmp_path / "TWiki_Diffsets.zip")
    with pytest.raises(DumpError, match="refused as a zip bomb"):
        extract_safely(bomb, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))


PROBE_HEADER = "subject,relation,object\n"


def test_an_archive_with_two_members_of_one_name_is_refused_naming_it(tmp_path):
    from tw_jax.preprocess.dumps.released import UnsafeArchiveError

    archive = tmp_path / "TWiki_Probes.zip"
    with zipfile.ZipFile(archive, "w") as handle, pytest.warns(UserWarning, match="Duplicate"):
        handle.writestr("TWiki_Probes/0801-0901_changed.csv", PROBE_HEADER + "a,b,c\n" * 3)
        handle.writestr("TWiki_Probes/0801-0901_changed.csv", PROBE_HEADER + "a,b,c\n")
    with pytest.raises(UnsafeArchiveError) as caught:  # before: the 1-row copy, silently
        index_files(archive)
    assert str(caught.value) == (
        f"{archive}, TWiki_Probes/0801-0901_changed.csv: 2 members of this name; which one is "
        "meant is ambiguous, so the archive is not used")


def test_a_file_both_in_a_folder_and_in_a_zip_is_refused_naming_both(tmp_path):
    folder = tmp_path / "release" / "TWiki_Probes"
    folder.mkdir(parents=True)
    (folder / "0801-0901_changed.csv").write_text(PROBE_HEADER + "a,b,c\n" * 3)
    (folder / "0801-0901_unchanged.csv").write_text(PROBE_HEADER + "a,b,c\n")
    with zipfile.ZipFile(tmp_path / "release" / "TWiki_Probes.zip", "w") as handle:
        handle.writestr("TWiki_Probes/0801-0901_changed.csv", PROBE_HEADER + "a,b,c\n")
    with pytest.raises(DumpError, match=r"is TWiki_Probes/0801-0901_changed\.csv again") as caught:
        index_files(tmp_path / "release")
    message = str(caught.value)
    assert str(folder / "0801-0901_changed.csv") in message
    assert f"{tmp_path / 'release' / 'TWiki_Probes.zip'}!TWiki_Probes/0801-0901_changed.csv" in message
    (tmp_path / "release" / "TWiki_Probes.zip").unlink()
    assert len(index_files(tmp_path / "release")) == 2
