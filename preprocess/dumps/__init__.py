"""Readers of the raw inputs: Wikipedia and Wikidata dumps, and the benchmarks' released files.

A reader turns files that others wrote into records, and stops there. Inputs are large, damaged
now and then and often misnamed, so every reader here keeps the same discipline: it streams, it
tells a format by its bytes rather than its name, and each record is handed on, counted as a
skip with its reason, or stops the run with a DumpError that names the file and the place. What
a benchmark then does with the records belongs to that benchmark's package.
"""
