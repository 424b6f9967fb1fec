"""``tw-jax build``: every period of a folder of dumps, from the dumps' own dates.

:mod:`.dumps` finds the Wikipedia and Wikidata dumps by their Wikimedia names and pairs each
Wikipedia snapshot with its Wikidata dump; :mod:`.plan` lays out the stages (the first
snapshot's export, then each consecutive period's DiffSet, Probes and SSM); :mod:`.cli` runs
what is not complete yet, one line per stage.
"""
