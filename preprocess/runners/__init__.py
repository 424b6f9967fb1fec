"""What every stage shares to run and to report, whichever benchmark it builds.

A stage runs in a local process pool or as a Beam pipeline on any runner, takes the same
command-line options either way, and accounts for every input record in its ``stats.json``
(the readers of ``dumps`` count their skips into the same ledger). Keeping that plumbing here
keeps each benchmark's package about its own algorithm.
"""
