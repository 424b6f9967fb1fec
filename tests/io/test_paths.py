"""The path layer on local folders and on a real local GCS server: same calls, same results."""

from pathlib import Path

import pytest

from tw_jax.io import paths
from tw_jax.io.gcs import check_access, configure_environment, emulator_url


@pytest.fixture(params=["local", "gcs"])
def root(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    return request.getfixturevalue("gcs_bucket") + "/root"


def test_urls_stay_urls():
    assert paths.join("gs://bucket/a", "b", "c.txt") == "gs://bucket/a/b/c.txt"
    assert str(paths.as_path("gs://bucket/a") / "b") == "gs://bucket/a/b"
    assert paths.parent("gs://bucket/a/b") == "gs://bucket/a"
    assert paths.resolve("gs://bucket/a/") == "gs://bucket/a"
    assert paths.resolve("gs://bucket") == "gs://bucket"
    assert paths.is_url("gs://b/x") and not paths.is_url("/tmp/gs:/b/x")


def test_relative_local_paths_resolve_against_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert paths.resolve("out/x") == str(tmp_path / "out" / "x")


def test_files_round_trip_in_both_places(root):
    paths.makedirs(paths.join(root, "sub"))
    paths.write_text(paths.join(root, "sub", "a.txt"), "héllo\n")
    with paths.open_file(paths.join(root, "sub", "b.csv"), "w", encoding="utf-8", newline="") as f:
        f.write("x,y\r\n")
    with paths.open_file(paths.join(root, "sub", "c.bin"), "wb") as f:
        f.write(b"\x00\x01" * 1000)

    assert paths.read_text(paths.join(root, "sub", "a.txt")) == "héllo\n"
    with paths.open_file(paths.join(root, "sub", "b.csv"), "r", encoding="utf-8", newline="") as f:
        assert f.read() == "x,y\r\n"
    with paths.open_file(paths.join(root, "sub", "c.bin"), "rb") as f:
        f.seek(1998)
        assert f.read() == b"\x00\x01"
    assert paths.size(paths.join(root, "sub", "c.bin")) == 2000
    assert paths.listdir(paths.join(root, "sub")) == ["a.txt", "b.csv", "c.bin"]
    assert paths.glob(paths.join(root, "sub", "*.txt")) == [paths.join(root, "sub", "a.txt")]
    assert paths.glob(paths.join(root, "*", "?.csv")) == [paths.join(root, "sub", "b.csv")]
    assert paths.isdir(paths.join(root, "sub")) and not paths.isdir(paths.join(root, "no"))
    assert paths.isfile(paths.join(root, "sub", "a.txt"))
    assert not paths.isfile(paths.join(root, "sub"))

    paths.replace(paths.join(root, "sub", "a.txt"), paths.join(root, "sub", "d.txt"))
    assert not paths.exists(paths.join(root, "sub", "a.txt"))
    assert paths.read_text(paths.join(root, "sub", "d.txt")) == "héllo\n"
    with paths.local_copy(paths.join(root, "sub", "d.txt")) as local:
        assert Path(local).read_text(encoding="utf-8") == "héllo\n"

    paths.remove(paths.join(root, "sub", "d.txt"))
    paths.remove(paths.join(root, "sub", "d.txt"))  # missing is fine
    paths.rmtree(paths.join(root, "sub"))
    assert not paths.exists(paths.join(root, "sub", "b.csv"))


def test_an_object_appears_only_when_its_writer_closes(gcs_bucket, gcs_server):
    target = f"{gcs_bucket}/half/written.bin"
    handle = paths.open_file(target, "wb")
    handle.write(b"x" * (1 << 20))
    handle.flush()
    assert gcs_server.objects(gcs_bucket[5:], "half/") == []
    handle.close()
    assert gcs_server.objects(gcs_bucket[5:], "half/") == ["half/written.bin"]


def test_missing_bucket_or_object_is_one_line_naming_the_path(gcs_bucket):
    with pytest.raises(paths.StorageError, match=r"^gs://no-such-bucket-x/a: bucket 'no-such"):
        check_access("gs://no-such-bucket-x/a", must_exist=False)
    with pytest.raises(paths.StorageError, match=rf"^{gcs_bucket}/nothing: no such object"):
        check_access(f"{gcs_bucket}/nothing", must_exist=True)
    check_access(f"{gcs_bucket}/new/out", must_exist=False)


def test_the_emulator_setting_points_every_client_at_it():
    env = {"STORAGE_EMULATOR_HOST": "127.0.0.1:4443"}
    configure_environment(env)
    assert emulator_url(env) == "http://127.0.0.1:4443"
    assert env["EPATH_USE_TF"] == "false"
    assert env["TENSORSTORE_GCS_HTTP_URL"] == "http://127.0.0.1:4443"
    mine = {"STORAGE_EMULATOR_HOST": "http://h:1", "EPATH_USE_TF": "true"}
    configure_environment(mine)
    assert mine["EPATH_USE_TF"] == "true"  # a user's own setting stays
    untouched: dict[str, str] = {}
    configure_environment(untouched)
    assert untouched == {}
