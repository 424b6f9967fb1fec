"""Salient span masking (SSM) as a preprocessing stage: spaCy NER over DiffSet text, written as
T5 sentinel inputs/targets (``tw-jax ssm``).

CKL and EvolvingQA continue T5's pretraining with REALM's salient span masking: named entities
and dates are masked and become the targets. spaCy is far too slow for tf.data, so this stage
writes the examples once, as text, and the SeqIO task only tokenizes them. Decisions:

* Inputs: ``diffset.jsonl`` and ``full.jsonl`` of a DiffSet folder (``--inputs``), each into its
  own ``{input}.tfrecord-*`` shards; ``stats.json`` last.
* Chunks (:mod:`.chunks`): at most ``--chunk-words`` words (200) of whole sentences.
* Salient spans: every entity spaCy finds whose label is in ``--labels`` (default: all of the
  model's NER labels, DATE included), edge whitespace trimmed.
* Examples (:mod:`.masking`): per chunk, the salient spans are shuffled (seeded by seed, article
  id and chunk index) and cut into groups of ``--spans-per-example`` (1, as REALM and CKL); the
  first ``--examples-per-chunk`` groups (1; 0 for all, so that every span is masked once) each
  give one example. A chunk without a salient span gives none and is counted.
* Format: T5 span corruption, ``inputs = "... <extra_id_0> ..."``,
  ``targets = "<extra_id_0> span <extra_id_1>"``: the closing sentinel marks where the span ends
  (as in T5 and ECBD's ``answer_str``).
* spaCy (:mod:`.pipeline`): loaded by name, only the components entities depend on, batched
  as ``nlp.pipe`` does (:func:`~.pipeline.pipe_docs`, which decodes a lone NER with the GIL held:
  same entities, half the CPU), in forked worker processes (:mod:`.local`) or Beam workers
  (:mod:`.beam`); both write the same bytes.
"""
