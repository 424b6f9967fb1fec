"""Fictional, unique, pronounceable names built from syllable pools.

Names are regular on purpose (a root plus a kind-specific ending) so that a tiny model trained
on the sample can learn them, and fictional so that nothing it learns is confused with the real
world. Every label is registered once; a clash draws again.
"""

from __future__ import annotations

import random

ONSETS = ["B", "Br", "C", "D", "Dr", "F", "G", "Gr", "H", "K", "Kr", "L", "M", "N", "P", "R", "S", "St", "T", "Th", "V", "W", "Z", "Tr"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ei", "au"]
CODAS = ["n", "r", "l", "s", "nd", "rn", "lt", "v", "m", "k", "rd", "st", "ns"]
MALE_ENDINGS = ["en", "o", "ik", "ar", "an", "us", "el", "on"]
FEMALE_ENDINGS = ["a", "ina", "ine", "elle", "is", "ra", "ena", "ette"]
SURNAME_ENDINGS = ["holt", "vik", "sen", "berg", "mont", "wick", "ford", "dane", "ley", "ton", "croft", "den", "ling", "mark", "stad", "ric"]
CITY_ENDINGS = ["port", "burg", "haven", "ford", "stad", "mouth", "field", "wick", "dale", "bridge", "minster", "hollow"]
COUNTRIES: tuple[tuple[str, str], ...] = (
    ("Varnholt", "Varnholtian"), ("Corvania", "Corvanian"), ("Telmoria", "Telmorian"),
    ("Dravonia", "Dravonian"), ("Brevania", "Brevanian"), ("Kaldoria", "Kaldorian"),
    ("Meridonia", "Meridonian"), ("Pellaria", "Pellarian"),
)
FILM_ADJECTIVES = ["Silent", "Broken", "Last", "Hidden", "Golden", "Northern", "Distant", "Crimson", "Quiet", "Winter", "Hollow", "Burning", "Secret", "Lonely", "Endless", "Iron", "Pale", "Wild", "Second", "Narrow"]
FILM_NOUNS = ["Harbour", "River", "Garden", "Letter", "Signal", "Orchard", "Lantern", "Frontier", "Tide", "Summer", "Bridge", "Compass", "Meadow", "Mirror", "Archive", "Station", "Island", "Voyage", "Anthem", "Horizon"]
INDUSTRY_WORDS = ["Systems", "Foods", "Motors", "Logistics", "Energy", "Pharmaceuticals", "Media", "Textiles", "Airlines", "Robotics", "Software", "Shipping", "Brewing", "Insurance", "Steel"]
COMPANY_SUFFIXES = (" Inc.", " Ltd.", " Corp.", " Group", "", " Holdings")
CLUB_PATTERNS = ("FC {c}", "{c} United", "{c} Athletic", "Sporting {c}", "{c} Rovers", "Real {c}", "{c} City")
SAINTS = ["Aldric", "Brannoc", "Cedwin", "Dunstan", "Elowen", "Faustin", "Gerlach", "Hilde", "Ivo", "Jurian", "Kestrin", "Lioba"]
RIVERS = ["Vell", "Ost", "Marra", "Kessel", "Tarn", "Ulva", "Brisk", "Delm", "Orme", "Sava"]


class NameFactory:
    """Hands out fresh labels; ``taken`` holds every label given so far (lower-cased)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.taken: set[str] = set()

    def claim(self, label: str) -> bool:
        key = label.lower()
        if key in self.taken:
            return False
        self.taken.add(key)
        return True

    def fresh(self, make) -> str:
        """Call ``make()`` until it returns a label not yet taken."""
        for _ in range(1000):
            label = make()
            if self.claim(label):
                return label
        raise RuntimeError("name pools exhausted")

    def root(self, two: bool = False) -> str:
        r = self.rng
        s = r.choice(ONSETS) + r.choice(VOWELS) + r.choice(CODAS)
        if two:
            s += r.choice(VOWELS) + r.choice(CODAS)
        return s

    def first_name(self, gender: str) -> str:
        r = self.rng
        base = r.choice(ONSETS) + r.choice(VOWELS[:5])
        if r.random() < 0.4:
            base += r.choice("nrl")
        return base + r.choice(MALE_ENDINGS if gender == "male" else FEMALE_ENDINGS)

    def surname(self) -> str:
        return self.root() + self.rng.choice(SURNAME_ENDINGS)

    def person(self, gender: str, initials: bool = False) -> tuple[str, str, str]:
        """(label, first name, surname); ``initials`` gives ``J. R. Surname`` style labels."""
        parts: dict[str, str] = {}

        def make() -> str:
            first, last = self.first_name(gender), self.surname()
            parts.update(first=first, last=last)
            if initials:
                a, b = self.rng.sample("ABDEFGHJKLMNPRSTVW", 2)
                return f"{a}. {b}. {last}"
            return f"{first} {last}"

        label = self.fresh(make)
        return label, parts["first"], parts["last"]

    def city(self) -> str:
        return self.fresh(lambda: self.root() + self.rng.choice(CITY_ENDINGS))

    def club(self, city: str) -> str:
        patterns = list(CLUB_PATTERNS)
        self.rng.shuffle(patterns)
        for p in patterns:
            label = p.format(c=city)
            if self.claim(label):
                return label
        return self.fresh(lambda: f"{self.root()} {city}")

    def company(self) -> tuple[str, str]:
        """(label, short name without the legal suffix)."""
        parts: dict[str, str] = {}

        def make() -> str:
            r = self.rng
            short = f"{self.root(r.random() < 0.3)} {r.choice(INDUSTRY_WORDS)}"
            if r.random() < 0.12:
                short = f"{self.surname()} & Co."
                parts["short"] = short
                return short
            parts["short"] = short
            return short + r.choice(COMPANY_SUFFIXES)

        label = self.fresh(make)
        return label, parts["short"]

    def film(self) -> str:
        r = self.rng

        def make() -> str:
            roll = r.random()
            if roll < 0.5:
                return f"The {r.choice(FILM_ADJECTIVES)} {r.choice(FILM_NOUNS)}"
            if roll < 0.8:
                return f"{r.choice(FILM_NOUNS)} of {self.root()}{r.choice(CITY_ENDINGS)}"
            return f"{r.choice(FILM_ADJECTIVES)} {r.choice(FILM_NOUNS)}s"

        return self.fresh(make)

    def word(self) -> str:
        """A capitalised nonsense word for rivers, districts, nicknames."""
        return self.root()
