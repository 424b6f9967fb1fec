"""Vocabularies and text transforms shared by tasks, preprocessing and evaluation."""
