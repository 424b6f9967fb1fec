"""TWiki-Probes: categorised Wikidata facts aligned with Wikipedia (TemporalWiki §3.2-3.3)."""
