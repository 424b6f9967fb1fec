"""Question templates for Wikidata relations: the offline generator's stand-in for an LLM.

:mod:`tw_jax.preprocess.facts.relation_templates` has statement templates
(``[X] was born in [Y] .``), good for cloze probes but not questions. Here each relation of that
table gets a question about its subject whose answer is the object, written by hand in the same
``[X]`` notation; a relation without one gets a question derived from its label, "What is the
{label} of [X]?", which reads well for noun labels ("image", "reference URL") and is marked as
derived. :func:`question` says which kind it used.
"""

from __future__ import annotations

from types import MappingProxyType

from tw_jax.preprocess.facts.relation_templates import TEMPLATES

QUESTIONS = MappingProxyType({
    "P19": "Where was [X] born?",
    "P20": "Where did [X] die?",
    "P279": "What is [X] a subclass of?",
    "P37": "What is the official language of [X]?",
    "P449": "On which network was [X] originally aired?",
    "P47": "Which place shares a border with [X]?",
    "P138": "What is [X] named after?",
    "P364": "What is the original language of [X]?",
    "P527": "What does [X] consist of?",
    "P176": "Who produces [X]?",
    "P27": "What is the country of citizenship of [X]?",
    "P407": "In which language was [X] written?",
    "P30": "On which continent is [X] located?",
    "P178": "Who developed [X]?",
    "P1376": "What is [X] the capital of?",
    "P131": "In which administrative territorial entity is [X] located?",
    "P1412": "Which language does [X] use to communicate?",
    "P17": "In which country is [X] located?",
    "P276": "Where is [X] located?",
    "P937": "Where did [X] work?",
    "P140": "What is the religion of [X]?",
    "P103": "What is the native language of [X]?",
    "P190": "What is a twin city of [X]?",
    "P1001": "To which jurisdiction does [X] apply?",
    "P495": "What is the country of origin of [X]?",
    "P36": "What is the capital of [X]?",
    "P740": "Where was [X] founded?",
    "P361": "What is [X] part of?",
    "P31": "What kind of entity is [X]?",
    "P39": "Which position does [X] hold?",
    "P54": "Which sports team does [X] play for?",
    "P101": "What is the field of work of [X]?",
    "P102": "Which political party is [X] a member of?",
    "P106": "What is the occupation of [X]?",
    "P108": "Who is the employer of [X]?",
    "P127": "Who owns [X]?",
    "P136": "What is the genre of [X]?",
    "P159": "Where is the headquarters of [X]?",
    "P264": "What is the record label of [X]?",
    "P413": "What position does [X] play?",
    "P463": "What is [X] a member of?",
    "P530": "Which country does [X] maintain diplomatic relations with?",
    "P1303": "What instrument does [X] play?",
    "P6": "Who is the head of government of [X]?",
    "P21": "What is the gender of [X]?",
    "P26": "Who is the spouse of [X]?",
    "P35": "Who is the head of state of [X]?",
    "P57": "Who directed [X]?",
    "P69": "Where was [X] educated?",
    "P112": "Who founded [X]?",
    "P115": "What is the home venue of [X]?",
    "P118": "In which league does [X] play?",
    "P161": "Who is a cast member of [X]?",
    "P166": "Which award did [X] receive?",
    "P169": "Who is the chief executive officer of [X]?",
    "P286": "Who is the head coach of [X]?",
    "P452": "In which industry does [X] work?",
    "P569": "When was [X] born?",
    "P570": "When did [X] die?",
    "P571": "When was [X] established?",
    "P577": "When was [X] released?",
    "P580": "When did [X] start?",
    "P582": "When did [X] end?",
    "P585": "When did [X] take place?",
    "P710": "Who participated in [X]?",
    "P856": "What is the official website of [X]?",
    "P1082": "What is the population of [X]?",
    "P1128": "How many employees does [X] have?",
    "P1346": "Who is the winner of [X]?",
    "P1448": "What is the official name of [X]?",
    "P1476": "What is the title of [X]?",
    "P2046": "What is the area of [X]?",
    "P2130": "What is the cost of [X]?",
    "P2139": "What is the total revenue of [X]?",
})
# Relations by English label, for probe files that carry labels only (the published CSVs).
_BY_LABEL = MappingProxyType({t.label: pid for pid, t in TEMPLATES.items()})

WRITTEN, DERIVED = "written", "derived"


def question(subject: str, relation: str, relation_id: str = "") -> tuple[str, str]:
    """(question about ``subject`` whose answer is the object, ``written`` or ``derived``).

    ``relation`` is the relation's label; ``relation_id`` (a Wikidata property id) wins when given.
    """
    pid = relation_id or _BY_LABEL.get(relation, "")
    template = QUESTIONS.get(pid)
    if template is not None:
        return subject.join(template.split("[X]")), WRITTEN
    return f"What is the {relation} of {subject}?", DERIVED
