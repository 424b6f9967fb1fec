"""Shared fixtures: the sample world is built once per test session (it takes a few seconds);
the trainer and evaluation tests' data folder (the task tests' builder: demo pairs, initial
snapshot, SSM TFRecords, tiny vocabularies) once per session, registered before each test, with
a persistent XLA compilation cache shared by the in-process runs and the subprocesses, so a
graph that several tests (or a run and its resumption) use compiles once."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from xla_flags import FAST_COMPILE_FLAGS, with_flags

sys.path.insert(0, str(Path(__file__).resolve().parent / "tasks"))

CACHE_BYTES = 16 * 2**30  # far above what a run writes: nothing is ever evicted


@pytest.fixture(scope="session")
def sample_world(tmp_path_factory) -> tuple[Path, dict]:
    from tw_jax.sample_world.build import build_sample_world

    root = tmp_path_factory.mktemp("sample_world")
    world = build_sample_world(root, seed=0)
    return root, world


SESSION_CACHE_ENV = "TW_JAX_TEST_XLA_CACHE"  # the run's cache folder, set by the first process
_made_cache: list[str] = []


def pytest_configure(config):
    """GCS clients of the whole session: gcsfs behind epath (TensorFlow's GCS file system cannot
    be pointed at a local server, and epath picks its backend once per process), and credential
    look-ups at a closed local port. Local paths are unaffected. Then the run's XLA cache."""
    from gcs_emulator import SESSION_ENV

    for key, value in SESSION_ENV.items():
        os.environ.setdefault(key, value)
    _session_compile_cache()


def _session_compile_cache() -> None:
    """One persistent XLA cache for every test of the run, in the environment before jax is
    imported: the xdist workers (started after this, by the process that made the folder) and
    every subprocess a test starts inherit it, so a tiny model that many tests train, score or
    decode compiles once per run, not once per test. A test that needs a cache of its own (or
    none) still sets it. Cached executables are the compiler's output for the same program, so
    results are unchanged (the bitwise resume and mesh tests run on it)."""
    folder = os.environ.get(SESSION_CACHE_ENV)
    if not folder:
        folder = tempfile.mkdtemp(prefix="tw_jax_xla_cache_")
        os.environ[SESSION_CACHE_ENV] = folder
        _made_cache.append(folder)
    settings = {"JAX_COMPILATION_CACHE_DIR": folder,
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
                # a size limit turns on JAX's file lock around each entry: xdist's workers
                # write the same folder, and one must never read an entry half written
                "JAX_COMPILATION_CACHE_MAX_SIZE": str(CACHE_BYTES)}
    os.environ.update(settings)
    os.environ["XLA_FLAGS"] = with_flags(*FAST_COMPILE_FLAGS)  # see tests/xla_flags.py
    if "jax" in sys.modules:  # a plugin imported it first: its flags read the environment then
        import jax

        for key, value in settings.items():
            jax.config.update(key.lower(), int(value) if key.endswith(("BYTES", "SIZE")) else
                              float(value) if key.endswith("SECS") else value)


def pytest_unconfigure(config):
    for folder in _made_cache:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def gcs_server():
    """A local GCS server (fake-gcs-server on 127.0.0.1) for the whole session."""
    from gcs_emulator import GcsEmulator

    server = GcsEmulator()
    yield server
    server.close()


@pytest.fixture
def gcs_bucket(gcs_server, monkeypatch, request) -> str:
    """``gs://<a new bucket>`` with every GCS client of this process (and of the subprocesses
    it starts) pointed at the local server, and credential look-ups at a closed local port."""
    import re

    for key, value in gcs_server.env.items():
        monkeypatch.setenv(key, value)
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    return gcs_server.bucket(f"t-{name}-{os.getpid()}")


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> Path:
    """``tw_jax.demo.run_demo`` (the sample world, every pair's DiffSets and Probes, the initial
    snapshot, vocabularies, SSM files), run once per session: a test that needs the demo's data
    copies this folder (``shutil.copytree(demo_data, target)``: the files ``run_demo(target)``
    writes)."""
    from tw_jax.demo import run_demo

    root = tmp_path_factory.mktemp("demo_data")
    run_demo(root)
    return root


@pytest.fixture(scope="session")
def train_data(tmp_path_factory, demo_data) -> dict:
    from twiki_data import build_task_data

    return build_task_data(tmp_path_factory.mktemp("train_data"), demo=demo_data)


@pytest.fixture(scope="session")
def compile_cache() -> Path:
    """The run's persistent XLA cache (see :func:`_session_compile_cache`), for the tests that
    hand it to a subprocess explicitly or point jax back at it."""
    import jax

    folder = os.environ[SESSION_CACHE_ENV]
    jax.config.update("jax_compilation_cache_dir", folder)
    return Path(folder)


@pytest.fixture()
def data_bindings(train_data, compile_cache) -> list[str]:
    """gin bindings that point the tasks at the session's data folder and vocabularies."""
    import tw_jax.tasks

    tw_jax.tasks.register_all(
        train_data["data_dir"], t5_vocab=str(train_data["t5"]), gpt2_vocab=str(train_data["gpt2"])
    )
    return [
        f"DATA_DIR='{train_data['data_dir']}'",
        f"tw_jax.tasks.register_all.t5_vocab='{train_data['t5']}'",
        f"tw_jax.tasks.register_all.gpt2_vocab='{train_data['gpt2']}'",
        "tw_jax.train.train.progress=False",
    ]


# The slowest modules of a full run (seconds of test time, -n 2, measured 2026-11-28 before this
# round of trimming), slowest first. They run first, each file on one worker (pyproject.toml's
# --dist loadfile: its module fixtures are built once), so the run ends on short files and both
# workers finish together instead of one waiting on a long file.
SLOW_MODULES = {
    "tests/train/test_train_smoke.py": 400,
    "tests/t5x/test_t5x_trainers.py": 320,
    "tests/test_demo.py": 220,
    "tests/train/test_aot.py": 175,
    "tests/tasks/test_task_cache.py": 155,
    "tests/train/test_mesh_equality.py": 130,
    "tests/models/test_variants.py": 130,
    "tests/train/test_preemption.py": 120,
    "tests/t5x/test_t5x_models.py": 110,
    "tests/train/test_multihost.py": 60,
    "tests/evaluate/test_one_perplexity.py": 90,
    "tests/evaluate/test_lifelong.py": 100,
    "tests/test_year_boundary.py": 60,
    "tests/models/test_llama_family.py": 60,
    "tests/models/test_gemma_family.py": 45,
    "tests/train/test_open_llm_run.py": 100,
    "tests/lm_eval/test_lm_eval.py": 100,
    "tests/lm_eval/test_lm_eval_run_folder.py": 35,
    "tests/t5x/test_t5x_lifelong.py": 85,
    "tests/evaluate/test_evolvingqa.py": 85,
    "tests/models/test_t5.py": 80,
    "tests/models/test_packing.py": 75,
    "tests/models/test_bart.py": 70,
    "tests/train/test_resume_sigkill.py": 65,
    "tests/faults/test_disk_full.py": 65,
    "tests/preprocess/test_beam_cluster.py": 65,
    "tests/evaluate/test_lifelong_gcs.py": 65,
    "tests/faults/test_resume_mismatch.py": 60,
    "tests/evaluate/test_lifelong_preemption.py": 45,
    "tests/evaluate/test_task_eval.py": 60,
    "tests/test_relative_paths.py": 55,
    "tests/train/test_gcs_pipeline.py": 50,
    "tests/evaluate/test_mixture_eval.py": 50,
    "tests/train/test_third_family.py": 45,
    "tests/train/test_checkpoint_layouts.py": 40,
    "tests/tools/test_bench_gpu.py": 60,
    "tests/tasks/test_model_tokenizer_tasks.py": 25,
    "tests/datasets/test_temporal_wiki.py": 25,
    "tests/train/test_loss_terms.py": 75,
    "tests/train/test_schedule_runs.py": 35,
    "tests/tasks/test_replay.py": 30,
    "tests/lm_eval/test_lm_eval_siblings.py": 35,
}


def pytest_collection_modifyitems(config, items):
    """The slow modules first (see SLOW_MODULES); every other test keeps its place after them.
    A stable sort on the module alone, so the order is the same in every xdist worker."""
    slowest_first = sorted(SLOW_MODULES, key=SLOW_MODULES.__getitem__, reverse=True)
    rank = {module: place for place, module in enumerate(slowest_first)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="module", autouse=True)
def _gin_cleared_after_each_module():
    """gin's configuration is process-wide: a test that runs ``tw-jax train`` in process leaves
    its bindings (a task vocabulary among them) for whatever runs next on the same xdist worker.
    Each test file starts from an empty configuration, whichever file ran before it."""
    yield
    import gin

    gin.clear_config()


@pytest.fixture(scope="module", autouse=True)
def _model_tokenizers_forgotten_after_each_module():
    """A run from a model folder names its tokenizer for the rest of the process
    (``tw_jax.tasks.register_tokenizer``), so later registrations add its ``*_lm_<name>`` tasks;
    each test file starts without the tokenizers an earlier file's runs named."""
    yield
    import sys

    tasks = sys.modules.get("tw_jax.tasks")
    if tasks is not None:
        tasks._named_tokenizers.clear()
