"""Text helpers every layer may use: answer normalisation (SQuAD) and the spaCy NER pipeline."""
