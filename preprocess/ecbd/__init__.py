"""Entity Cloze By Date (ECBD, Onoe et al. 2022): the builder, from a Wikidata and a Wikipedia dump.

ECBD asks a model to fill masked spans in sentences about entities indexed by the year they came
into being, so one can compare entities a model may have seen in pretraining with ones it cannot
have. The stage follows the paper's three steps:

1. entity mining (:mod:`.entities`): items whose first origination date (P580, P571, P585, P575,
   P6949, P9448, in that order) falls in the requested years and that have an English article;
2. sentence collection (:mod:`.sentences`): articles of at least ``min_words`` words, the first
   paragraph as the definition, later sentences of at least 5 words that mention the entity (label,
   article title or alias, on word boundaries, not inside quotes);
3. span selection (:mod:`.spans`): spaCy noun phrases of at most 5 tokens and random spans of 1 to 5
   words, both after the mention and starting within 10 words of it, at most 100 per entity.

:mod:`.build` ties them together and writes the released layout (``{subset}/np_spans_{split}.json``
and ``random_spans_{split}.json``, JSON lines), split into dev and test by entity.
"""

from tw_jax.preprocess.ecbd.entities import ORIGINATION_PROPERTIES, OriginEntity, parse_years

__all__ = ["ORIGINATION_PROPERTIES", "OriginEntity", "parse_years"]
