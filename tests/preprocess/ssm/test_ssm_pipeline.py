"""Loading spaCy by name, pruned to what NER needs, with the same entities as the whole pipeline."""

import pytest
import spacy.util
from ssm_helpers import read_jsonl

from tw_jax.preprocess.ssm.pipeline import (
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
