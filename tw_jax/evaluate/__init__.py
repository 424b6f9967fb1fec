"""Evaluation of monthly updates: probe perplexity, proper-noun perplexity, EM/F1, rank classification, FUAR, reports."""
