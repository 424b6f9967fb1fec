"""Loading spaCy by name, pruned to what NER needs, with the same entities as the whole pipeline."""

import pytest
import spacy.util
from ssm_helpers import read_jsonl

from tw_jax.text.spacy_pipeline import (
    DEFAULT_MODEL,
    FALLBACK_PACKAGE,
    SpacyModelError,
    entity_components,
    load_ner_pipeline,
    resolve_model,
)

LISTENER = {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "tok2vec"}


def config(pipeline: dict[str, dict]) -> dict:
    return {"nlp": {"pipeline": list(pipeline)}, "components": pipeline}


def test_installed_english_pipeline_needs_only_ner():
    _, folder = resolve_model(DEFAULT_MODEL)
    installed = spacy.util.load_config(folder / "config.cfg", interpolate=False)
    assert "parser" in installed["nlp"]["pipeline"]
    # en_core_web_sm's ner embeds its own Tok2Vec rather than listening to the shared one.
    assert entity_components(installed) == ["ner"]


def test_listened_to_components_are_kept():
    shared = config(
        {
            "tok2vec": {"factory": "tok2vec"},
            "tagger": {"factory": "tagger", "model": {"tok2vec": LISTENER}},
            "ner": {"factory": "ner", "model": {"tok2vec": LISTENER}},
            "lemmatizer": {"factory": "lemmatizer"},
        }
    )
    assert entity_components(shared) == ["tok2vec", "ner"]
    anyone = config(
        {
            "transformer": {"factory": "transformer"},
            "parser": {"factory": "parser"},
            "ner": {"factory": "ner", "model": {"tok2vec": {**LISTENER, "upstream": "*"}}},
            "entity_ruler": {"factory": "entity_ruler"},
        }
    )
    assert entity_components(anyone) == ["transformer", "ner", "entity_ruler"]
    assert entity_components(config({"tagger": {"factory": "tagger"}})) == []


def test_default_name_loads_en_core_web_sm_or_its_republished_package():
    nlp, info = load_ner_pipeline()
    expected = DEFAULT_MODEL if spacy.util.is_package(DEFAULT_MODEL) else FALLBACK_PACKAGE
    assert info.source == expected and info.requested == DEFAULT_MODEL
    assert nlp.pipe_names == ["ner"] and info.components == ("ner",)
    assert {"tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer"} <= set(info.excluded)
    assert "DATE" in info.ner_labels and "PERSON" in info.ner_labels
    assert info.ner_labels == tuple(sorted(nlp.get_pipe("ner").labels))


def test_fallback_is_used_only_for_the_default_name(monkeypatch):
    real = spacy.util.is_package
    monkeypatch.setattr(spacy.util, "is_package", lambda name: name != DEFAULT_MODEL and real(name))
    assert resolve_model(DEFAULT_MODEL)[0] == FALLBACK_PACKAGE
    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)
    with pytest.raises(SpacyModelError, match=r"spacy download en_core_web_sm.*spacy-model"):
        resolve_model(DEFAULT_MODEL)


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(SpacyModelError, match=r"'xx_no_such_pipeline' is not installed.*download"):
        load_ner_pipeline("xx_no_such_pipeline")
    with pytest.raises(SpacyModelError, match="no config.cfg"):
        load_ner_pipeline(str(tmp_path))


def test_a_pipeline_folder_loads_by_path():
    _, folder = resolve_model(DEFAULT_MODEL)
    nlp, info = load_ner_pipeline(str(folder))
    assert info.source == str(folder) and nlp.pipe_names == ["ner"]


def test_pruned_pipeline_finds_the_same_entities_as_the_whole_one(ssm_diffset, full_nlp):
    pruned, _ = load_ner_pipeline()
    texts = [r["text"] for r in read_jsonl(ssm_diffset / "diffset.jsonl")]
    texts += [r["text"] for r in read_jsonl(ssm_diffset / "full.jsonl")[:40]]

    def entities(docs):
        return [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in docs]

    whole = entities(full_nlp(t) for t in texts)
    assert sum(map(len, whole)) > 300
    assert {label for doc in whole for *_, label in doc} >= {"DATE", "PERSON", "GPE", "ORG"}
    assert entities(pruned.pipe(texts, batch_size=16)) == whole


def test_pipe_docs_decodes_the_lone_ner_itself_with_the_same_entities_as_nlp_pipe(ssm_diffset):
    from tw_jax.preprocess.ssm.chunks import chunk_spans
    from tw_jax.text.spacy_pipeline import _greedy_ner, pipe_docs

    nlp, _ = load_ner_pipeline()
    assert _greedy_ner(nlp) is nlp.get_pipe("ner")  # the fast path is taken
    articles = [
        r["text"] for name in ("diffset", "full") for r in read_jsonl(ssm_diffset / f"{name}.jsonl")
    ]
    chunks = [text[s:e] for text in articles for s, e in chunk_spans(text, 60)]
    edge_cases = [
        "",
        " ",
        "\n\n",
        "Paris",
        "Barack Obama visited Paris on 4 May 2001.\n\nThen he left.",
    ]
    texts = edge_cases + articles[:60] + chunks[:400] + edge_cases

    def annotations(docs):
        return [
            (
                doc.text,
                [(e.start_char, e.end_char, e.label_) for e in doc.ents],
                [(t.ent_iob_, t.ent_type_) for t in doc],
            )
            for doc in docs
        ]

    expected = annotations(nlp.pipe(texts, batch_size=128))
    assert sum(len(ents) for _, ents, _ in expected) > 500
    for batch_size in (1, 7, 128):
        assert annotations(pipe_docs(nlp, iter(texts), batch_size)) == expected
    assert list(pipe_docs(nlp, [], 128)) == []


def test_pipe_docs_falls_back_to_nlp_pipe_for_other_pipelines(full_nlp):
    from tw_jax.text.spacy_pipeline import _greedy_ner, pipe_docs

    assert _greedy_ner(full_nlp) is None  # more than the ner
    texts = ["Barack Obama was born in Honolulu on 4 August 1961.", "", "Paris"]
    docs = list(pipe_docs(full_nlp, texts, 2))
    assert [d.text for d in docs] == texts
    assert [(e.text, e.label_) for e in docs[0].ents] == [
        (e.text, e.label_) for e in full_nlp(texts[0]).ents
    ]
    assert docs[0].has_annotation("DEP")  # the whole pipeline ran


def test_keep_freed_memory_sets_glibc_thresholds():
    import sys

    from tw_jax.preprocess.ssm.local import keep_freed_memory

    applied = keep_freed_memory()
    assert isinstance(applied, bool)
    if sys.platform.startswith("linux"):
        import platform

        assert applied == (platform.libc_ver()[0] == "glibc")
