"""DPR's dense retriever in JAX: BERT encoders on the mesh and exact maximum inner product search.

EvolvingQA's retrieval baseline is DPR (Karpukhin et al., 2020), "which encodes passages into
dense representations and retrieves context representations closest to the question
representations" (EvolvingQA, Section 3.1). DPR scores a passage by the inner product of the two
encoders' outputs, "sim(q, p) = E_Q(q)^T E_P(p)" (Karpukhin et al. 2020, Section 3.1, Eq. 1),
each output being the [CLS] representation of a BERT (:mod:`tw_jax.retrieval.bert`).

Encoding, as DPR's reference code does it (``generate_dense_embeddings.py`` and
``BertTensorizer``): a passage is its title and text as a WordPiece *pair*, ``[CLS] title [SEP]
text [SEP]`` ("each passage is also prepended with the title of the Wikipedia article where
the passage is from, along with an [SEP] token", Karpukhin et al. 2020, Section 4.1), a question
is ``[CLS] question [SEP]``; both truncated to ``max_length`` = 256 tokens (the reference's
``sequence_length``). The reference feeds all-zero segment ids to the encoders
(``ctx_seg_batch = torch.zeros_like(ctx_ids_batch)``), as does Hugging Face's DPR usage, which
passes no ``token_type_ids``: that is ``segment_ids="zeros"`` (the default); ``"pair"`` feeds the
tokenizer's pair segment ids (1 on the text) instead.

Where it runs: texts are tokenised, sorted by length, and encoded in fixed-shape batches
(``batch_size`` rows, padded to the smallest of a few bucketed lengths), one jitted function per
bucket, with the batch sharded over the mesh's data axes and the parameters laid out by the
logical rules of :mod:`tw_jax.models.sharding`; a 1-device CPU mesh runs the same code.

Search is exact: the question embeddings (replicated) times the passage embedding matrix (rows
sharded over every device of the mesh) in float32 at full precision, ``jax.lax.top_k`` on each
device's rows, the per-device winners gathered and reduced to the global top ``k``; the matrix is
visited in chunks of ``search_chunk`` rows with a running top ``k``. The chunks stay on the
devices between searches when they fit :func:`resident_budget` (a quarter of each accelerator's
memory); a larger matrix is streamed to them chunk by chunk, so it need not fit at all. Equal scores go to the lower passage position, whatever the mesh. Exact search
costs a full pass over the matrix per question batch: fine for EvolvingQA's snapshots (hundreds
of thousands of passages) and for a few tens of millions on accelerators; at hundreds of millions
of passages (all of Wikipedia at finer granularity, or memory beyond the hosts') an approximate
index (FAISS's IVF/HNSW or ScaNN, as DPR itself uses FAISS) would take over, at the price of
recall, which we do not pay here.

Storage: ``save`` writes ``embeddings.npy`` (float32, one row per passage) and ``dpr.json``
(last: settings, the encoder folders and the fingerprint); encoders that live only in memory
(:meth:`DenseRetriever.random`) are written as Hugging Face DPR folders next to them. ``load``
refuses an index whose encoders no longer hash to what it was built with.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import math
from collections.abc import Iterator, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tw_jax.errors import DumpError, UsageError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, write_json
from tw_jax.models import sharding
from tw_jax.retrieval.base import (
    Passage,
    Retriever,
    read_index_settings,
    register_retriever,
)
from tw_jax.retrieval.bert import BertConfig, BertEncoder, init_params
from tw_jax.retrieval.bert_io import (
    Encoded,
    WordPieceTokenizer,
    load_bert_encoder,
    save_bert_encoder,
)

FORMAT = 1
SETTINGS_FILE = "dpr.json"
EMBEDDINGS_FILE = "embeddings.npy"
SEGMENT_IDS = ("zeros", "pair")
_SIDES = {"question": "question_encoder", "ctx": "ctx_encoder"}


@dataclasses.dataclass
class _Encoder:
    """One side of DPR: a BERT encoder's config and weights, its tokenizer, where it came from."""

    config: BertConfig
    params: Any
    tokenizer: WordPieceTokenizer
    folder: str | None  # None: made in memory (saved into the index folder)
    weights: str = ""  # sha256 of the weights (shapes and bytes), see :func:`_weights_hash`

    def __post_init__(self) -> None:
        if not self.weights:
            self.weights = _weights_hash(self.params)


def _weights_hash(params: Any) -> str:
    """sha256 over every weight's path, shape, dtype and bytes: what makes two encoders equal."""
    digest = hashlib.sha256()
    for path, leaf in sorted(jax.tree_util.tree_flatten_with_path(params)[0],
                             key=lambda item: jax.tree_util.keystr(item[0])):
        array = np.ascontiguousarray(np.asarray(leaf))
        digest.update(f"{jax.tree_util.keystr(path)}|{array.shape}|{array.dtype}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _divisible(placement: NamedSharding, leaf: Any) -> NamedSharding:
    """``placement`` with the mesh axes dropped from every dimension they do not divide evenly
    (BERT's vocabulary of 30522 rows over 4 ``model`` devices): that dimension is replicated."""
    mesh, spec = placement.mesh, list(placement.spec)
    for dim, axes in enumerate(spec):
        names = axes if isinstance(axes, tuple) else (axes,)
        size = math.prod(int(mesh.shape[name]) for name in names if name is not None)
        if leaf.shape[dim] % size:
            spec[dim] = None
    return NamedSharding(mesh, PartitionSpec(*spec))


def _buckets(max_length: int, smallest: int = 16) -> tuple[int, ...]:
    """Padded lengths: powers of two from ``smallest`` below ``max_length``, then ``max_length``."""
    lengths, length = [], smallest
    while length < max_length:
        lengths.append(length)
        length *= 2
    return (*lengths, max_length)


def _top_k_step(
    run_scores: jax.Array, run_ids: jax.Array, questions: jax.Array, chunk: jax.Array,
    offset: jax.Array, total: jax.Array, *, k: int, mesh: Mesh,
) -> tuple[jax.Array, jax.Array]:
    """Merge one chunk of passage rows (sharded over every mesh axis) into the running top ``k``.

    Each device scores the questions against its own rows and keeps its best ``k``; the winners
    of all devices are gathered (device order = position order) and reduced with the running
    best, which holds earlier (lower) positions: ``top_k`` keeps the first of equal scores, so
    ties go to the lower position on any mesh.
    """
    axes = mesh.axis_names
    rows_here = chunk.shape[0] // math.prod(mesh.devices.shape)
    keep = min(k, rows_here)

    def local(q: jax.Array, p: jax.Array, start: jax.Array, n: jax.Array) -> tuple[jax.Array, ...]:
        scores = jnp.einsum("qd,pd->qp", q, p, precision=jax.lax.Precision.HIGHEST,
                            preferred_element_type=jnp.float32)
        ids = start + jax.lax.axis_index(axes) * rows_here + jnp.arange(rows_here)
        scores = jnp.where(ids[None, :] < n, scores, -jnp.inf)
        best, where = jax.lax.top_k(scores, keep)
        return (jax.lax.all_gather(best, axes, axis=1, tiled=True),
                jax.lax.all_gather(ids[where], axes, axis=1, tiled=True))

    spread = jax.shard_map(local, mesh=mesh, in_specs=(PartitionSpec(), PartitionSpec(axes),
                                                      PartitionSpec(), PartitionSpec()),
                           out_specs=(PartitionSpec(), PartitionSpec()), check_vma=False)
    scores, ids = spread(questions, chunk, offset, total)
    scores = jnp.concatenate([run_scores, scores], axis=1)
    ids = jnp.concatenate([run_ids, ids], axis=1)
    best, where = jax.lax.top_k(scores, k)
    return best, jnp.take_along_axis(ids, where, axis=1)


# One jitted step for every searcher (compiled once per shape, k and mesh); the running top-k
# buffers are donated, as each step replaces them.
_STEP = jax.jit(_top_k_step, static_argnames=("k", "mesh"), donate_argnums=(0, 1))


@functools.lru_cache(maxsize=16)
def _apply_fn(config: BertConfig) -> Any:
    """The jitted encoder of ``config``, shared by every retriever (compiled once per bucket)."""
    model = BertEncoder(config)

    def apply(params: Any, ids: jax.Array, mask: jax.Array, types: jax.Array) -> jax.Array:
        return model.apply({"params": params}, ids, mask, types)

    return jax.jit(apply)


def exact_top_k(
    questions: np.ndarray, passages: np.ndarray, k: int, mesh: Mesh | None = None,
    chunk_rows: int = 1 << 18, resident_bytes: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, positions)``, each ``(questions, min(k, passages))``: the passages of largest
    inner product with each question, best first, ties to the lower position; exact, on
    ``mesh`` (default: every device, data-parallel), ``chunk_rows`` passage rows at a time.
    ``resident_bytes``: see :func:`resident_budget` (None: that default)."""
    searcher = _Searcher(np.asarray(passages, np.float32), mesh or sharding.make_mesh(),
                         chunk_rows, resident_bytes)
    return searcher.search(np.asarray(questions, np.float32), k)


CPU_RESIDENT_BYTES = 4 << 30


def resident_budget(mesh: Mesh) -> int:
    """How many bytes of the passage matrix each device may keep between searches: a quarter
    of its memory where the runtime reports it (GPU, TPU), else 4 GiB (a CPU "device" is host
    memory, which the matrix already takes once). A matrix within it is uploaded once; a larger
    one is streamed chunk by chunk for every question batch."""
    try:
        stats = mesh.devices.flat[0].memory_stats() or {}
    except (AttributeError, NotImplementedError, RuntimeError):  # backends without the query
        stats = {}
    limit = stats.get("bytes_limit")
    return int(limit) // 4 if limit else CPU_RESIDENT_BYTES


class _Searcher:
    """The passage matrix on the mesh, in fixed-size chunks, and the jitted top-k step."""

    def __init__(self, passages: np.ndarray, mesh: Mesh, chunk_rows: int,
                 resident_bytes: int | None = None) -> None:
        if passages.ndim != 2 or not passages.shape[0]:
            raise ValueError(f"passage embeddings must be a non-empty matrix, got {passages.shape}")
        self.mesh, self.matrix = mesh, passages
        devices = math.prod(mesh.devices.shape)
        rows = min(max(chunk_rows, 1), passages.shape[0])
        self.chunk = -(-rows // devices) * devices
        self.sharded = NamedSharding(mesh, PartitionSpec(mesh.axis_names))
        self.replicated = sharding.replicated(mesh)
        # The chunks stay on the devices between searches when they fit the budget: uploading
        # them again for every question batch costs more than the search (on one H200, 300,000
        # BERT-base passages streamed: 616 questions/s; kept: 7,396).
        chunks = -(-passages.shape[0] // self.chunk)
        per_device = chunks * self.chunk * passages.shape[1] * 4 // devices
        budget = resident_budget(mesh) if resident_bytes is None else resident_bytes
        self._resident = list(self._chunks()) if per_device <= budget else None

    def _chunks(self) -> Iterator[jax.Array]:
        for start in range(0, self.matrix.shape[0], self.chunk):
            block = self.matrix[start:start + self.chunk]
            if block.shape[0] < self.chunk:
                pad = np.zeros((self.chunk - block.shape[0], block.shape[1]), np.float32)
                block = np.concatenate([block, pad])
            yield jax.device_put(block, self.sharded)

    def search(self, questions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if questions.ndim != 2 or questions.shape[1] != self.matrix.shape[1]:
            raise ValueError(f"question embeddings {questions.shape} do not match passage "
                             f"embeddings of dimension {self.matrix.shape[1]}")
        k = min(int(k), self.matrix.shape[0])
        if k <= 0 or not questions.shape[0]:
            return (np.zeros((questions.shape[0], 0), np.float32),
                    np.zeros((questions.shape[0], 0), np.int64))
        chunks = self._resident if self._resident is not None else self._chunks()
        total = jnp.asarray(self.matrix.shape[0], jnp.int32)
        with sharding.activate(self.mesh):
            q = jax.device_put(questions, self.replicated)
            scores = jax.device_put(np.full((len(questions), k), -np.inf, np.float32),
                                    self.replicated)
            ids = jax.device_put(np.full((len(questions), k), -1, np.int32), self.replicated)
            for n, chunk in enumerate(chunks):
                offset = jnp.asarray(n * self.chunk, jnp.int32)
                scores, ids = _STEP(scores, ids, q, chunk, offset, total, k=k, mesh=self.mesh)
        return np.asarray(scores), np.asarray(ids).astype(np.int64)


@register_retriever
class DenseRetriever(Retriever):
    """DPR: a question encoder and a context encoder (Hugging Face DPR folders), exact search.

    Settings (keyword only): ``max_length`` tokens per text (256, DPR's), ``segment_ids``
    (``zeros`` as DPR's reference code, or ``pair``), ``dtype`` of the encoders' compute
    (``bfloat16`` on accelerators), ``batch_size`` texts per encoder step, ``search_chunk``
    passage rows per search step, ``question_batch`` questions per search step; ``mesh``
    (default: every device, data-parallel). See the module docstring.
    """

    name = "dpr"

    def __init__(
        self, *, question_encoder: str | None = None, ctx_encoder: str | None = None,
        max_length: int = 256, segment_ids: str = "zeros", dtype: str = "float32",
        batch_size: int = 64, search_chunk: int = 1 << 18, question_batch: int = 256,
        mesh: Mesh | None = None, _encoders: dict[str, _Encoder] | None = None,
    ) -> None:
        if segment_ids not in SEGMENT_IDS:
            raise UsageError(f"DPR segment_ids {segment_ids!r}: choose from "
                             f"{', '.join(SEGMENT_IDS)}")
        if min(max_length, batch_size, search_chunk, question_batch) <= 0:
            raise UsageError("DPR max_length, batch_size, search_chunk and question_batch must "
                             "be positive")
        self.max_length, self.segment_ids, self.dtype = int(max_length), segment_ids, dtype
        self.batch_size, self.search_chunk = int(batch_size), int(search_chunk)
        self.question_batch = int(question_batch)
        self.mesh = mesh or sharding.make_mesh()
        if _encoders is None:
            folders = {"question": question_encoder, "ctx": ctx_encoder}
            missing = [f"{side}_encoder" for side, f in folders.items() if f is None]
            if missing:
                raise UsageError(f"DPR needs {' and '.join(missing)}: a Hugging Face DPR "
                                 "encoder folder (config.json, model.safetensors, vocab.txt)")
            _encoders = {side: self._load_encoder(folder, side)
                         for side, folder in folders.items()}
        self.encoders = _encoders
        for side, encoder in self.encoders.items():
            if encoder.config.max_position_embeddings < self.max_length:
                raise UsageError(f"DPR max_length={self.max_length} exceeds the {side} encoder's "
                                 f"max_position_embeddings={encoder.config.max_position_embeddings}")
        dims = {side: e.config.embedding_dim for side, e in self.encoders.items()}
        if len(set(dims.values())) != 1:
            raise UsageError(f"DPR encoders embed into different sizes: {dims}")
        self.dim = dims["ctx"]
        self._placed: dict[str, Any] = {}
        self._embeddings: np.ndarray | None = None
        self._searcher: _Searcher | None = None

    def _load_encoder(self, folder: str, side: str) -> _Encoder:
        config, params, _ = load_bert_encoder(folder, side, dtype=self.dtype)
        tokenizer = WordPieceTokenizer.from_folder(folder, self.max_length)
        return _Encoder(config, params, tokenizer, paths.resolve(folder))

    @classmethod
    def random(cls, seed: int, config: BertConfig, vocab: Sequence[str] | str,
               **settings: Any) -> DenseRetriever:
        """A retriever with freshly initialised encoders (question: ``seed``, context:
        ``seed + 1``) over the tokens ``vocab`` (or a ``vocab.txt`` file): for tests and
        benchmarks. ``settings`` as the constructor's."""
        if isinstance(vocab, str):
            tokens = paths.read_text(vocab).replace("\r\n", "\n").split("\n")
            vocab = tokens[:-1] if tokens and not tokens[-1] else tokens
        max_length = settings.get("max_length", 256)
        config = dataclasses.replace(config, dtype=settings.get("dtype", config.dtype))
        settings["dtype"] = config.dtype
        encoders = {
            side: _Encoder(config, init_params(config, seed + n),
                           WordPieceTokenizer.from_vocab(vocab, max_length), None)
            for n, side in enumerate(("question", "ctx"))
        }
        return cls(_encoders=encoders, **settings)

    def settings(self) -> dict[str, Any]:
        return {"max_length": self.max_length, "segment_ids": self.segment_ids,
                "dtype": self.dtype,
                "question_weights": self.encoders["question"].weights,
                "ctx_weights": self.encoders["ctx"].weights,
                "question_tokenizer": self.encoders["question"].tokenizer.fingerprint(),
                "ctx_tokenizer": self.encoders["ctx"].tokenizer.fingerprint()}

    # --- encoding ------------------------------------------------------------------------------

    def _params(self, side: str) -> Any:
        if side not in self._placed:
            encoder = self.encoders[side]
            model = BertEncoder(encoder.config)
            abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2), jnp.int32))
            shardings = jax.tree.map(_divisible, sharding.mesh_shardings(abstract, self.mesh),
                                     nn.unbox(abstract))["params"]
            with sharding.activate(self.mesh):
                self._placed[side] = jax.device_put(encoder.params, shardings)
        return self._placed[side]

    def _encode(self, side: str, encoded: Encoded) -> np.ndarray:
        """Float32 embeddings ``(texts, dim)`` of tokenised texts, in the texts' order."""
        params = self._params(side)
        apply = _apply_fn(self.encoders[side].config)
        lengths = np.asarray([len(ids) for ids in encoded.ids])
        out = np.zeros((len(lengths), self.dim), np.float32)
        rows = sharding.padded_rows(self.batch_size, self.mesh)
        buckets = np.asarray(_buckets(self.max_length))
        which = np.searchsorted(buckets, lengths)  # the smallest bucket that holds each text
        pair = side == "ctx" and self.segment_ids == "pair"
        with sharding.activate(self.mesh):
            for b, length in enumerate(buckets):
                members = np.flatnonzero(which == b)
                members = members[np.argsort(lengths[members], kind="stable")]
                for start in range(0, len(members), rows):
                    batch = members[start:start + rows]
                    ids = np.zeros((rows, length), np.int32)
                    types = np.zeros((rows, length), np.int32)
                    mask = np.zeros((rows, length), np.int32)
                    for row, index in enumerate(batch):
                        n = lengths[index]
                        ids[row, :n] = encoded.ids[index]
                        mask[row, :n] = 1
                        if pair:
                            types[row, :n] = encoded.type_ids[index]
                    placed = sharding.global_batch({"ids": ids, "mask": mask, "types": types},
                                                   self.mesh)
                    vectors = apply(params, placed["ids"], placed["mask"], placed["types"])
                    out[batch] = np.asarray(vectors)[:len(batch)]
        return out

    def encode_passages(self, passages: Sequence[Passage]) -> np.ndarray:
        """Context-encoder embeddings ``(passages, dim)``: title and text as a pair."""
        tokenizer = self.encoders["ctx"].tokenizer
        encoded = tokenizer.encode([p.text for p in passages], [p.title for p in passages])
        return self._encode("ctx", encoded)

    def encode_questions(self, questions: Sequence[str]) -> np.ndarray:
        """Question-encoder embeddings ``(questions, dim)``."""
        return self._encode("question", self.encoders["question"].tokenizer.encode(questions))

    # --- the Retriever interface ----------------------------------------------------------------

    def build(self, passages: Sequence[Passage]) -> None:
        if not passages:
            raise UsageError("DPR: no passages to index")
        self._set_embeddings(self.encode_passages(passages))

    def _set_embeddings(self, embeddings: np.ndarray) -> None:
        self._embeddings = embeddings
        self._searcher = _Searcher(embeddings, self.mesh, self.search_chunk)

    @property
    def embeddings(self) -> np.ndarray:
        """The passage embedding matrix ``(passages, dim)`` of the index."""
        if self._embeddings is None:
            raise UsageError("DPR: build() or load() an index before searching")
        return self._embeddings

    @property
    def num_passages(self) -> int:
        return 0 if self._embeddings is None else len(self._embeddings)

    def search(self, questions: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        if self._searcher is None:
            raise UsageError("DPR: build() or load() an index before searching")
        if isinstance(questions, str):
            raise TypeError("search takes a sequence of questions, not one string")
        results: list[list[tuple[int, float]]] = []
        for start in range(0, len(questions), self.question_batch):
            block = list(questions[start:start + self.question_batch])
            vectors = self.encode_questions(block)
            padded = np.zeros((self.question_batch, self.dim), np.float32)
            padded[:len(block)] = vectors  # one shape for every block: one compilation
            scores, ids = self._searcher.search(padded, k)
            results.extend(
                [(int(i), float(s)) for i, s in zip(ids[row], scores[row], strict=True)]
                for row in range(len(block)))
        return results

    def save(self, folder: str) -> None:
        embeddings = self.embeddings
        paths.makedirs(folder)
        encoders = {}
        for side, encoder in self.encoders.items():
            where = encoder.folder
            if where is None:  # in memory: written into the index folder as a DPR folder
                where = _SIDES[side]
                save_bert_encoder(paths.join(folder, where), encoder.config, encoder.params,
                                  side, encoder.tokenizer)
            encoders[side] = {"folder": where, "relative": encoder.folder is None,
                              "weights": encoder.weights}
        with atomic_open(paths.join(folder, EMBEDDINGS_FILE), "wb") as handle:
            np.save(handle, embeddings, allow_pickle=False)
        settings = {"max_length": self.max_length, "segment_ids": self.segment_ids,
                    "dtype": self.dtype, "batch_size": self.batch_size,
                    "search_chunk": self.search_chunk, "question_batch": self.question_batch}
        write_json(paths.join(folder, SETTINGS_FILE), {  # last: the folder is whole once it is
            "format": FORMAT, "retriever": self.name, "settings": settings,
            "encoders": encoders, "num_passages": int(len(embeddings)), "dim": self.dim,
            "fingerprint": self.fingerprint()})

    @classmethod
    def load(cls, folder: str, mesh: Mesh | None = None) -> DenseRetriever:
        path = paths.join(folder, SETTINGS_FILE)
        meta = read_index_settings(folder, SETTINGS_FILE, FORMAT, "DPR")
        try:
            folders = {side: (paths.join(folder, e["folder"]) if e["relative"] else e["folder"])
                       for side, e in meta["encoders"].items()}
            retriever = cls(question_encoder=folders["question"], ctx_encoder=folders["ctx"],
                            mesh=mesh, **meta["settings"])
            count, dim, fingerprint = int(meta["num_passages"]), int(meta["dim"]), meta["fingerprint"]
        except (KeyError, TypeError) as error:
            raise DumpError(path, None, f"not a DPR index of format {FORMAT} ({error!r})") from None
        if retriever.fingerprint() != fingerprint:
            changed = [f"{side}_encoder ({folders[side]})" for side, e in meta["encoders"].items()
                       if retriever.encoders[side].weights != e.get("weights")]
            raise DumpError(path, None, "the index was built with other encoder weights or "
                            f"settings ({', '.join(changed) or 'settings'} changed): rebuild it")
        embeddings_path = paths.join(folder, EMBEDDINGS_FILE)
        if not paths.exists(embeddings_path):
            raise DumpError(embeddings_path, None, "missing from the DPR index")
        try:
            embeddings = np.load(io.BytesIO(paths.read_bytes(embeddings_path)), allow_pickle=False)
        except ValueError as error:
            raise DumpError(embeddings_path, None, f"not a numpy array file ({error})") from None
        if embeddings.shape != (count, dim) or embeddings.dtype != np.float32:
            raise DumpError(embeddings_path, None, f"holds {embeddings.dtype} {embeddings.shape}; "
                            f"{SETTINGS_FILE} says float32 ({count}, {dim})")
        retriever._set_embeddings(embeddings)
        return retriever

