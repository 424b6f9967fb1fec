"""tools/tpu_vm.sh: the gcloud commands of each subcommand, and what they do on a worker.

No gcloud is ever run: every test puts a fake ``gcloud`` first on PATH that records its argv
(one JSON list per line). With ``--dry-run`` the script must print the commands and leave the
fake untouched; without, the fake must receive exactly those words. For ``run``, ``logs`` and
``stop`` the fake can also play one worker: it runs the ``--command`` string with bash in a
temporary home holding a fake ``tw_jax/.venv/bin/tw-jax``, so the quoting, the detached start,
the pid file and the SIGTERM are checked for real. tools/setup.sh's ``tpu`` extra is checked
with fake Python interpreters that record what setup.sh asks of them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "tpu_vm.sh"
SETUP = ROOT / "tools" / "setup.sh"

# One worker's side of `gcloud ... ssh --command C` (bash -c C in FAKE_GCLOUD_HOME) and of
# `scp --recurse SRC ...` (the files under SRC are recorded: the source is gone afterwards).
FAKE_GCLOUD = """\
import json, os, subprocess, sys
from pathlib import Path

argv = sys.argv[1:]
record = {"argv": argv}
if "scp" in argv:
    source = Path(argv[argv.index("--recurse") + 1])
    record["files"] = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
with open(os.environ["FAKE_GCLOUD_CALLS"], "a") as calls:
    calls.write(json.dumps(record) + "\\n")
home = os.environ.get("FAKE_GCLOUD_HOME")
if home and "ssh" in argv:
    command = argv[argv.index("--command") + 1]
    env = {**os.environ, "HOME": home}
    sys.exit(subprocess.run(["bash", "-c", command], cwd=home, env=env).returncode)
"""

# tw-jax on the worker: records its argv, pid and TW_JAX_GPT2_VOCAB (whole, under its final name
# at once), prints a line for the log, runs until it is signalled (ten minutes at most, should a
# test leave it behind), and on SIGTERM notes it and exits 0 (what tw-jax does after saving its
# checkpoint).
FAKE_TW_JAX = """\
import json, os, signal, sys, time
from pathlib import Path

home = Path(os.environ["HOME"])
def on_term(signum, frame):
    print("SIGTERM: checkpoint saved", flush=True)
    (home / "terminated").write_text("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
started = {"argv": sys.argv[1:], "pid": os.getpid(), "cwd": os.getcwd(),
           "vocab": os.environ.get("TW_JAX_GPT2_VOCAB")}
print("training", flush=True)
(home / "started.json.tmp").write_text(json.dumps(started))
os.replace(home / "started.json.tmp", home / "started.json")
time.sleep(600)
"""

RUN_REMOTE = (
    'alive() { kill -0 "$1" 2>/dev/null && ! grep -qs "^State:.*Z" "/proc/$1/status"; }; '
    'if alive "$(cat ~/tw_jax_run.pid 2>/dev/null)"; then echo "a tw-jax run (pid '
    '$(cat ~/tw_jax_run.pid)) is still running on $(hostname)" >&2; exit 1; fi; '
    "cd tw_jax || exit 1; "
    'PATH="$PWD/.venv/bin:$PATH" nohup env -- {words} >> ~/tw_jax_run.log 2>&1 < /dev/null & '
    'echo $! > ~/tw_jax_run.pid; echo "started pid $! on $(hostname), log ~/tw_jax_run.log"'
)
STOP_REMOTE = (
    'alive() { kill -0 "$1" 2>/dev/null && ! grep -qs "^State:.*Z" "/proc/$1/status"; }; '
    'pid=$(cat ~/tw_jax_run.pid 2>/dev/null) && alive "$pid" || '
    '{ echo "no tw-jax run on $(hostname)"; exit 0; }; kill -TERM "$pid"; '
    'echo "SIGTERM sent to pid $pid on $(hostname)"; while alive "$pid"; do sleep 1; done; '
    'echo "pid $pid on $(hostname) has exited"'
)
PYTHON_311 = (
    '{ python3 -c "import sys; sys.exit(sys.version_info < (3, 11))" || '
    'python3.11 -c "import ensurepip" 2>/dev/null || '
    "{ sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -qq && "
    "sudo DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "
    "python3.11 python3.11-venv; }; }"
)
# A user's words with everything quoting must survive: spaces, both quotes, $, gs:// paths
# (safe as they are) and a leading variable assignment whose value has a space.
USER_WORDS = [
    "TW_JAX_GPT2_VOCAB=gs://b/vocab dir",
    "tw-jax",
    "train",
    "--gin_file=diff.gin",
    '--gin.MIXTURE_OR_TASK_NAME="a b"',
    "--gin.NOTE=it's $HOME",
    "--gin.MODEL_DIR=gs://my-twiki/runs/gpt2l-diff/0809",
]
USER_WORDS_QUOTED = (
    "'TW_JAX_GPT2_VOCAB=gs://b/vocab dir' tw-jax train --gin_file=diff.gin "
    "'--gin.MIXTURE_OR_TASK_NAME=\"a b\"' '--gin.NOTE=it'\"'\"'s $HOME' "
    "--gin.MODEL_DIR=gs://my-twiki/runs/gpt2l-diff/0809"
)


@pytest.fixture
def gcloud(tmp_path) -> Path:
    """A fake gcloud first on PATH (see FAKE_GCLOUD); returns the file its calls go to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "gcloud"
    fake.write_text(f"#!{sys.executable}\n{FAKE_GCLOUD}")
    fake.chmod(0o755)
    return tmp_path / "gcloud_calls.jsonl"


def tpu_vm(tmp_path: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "FAKE_GCLOUD_CALLS": str(tmp_path / "gcloud_calls.jsonl"),
    }
    if home is not None:
        env["FAKE_GCLOUD_HOME"] = str(home)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60
    )


def gcloud_calls(calls: Path) -> list[dict]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def dry_run(tmp_path: Path, calls: Path, *args: str) -> list[str]:
    """The printed lines of `tpu_vm.sh SUBCOMMAND --dry-run ARGS`: no gcloud may have run."""
    result = tpu_vm(tmp_path, args[0], "--dry-run", *args[1:])
    assert (result.returncode, result.stderr) == (0, "")
    assert gcloud_calls(calls) == []
    return result.stdout.splitlines()


# ---- create ----------------------------------------------------------------------------------


def test_create_on_demand_is_a_tpu_vm_create(tmp_path, gcloud):
    assert dry_run(tmp_path, gcloud, "create", "--name", "twiki", "--zone", "us-central2-b",
                   "--type", "v4-8") == [
        "gcloud compute tpus tpu-vm create twiki --zone us-central2-b --accelerator-type v4-8 "
        "--version tpu-ubuntu2204-base"
    ]


def test_create_spot_is_a_queued_resource(tmp_path, gcloud):
    assert dry_run(tmp_path, gcloud, "create", "--name=twiki", "--zone=us-west4-a",
                   "--type=v5litepod-16", "--spot") == [
        "gcloud compute tpus queued-resources create twiki --node-id twiki --zone us-west4-a "
        "--accelerator-type v5litepod-16 --runtime-version v2-alpha-tpuv5-lite --spot"
    ]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--preemptible"], "tpu-vm create t --zone z --accelerator-type v4-8 "
                            "--version tpu-ubuntu2204-base --preemptible"),
        (["--preemptible", "--queued"], "queued-resources create t --node-id t --zone z "
         "--accelerator-type v4-8 --runtime-version tpu-ubuntu2204-base --best-effort"),
        (["--queued"], "queued-resources create t --node-id t --zone z "
                       "--accelerator-type v4-8 --runtime-version tpu-ubuntu2204-base"),
        (["--spot", "--no-queued"], "tpu-vm create t --zone z --accelerator-type v4-8 "
                                    "--version tpu-ubuntu2204-base --spot"),
        (["--project", "my-proj", "--version", "v2-alpha-tpuv4"],
         "tpu-vm create t --zone z --project my-proj --accelerator-type v4-8 "
         "--version v2-alpha-tpuv4"),
    ],
)
def test_create_tiers_queueing_project_and_version(tmp_path, gcloud, flags, expected):
    args = ["create", "--name", "t", "--zone", "z", "--type", "v4-8", *flags]
    assert dry_run(tmp_path, gcloud, *args) == [f"gcloud compute tpus {expected}"]


@pytest.mark.parametrize(
    ("accelerator", "runtime"),
    [
        ("v4-8", "tpu-ubuntu2204-base"),
        ("v4-32", "tpu-ubuntu2204-base"),
        ("v5litepod-16", "v2-alpha-tpuv5-lite"),
        ("v5p-8", "v2-alpha-tpuv5"),
        ("v6e-8", "v2-alpha-tpuv6e"),
    ],
)
def test_create_picks_the_runtime_version_by_type(tmp_path, gcloud, accelerator, runtime):
    lines = dry_run(tmp_path, gcloud, "create", "--name", "t", "--zone", "z", "--type", accelerator)
    assert lines == [
        f"gcloud compute tpus tpu-vm create t --zone z --accelerator-type {accelerator} "
        f"--version {runtime}"
    ]


def test_create_and_run_call_gcloud_with_exactly_those_words(tmp_path, gcloud):
    created = tpu_vm(tmp_path, "create", "--name", "twiki", "--zone", "us-west4-a",
                     "--type", "v5litepod-16", "--spot", "--project", "p")
    ran = tpu_vm(tmp_path, "run", "--name", "twiki", "--zone", "us-west4-a", "--", *USER_WORDS)
    assert (created.returncode, created.stdout, created.stderr) == (0, "", "")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    assert [call["argv"] for call in gcloud_calls(gcloud)] == [
        ["compute", "tpus", "queued-resources", "create", "twiki", "--node-id", "twiki",
         "--zone", "us-west4-a", "--project", "p", "--accelerator-type", "v5litepod-16",
         "--runtime-version", "v2-alpha-tpuv5-lite", "--spot"],
        ["compute", "tpus", "tpu-vm", "ssh", "twiki", "--zone", "us-west4-a", "--worker=all",
         "--command", RUN_REMOTE.replace("{words}", USER_WORDS_QUOTED)],
    ]


# ---- run, logs, stop ---------------------------------------------------------------------------


def test_run_dry_run_quotes_the_command_once_for_the_worker_and_once_for_the_line(tmp_path, gcloud):
    lines = dry_run(tmp_path, gcloud, "run", "--name", "twiki", "--zone", "us-west4-a", "--",
                    *USER_WORDS)
    remote = RUN_REMOTE.replace("{words}", USER_WORDS_QUOTED)
    assert lines == [
        "gcloud compute tpus tpu-vm ssh twiki --zone us-west4-a --worker=all --command "
        + "'" + remote.replace("'", "'\"'\"'") + "'"
    ]
    # Read back as a shell reads it: the line's last word is the worker's command, in which the
    # words after `env --` are the user's, unchanged.
    words = shlex.split(lines[0])
    assert words[-1] == remote
    user_part = remote.split("nohup env -- ", 1)[1].split(" >> ~/tw_jax_run.log", 1)[0]
    assert shlex.split(user_part) == USER_WORDS


def test_logs_stop_delete_status_dry_run(tmp_path, gcloud):
    where = ["--name", "twiki", "--zone", "z"]
    ssh = "gcloud compute tpus tpu-vm ssh twiki --zone z"
    assert dry_run(tmp_path, gcloud, "logs", *where) == [
        f"{ssh} --worker=0 --command 'tail -n 200 ~/tw_jax_run.log'"
    ]
    assert dry_run(tmp_path, gcloud, "logs", *where, "--worker", "3", "--follow") == [
        f"{ssh} --worker=3 --command 'tail -n 200 -F ~/tw_jax_run.log'"
    ]
    assert dry_run(tmp_path, gcloud, "stop", *where) == [
        f"{ssh} --worker=all --command " + shlex.quote(STOP_REMOTE)
    ]
    assert dry_run(tmp_path, gcloud, "delete", *where) == [
        "gcloud compute tpus tpu-vm delete twiki --zone z"
    ]
    assert dry_run(tmp_path, gcloud, "delete", *where, "--queued") == [
        "gcloud compute tpus queued-resources delete twiki --zone z --force"
    ]
    assert dry_run(tmp_path, gcloud, "status", *where) == [
        "gcloud compute tpus tpu-vm describe twiki --zone z"
    ]
    assert dry_run(tmp_path, gcloud, "status", *where, "--queued", "--project", "p") == [
        "gcloud compute tpus queued-resources describe twiki --zone z --project p"
    ]


def _wait_for(path: Path) -> str:
    return wait_until(lambda: path.exists() and path.read_text(), what=f"{path} to appear")


def test_run_logs_stop_on_a_worker(tmp_path, gcloud):
    """The commands run by bash in a worker's home: detached start with the user's exact words,
    the pid recorded is the command's, a second run is refused, stop sends it SIGTERM and waits."""
    home = tmp_path / "home"
    venv_bin = home / "tw_jax" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake = venv_bin / "tw-jax"
    fake.write_text(f"#!{sys.executable}\n{FAKE_TW_JAX}")
    fake.chmod(0o755)
    host = socket.gethostname()
    where = ["--name", "twiki", "--zone", "z"]

    ran = tpu_vm(tmp_path, "run", *where, "--", *USER_WORDS, home=home)
    started = json.loads(_wait_for(home / "started.json"))
    try:
        pid = started["pid"]
        assert (ran.returncode, ran.stderr) == (0, "")
        assert ran.stdout == f"started pid {pid} on {host}, log ~/tw_jax_run.log\n"
        assert started == {
            "argv": USER_WORDS[2:],
            "pid": pid,
            "cwd": str(home / "tw_jax"),
            "vocab": "gs://b/vocab dir",
        }
        assert (home / "tw_jax_run.pid").read_text() == f"{pid}\n"

        again = tpu_vm(tmp_path, "run", *where, "--", "tw-jax", "train", home=home)
        assert again.returncode == 1
        assert again.stderr == f"a tw-jax run (pid {pid}) is still running on {host}\n"

        logs = tpu_vm(tmp_path, "logs", *where, home=home)
        assert (logs.returncode, logs.stdout) == (0, "training\n")

        stopped = tpu_vm(tmp_path, "stop", *where, home=home)
        assert (stopped.returncode, stopped.stderr) == (0, "")
        assert stopped.stdout == (
            f"SIGTERM sent to pid {pid} on {host}\npid {pid} on {host} has exited\n"
        )
        assert (home / "terminated").read_text() == "SIGTERM"
        assert (home / "tw_jax_run.log").read_text() == "training\nSIGTERM: checkpoint saved\n"
    finally:
        if not (home / "terminated").exists():
            os.kill(started["pid"], signal.SIGKILL)

    nothing = tpu_vm(tmp_path, "stop", *where, home=home)
    assert (nothing.returncode, nothing.stdout) == (0, f"no tw-jax run on {host}\n")


# ---- setup -------------------------------------------------------------------------------------


def test_setup_from_a_git_url_clones_at_the_ref_on_every_worker(tmp_path, gcloud):
    lines = dry_run(tmp_path, gcloud, "setup", "--name", "twiki", "--zone", "z",
                    "--repo", "https://github.com/tw-jax/tw_jax", "--ref", "v0.1 rc")
    remote = (
        f"{PYTHON_311} && rm -rf tw_jax && git clone --quiet https://github.com/tw-jax/tw_jax "
        "tw_jax && git -C tw_jax checkout --quiet 'v0.1 rc' && cd tw_jax && "
        "bash tools/setup.sh tpu"
    )
    assert lines == [
        "gcloud compute tpus tpu-vm ssh twiki --zone z --worker=all --command "
        + shlex.quote(remote)
    ]


def test_setup_copies_a_plain_folder_as_it_is(tmp_path, gcloud):
    folder = tmp_path / "my code"
    folder.mkdir()
    assert dry_run(tmp_path, gcloud, "setup", "--name", "twiki", "--zone", "z",
                   "--repo", str(folder)) == [
        "gcloud compute tpus tpu-vm ssh twiki --zone z --worker=all --command 'rm -rf tw_jax'",
        f"gcloud compute tpus tpu-vm scp --recurse '{folder}' twiki:tw_jax --zone z --worker=all",
        "gcloud compute tpus tpu-vm ssh twiki --zone z --worker=all --command "
        + shlex.quote(f"{PYTHON_311} && cd tw_jax && bash tools/setup.sh tpu"),
    ]


def test_setup_defaults_to_a_staged_copy_of_this_checkout(tmp_path, gcloud):
    staged = tmp_path / "tw_jax_setup.twiki" / "tw_jax"
    assert dry_run(tmp_path, gcloud, "setup", "--name", "twiki", "--zone", "z") == [
        "gcloud compute tpus tpu-vm ssh twiki --zone z --worker=all --command 'rm -rf tw_jax'",
        f"gcloud compute tpus tpu-vm scp --recurse {staged} twiki:tw_jax --zone z --worker=all",
        "gcloud compute tpus tpu-vm ssh twiki --zone z --worker=all --command "
        + shlex.quote(f"{PYTHON_311} && cd tw_jax && bash tools/setup.sh tpu"),
    ]
    assert not staged.parent.exists()  # --dry-run copies nothing either


def test_setup_of_a_git_checkout_sends_what_git_does_not_ignore(tmp_path, gcloud):
    repo = tmp_path / "checkout"
    (repo / "tools").mkdir(parents=True)
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".gitignore").write_text(".venv/\n")
    (repo / "tools" / "setup.sh").write_text("echo setup\n")
    (repo / "gone.txt").write_text("deleted after the commit\n")
    (repo / ".venv" / "bin" / "python").write_text("ignored\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", ".gitignore", "tools/setup.sh", "gone.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    (repo / "gone.txt").unlink()
    (repo / "new file.py").write_text("untracked, not ignored\n")

    result = tpu_vm(tmp_path, "setup", "--name", "twiki", "--zone", "z", "--repo", str(repo))
    assert (result.returncode, result.stderr) == (0, "")
    staged = tmp_path / "tw_jax_setup.twiki" / "tw_jax"
    ssh = ["compute", "tpus", "tpu-vm", "ssh", "twiki", "--zone", "z", "--worker=all", "--command"]
    assert gcloud_calls(gcloud) == [
        {"argv": [*ssh, "rm -rf tw_jax"]},
        {"argv": ["compute", "tpus", "tpu-vm", "scp", "--recurse", str(staged), "twiki:tw_jax",
                  "--zone", "z", "--worker=all"],
         "files": [".gitignore", "new file.py", "tools/setup.sh"]},
        {"argv": [*ssh, f"{PYTHON_311} && cd tw_jax && bash tools/setup.sh tpu"]},
    ]
    assert not staged.parent.exists()  # the staged copy is removed afterwards


# ---- usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "--zone", "z", "--type", "v4-8"], "create needs --name"),
        (["run", "--zone", "z", "--", "tw-jax", "train"], "run needs --name"),
        (["status", "--name", "t"], "status needs --zone"),
        (["create", "--name", "t", "--zone", "z"], "create needs --type (e.g. v4-8, v5litepod-16)"),
        (["create", "--name", "t", "--zone", "z", "--type", "v9-8"],
         "no default runtime for --type v9-8 (known: v2-, v3-, v4-, v5litepod-, v5p-, v6e-); "
         "pass --version"),
        (["create", "--name", "t", "--zone", "z", "--type", "v4-8", "--spot", "--preemptible"],
         "--spot and --preemptible exclude each other"),
        (["run", "--name", "t", "--zone", "z"],
         "run needs the command after -- (e.g. -- tw-jax train --gin_file=...)"),
        (["logs", "--name", "t", "--zone", "z", "--type", "v4-8"],
         "logs does not take --type (see --help)"),
        (["logs", "--name", "t", "--zone", "z", "--worker", "x"],
         "--worker is a worker number or all, not 'x'"),
        (["setup", "--name", "t", "--zone", "z", "--repo", ".", "--ref", "main"],
         "--ref needs a git URL as --repo; a folder is copied as it is"),
        (["delete", "--name", "My_TPU", "--zone", "z"],
         "--name 'My_TPU' is not a TPU name (a-z, 0-9, -; starts with a letter)"),
        (["create", "--name"], "--name needs a value"),
        (["launch", "--name", "t"],
         "unknown subcommand 'launch' (create, setup, run, logs, stop, delete, status; see --help)"),
        ([], "missing subcommand (create, setup, run, logs, stop, delete, status; see --help)"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(tmp_path, gcloud, args, message):
    result = tpu_vm(tmp_path, *args, "--dry-run")
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"tpu_vm.sh: {message}\n")
    assert gcloud_calls(gcloud) == []


def test_help_prints_the_usage(tmp_path, gcloud):
    result = tpu_vm(tmp_path, "--help")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "Usage: tools/tpu_vm.sh SUBCOMMAND [FLAGS] [--dry-run]"
    assert tpu_vm(tmp_path, "run", "--help").stdout == result.stdout


def test_dry_run_goes_before_the_subcommand_too_but_not_after_the_run_command(tmp_path, gcloud):
    result = tpu_vm(tmp_path, "--dry-run", "run", "--name", "t", "--zone", "z", "--",
                    "tw-jax", "train", "--dry-run")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "gcloud compute tpus tpu-vm ssh t --zone z --worker=all --command "
        + shlex.quote(RUN_REMOTE.replace("{words}", "tw-jax train --dry-run")) + "\n"
    )
    assert gcloud_calls(gcloud) == []


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


# ---- tools/setup.sh ----------------------------------------------------------------------------

# An interpreter that records `NAME ARGS` and does what setup.sh needs of it: `-c` checks the
# version (FAKE_PY_OLD names the interpreters that are 3.10), `-m venv .venv` makes a
# .venv/bin/python like itself, `-m pip install uv==...` a .venv/bin/uv like itself.
FAKE_PYTHON = """\
import json, os, shutil, sys
from pathlib import Path

name = sys.argv[0] if sys.argv[0].startswith(".venv/") else Path(sys.argv[0]).name
args = sys.argv[1:]
with open(os.environ["FAKE_PY_CALLS"], "a") as calls:
    calls.write(json.dumps([name, *args]) + "\\n")
if args[:1] == ["-c"]:
    sys.exit(name in os.environ["FAKE_PY_OLD"].split())
if args[:2] == ["-m", "venv"]:
    Path(".venv/bin").mkdir(parents=True)
    shutil.copy(sys.argv[0], ".venv/bin/python")
if args[:3] == ["-m", "pip", "install"] and args[-1].startswith("uv=="):
    shutil.copy(sys.argv[0], ".venv/bin/uv")
"""
VERSION_CHECK = "import sys; sys.exit(sys.version_info < (3, 11))"
VENV_UV = [".venv/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "uv==0.13.*"]
TORCH = [".venv/bin/python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "torch==2.13.0"]


def _uv(spec: str) -> list[str]:
    return [".venv/bin/uv", "pip", "install", "--quiet", "--python", ".venv/bin/python",
            "--constraint", "requirements/constraints.txt", "--editable", spec]


UV_PIP = [".venv/bin/uv", "pip", "install", "--quiet", "--python", ".venv/bin/python"]
# T5X from GitHub at the pinned commits, without dependency metadata, then what it imports.
T5X_GIT = [*UV_PIP, "--no-deps", "-r", "requirements/t5x.txt"]
T5X_DEPS = [*UV_PIP, "--constraint", "requirements/constraints.txt",
            "-r", "requirements/t5x-deps.txt"]


def run_setup(tmp_path: Path, extras: list[str], old: str = "",
              interpreters: tuple[str, ...] = ("python3", "python3.11"),
              extra_env: dict[str, str] | None = None):
    """tools/setup.sh EXTRAS in a copy of tools/ with only fake interpreters (and dirname) on
    PATH; returns (exit status, stderr, the interpreters' calls)."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    shutil.copy(SETUP, repo / "tools" / "setup.sh")
    bin_dir = tmp_path / "pybin"
    bin_dir.mkdir()
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))
    for name in interpreters:
        (bin_dir / name).write_text(f"#!{sys.executable}\n{FAKE_PYTHON}")
        (bin_dir / name).chmod(0o755)
    calls = tmp_path / "py_calls.jsonl"
    env = {"PATH": str(bin_dir), "FAKE_PY_CALLS": str(calls), "FAKE_PY_OLD": old,
           **(extra_env or {})}
    result = subprocess.run(["/bin/bash", str(repo / "tools" / "setup.sh"), *extras], env=env,
                            capture_output=True, text=True, timeout=60)
    lines = calls.read_text().splitlines() if calls.exists() else []
    return result.returncode, result.stderr, [json.loads(line) for line in lines]


def test_setup_sh_default_and_test_are_unchanged(tmp_path):
    assert run_setup(tmp_path / "default", []) == (0, "", [
        ["python3", "-m", "venv", ".venv"], VENV_UV, _uv(".[spacy-model]"),
    ])
    assert run_setup(tmp_path / "test", ["test"]) == (0, "", [
        ["python3", "-m", "venv", ".venv"], VENV_UV, TORCH, _uv(".[test,spacy-model,parity,lm-eval]"),
        T5X_GIT, T5X_DEPS,
    ])


def test_setup_sh_t5x_installs_from_github_or_from_a_wheel_folder(tmp_path):
    assert run_setup(tmp_path / "git", ["t5x"]) == (0, "", [
        ["python3", "-m", "venv", ".venv"], VENV_UV, _uv(".[t5x,spacy-model]"), T5X_GIT,
        T5X_DEPS,
    ])
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    names = ["t5x-0.0.0-py3-none-any.whl", "airio-0.0.1-py3-none-any.whl",
             "jestimator-0.3.3-py3-none-any.whl"]
    for name in names:
        (wheels / name).write_bytes(b"")
    assert run_setup(tmp_path / "wheels_run", ["t5x"],
                     extra_env={"TW_JAX_T5X_WHEELS": str(wheels)}) == (0, "", [
        ["python3", "-m", "venv", ".venv"], VENV_UV, _uv(".[t5x,spacy-model]"),
        [*UV_PIP, "--no-deps", *(str(wheels / name) for name in names)], T5X_DEPS,
    ])
    (wheels / names[2]).unlink()
    status, stderr, _ = run_setup(tmp_path / "missing", ["t5x"],
                                  extra_env={"TW_JAX_T5X_WHEELS": str(wheels)})
    assert status == 1 and f"no jestimator-*.whl in TW_JAX_T5X_WHEELS={wheels}" in stderr


def test_setup_sh_tpu_installs_the_tpu_extra_without_torch(tmp_path):
    assert run_setup(tmp_path / "tpu", ["tpu"]) == (0, "", [
        ["python3", "-c", VERSION_CHECK], ["python3", "-m", "venv", ".venv"], VENV_UV,
        _uv(".[tpu,spacy-model]"),
    ])
    assert run_setup(tmp_path / "tpu_test", ["tpu,test"]) == (0, "", [
        ["python3", "-c", VERSION_CHECK], ["python3", "-m", "venv", ".venv"], VENV_UV,
        _uv(".[tpu,test,spacy-model]"), T5X_GIT, T5X_DEPS,
    ])


def test_setup_sh_tpu_takes_python3_11_where_python3_is_3_10(tmp_path):
    assert run_setup(tmp_path / "old", ["tpu"], old="python3") == (0, "", [
        ["python3", "-c", VERSION_CHECK], ["python3.11", "-c", VERSION_CHECK],
        ["python3.11", "-m", "venv", ".venv"], VENV_UV, _uv(".[tpu,spacy-model]"),
    ])
    assert run_setup(tmp_path / "none", ["tpu"], old="python3", interpreters=("python3",)) == (
        1,
        "setup.sh: tpu needs Python 3.11+ (e.g. sudo apt-get install python3.11 python3.11-venv)\n",
        [["python3", "-c", VERSION_CHECK]],
    )
