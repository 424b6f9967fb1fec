"""Wikidata facts in English words: entity labels, printed values, relation templates.

TemporalWiki's probes, CKL's InvariantLAMA clozes and EvolvingQA's questions each state a
(subject, relation, object) fact as text, and they must word the same fact alike (and as the
sample world's ground truth does), so the wording is shared here rather than owned by one
benchmark.
"""
