"""Salient span masking (SSM) as a preprocessing stage: spaCy NER over DiffSet text, written as T5 sentinel inputs/targets."""
