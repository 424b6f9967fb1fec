"""Fixed vocabulary of the sample world: Wikidata properties, the real items it uses, and the
default world's months.

Property ids and English labels are Wikidata's own, so code written against the sample runs
unchanged on real dumps. Real item ids are used only for the handful of well-known classes,
units and occupations; every invented item gets an id from Q100000001 upward.
"""

from __future__ import annotations

from .span import DEFAULT_SPAN

# The default world's calendar (``span.DEFAULT_SPAN``; a world of another span has its own).
MONTHS: tuple[str, ...] = tuple(s.iso for s in DEFAULT_SPAN.snapshots)
DUMP_DATES: tuple[str, ...] = tuple(s.dump for s in DEFAULT_SPAN.snapshots)
PAIRS: tuple[str, ...] = tuple(p.name for p in DEFAULT_SPAN.periods)
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]

FIRST_SYNTHETIC_QID = 100000001
CALENDAR = "http://www.wikidata.org/entity/Q1985727"
ENTITY_URI = "http://www.wikidata.org/entity/"

# pid -> (English label, datatype)
PROPERTIES: dict[str, tuple[str, str]] = {
    "P6": ("head of government", "wikibase-item"),
    "P17": ("country", "wikibase-item"),
    "P18": ("image", "commonsMedia"),
    "P19": ("place of birth", "wikibase-item"),
    "P21": ("sex or gender", "wikibase-item"),
    "P26": ("spouse", "wikibase-item"),
    "P27": ("country of citizenship", "wikibase-item"),
    "P31": ("instance of", "wikibase-item"),
    "P35": ("head of state", "wikibase-item"),
    "P36": ("capital", "wikibase-item"),
    "P39": ("position held", "wikibase-item"),
    "P54": ("member of sports team", "wikibase-item"),
    "P57": ("director", "wikibase-item"),
    "P69": ("educated at", "wikibase-item"),
    "P102": ("member of political party", "wikibase-item"),
    "P106": ("occupation", "wikibase-item"),
    "P108": ("employer", "wikibase-item"),
    "P112": ("founded by", "wikibase-item"),
    "P115": ("home venue", "wikibase-item"),
    "P118": ("league", "wikibase-item"),
    "P131": ("located in the administrative territorial entity", "wikibase-item"),
    "P136": ("genre", "wikibase-item"),
    "P159": ("headquarters location", "wikibase-item"),
    "P161": ("cast member", "wikibase-item"),
    "P166": ("award received", "wikibase-item"),
    "P169": ("chief executive officer", "wikibase-item"),
    "P276": ("location", "wikibase-item"),
    "P279": ("subclass of", "wikibase-item"),
    "P286": ("head coach", "wikibase-item"),
    "P413": ("position played on team / speciality", "wikibase-item"),
    "P452": ("industry", "wikibase-item"),
    "P495": ("country of origin", "wikibase-item"),
    "P569": ("date of birth", "time"),
    "P571": ("inception", "time"),
    "P577": ("publication date", "time"),
    "P580": ("start time", "time"),
    "P582": ("end time", "time"),
    "P585": ("point in time", "time"),
    "P710": ("participant", "wikibase-item"),
    "P854": ("reference URL", "url"),
    "P856": ("official website", "url"),
    "P1082": ("population", "quantity"),
    "P1128": ("employees", "quantity"),
    "P1346": ("winner", "wikibase-item"),
    "P1448": ("official name", "monolingualtext"),
    "P1476": ("title", "monolingualtext"),
    "P2046": ("area", "quantity"),
    "P2130": ("cost", "quantity"),
    "P2139": ("total revenue", "quantity"),
}

PROPERTY_DESCRIPTIONS: dict[str, str] = {
    "P31": "that class of which this subject is a particular example and member",
    "P54": "sports teams or clubs that the subject represents or represented",
    "P1082": "number of people inhabiting the place",
    "P569": "date on which the subject was born",
    "P166": "award or recognition received by a person, organization or creative work",
}

# Real Wikidata items the sample refers to: qid -> (label, description)
REAL_ITEMS: dict[str, tuple[str, str]] = {
    "Q5": ("human", "common name of Homo sapiens, unique extant species of the genus Homo"),
    "Q515": ("city", "large and permanent human settlement"),
    "Q6256": ("country", "distinct territorial body or political entity"),
    "Q11424": ("film", "sequence of images that give the impression of movement"),
    "Q4830453": ("business", "organization undertaking commercial, industrial, or professional activity"),
    "Q476028": ("association football club", "sports club devoted to association football"),
    "Q712226": ("square kilometre", "unit of area"),
    "Q4917": ("United States dollar", "currency of the United States of America"),
    "Q6581097": ("male", "to be used in sex or gender"),
    "Q6581072": ("female", "to be used in sex or gender"),
    "Q937857": ("association football player", "person who plays association football"),
    "Q82955": ("politician", "person involved in politics"),
    "Q43845": ("businessperson", "person involved in activities for the purpose of generating revenue"),
    "Q33999": ("actor", "person who acts in a dramatic or comic production"),
    "Q2526255": ("film director", "person who directs a film"),
    "Q130232": ("drama film", "film genre"),
    "Q157443": ("comedy film", "film genre"),
    "Q188473": ("action film", "film genre"),
}

MAIN_KINDS: tuple[str, ...] = (
    "footballer", "coach", "politician", "business", "actor",
    "club", "company", "city", "film", "event",
)
# Share of each main kind among the requested number of main entities.
KIND_SHARES: dict[str, float] = {
    "footballer": 0.17, "coach": 0.05, "politician": 0.12, "business": 0.08, "actor": 0.09,
    "club": 0.10, "company": 0.10, "city": 0.13, "film": 0.10, "event": 0.06,
}
PERSON_KINDS = frozenset({"footballer", "coach", "politician", "business", "actor"})
# How a renamed title is disambiguated, by kind.
DISAMBIGUATION: dict[str, str] = {
    "footballer": "footballer", "coach": "football manager", "politician": "politician",
    "business": "businessperson", "actor": "actor", "club": "football club",
    "company": "company", "city": "city", "film": "film", "event": "tournament",
    "country": "country",
}

SITEINFO_NAMESPACES: tuple[tuple[int, str], ...] = (
    (-2, "Media"), (-1, "Special"), (0, ""), (1, "Talk"), (2, "User"), (3, "User talk"),
    (4, "Wikipedia"), (5, "Wikipedia talk"), (6, "File"), (7, "File talk"), (8, "MediaWiki"),
    (9, "MediaWiki talk"), (10, "Template"), (11, "Template talk"), (12, "Help"),
    (13, "Help talk"), (14, "Category"), (15, "Category talk"), (100, "Portal"),
    (101, "Portal talk"), (118, "Draft"), (119, "Draft talk"), (828, "Module"),
    (829, "Module talk"),
)
