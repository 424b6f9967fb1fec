"""TWiki-DiffSets: what changed between two Wikipedia snapshots (TemporalWiki Algorithm 1)."""
