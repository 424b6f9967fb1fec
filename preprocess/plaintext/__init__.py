"""The plain text every stage reads: docs/plaintext.md's rules, from wikitext to sentences.

DiffSets, probe articles, ECBD and EvolvingQA contexts and the sample world's ground truth must
all see an article as the same paragraphs and sentences, or an edit shows in one and not in the
other. So the rules are implemented once, here: the wikitext renderer with the templates,
quantities and word lists it uses, the sentence splitter, and the audit that measures both on a
real dump.
"""
