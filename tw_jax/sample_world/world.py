"""The world's registry: item ids, statements, and the supporting items every kind refers to.

:class:`World` is the single owner of the random generator; every other module draws from
``world.rng`` in a fixed order, so a seed determines every byte of the output.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from tw_jax.time import Snapshot

from .model import Entity, Statement, Value, item
from .names import NameFactory
from .schema import FIRST_SYNTHETIC_QID, REAL_ITEMS
from .span import DEFAULT_SPAN, Span


class World:
    """Entities by id, plus the bookkeeping that keeps ids and statement ids deterministic.

    ``month`` is the index of the snapshot being built (0: the start); ``span`` is the world's
    calendar, which every date the generator writes comes from (:meth:`year`,
    :meth:`changing`)."""

    def __init__(self, seed: int, n_entities: int, span: Span = DEFAULT_SPAN) -> None:
        self.seed = seed
        self.n_entities = n_entities
        self.span = span
        self.rng = random.Random(seed)
        self.names = NameFactory(self.rng)
        self.entities: dict[str, Entity] = {}
        self.month = 0
        self._next_qid = FIRST_SYNTHETIC_QID
        self.support: dict[str, str] = {}  # support key -> qid, created on first use
        self._by_kind: dict[str, list[Entity]] = {}  # live lists, in creation (= id) order
        self._version: dict[str, int] = {}  # per kind, bumped by every creation or deletion
        self._cache: dict[tuple, tuple[tuple[int, ...], list[Entity]]] = {}
        self.render_index: dict | None = None  # reverse lookups, built for one rendering pass
        for qid, (label, description) in REAL_ITEMS.items():
            self.names.claim(label)
            self.entities[qid] = e = Entity(qid, "support", label, description)
            self._by_kind.setdefault("support", []).append(e)

    # -- the calendar -----------------------------------------------------------------------

    def year(self, default_year: int) -> int:
        """A year of the default world's history (written against its start, 2021) in this
        world's calendar."""
        return self.span.year(default_year)

    def changing(self) -> Snapshot:
        """The month whose changes are being made: the one from the previous snapshot to the
        one being built (2021-08 while building 2021-09)."""
        return self.span.snapshot(self.month - 1)

    # -- entities -------------------------------------------------------------------------

    def new_entity(self, kind: str, label: str, description: str) -> Entity:
        qid = f"Q{self._next_qid}"
        self._next_qid += 1
        e = Entity(qid, kind, label, description, created=self.month)
        self.entities[qid] = e
        self._by_kind.setdefault(kind, []).append(e)
        self._version[kind] = self._version.get(kind, 0) + 1
        return e

    def get(self, qid: str) -> Entity:
        return self.entities[qid]

    def label(self, qid: str) -> str:
        return self.entities[qid].label

    def _cached(self, key: tuple, kinds: tuple[str, ...], make) -> list[Entity]:
        version = tuple(self._version.get(k, 0) for k in kinds)
        hit = self._cache.get(key)
        if hit is None or hit[0] != version:
            hit = self._cache[key] = (version, make())
        return hit[1]

    def of_kind(self, *kinds: str) -> list[Entity]:
        """Entities of the given kinds in id order. A shared list: copy it before changing the world."""
        if len(kinds) == 1:
            return self._by_kind.get(kinds[0], [])
        return self._cached(kinds, kinds, lambda: sorted((e for k in kinds for e in self._by_kind.get(k, [])),
                                                  key=lambda e: e.num))

    def in_country(self, kind: str, country: str) -> list[Entity]:
        """Entities of ``kind`` whose ``attrs["country"]`` is ``country`` (shared list)."""
        return self._cached((kind, "@" + country), (kind,),
                            lambda: [e for e in self.of_kind(kind) if e.attrs.get("country") == country])

    def delete(self, e: Entity) -> None:
        del self.entities[e.qid]
        self._by_kind[e.kind].remove(e)
        self._version[e.kind] += 1

    def referrers(self, qid: str) -> list[Entity]:
        """Entities with a statement (of any rank) whose value is ``qid``."""
        out = []
        for e in self.entities.values():
            if any(s.value == ("item", qid) for ss in e.claims.values() for s in ss):
                out.append(e)
        return out

    # -- statements -----------------------------------------------------------------------

    def _sid(self, qid: str) -> str:
        """A statement id in Wikidata's ``Q42$UUID`` form (a random version-4 UUID)."""
        h = f"{self.rng.getrandbits(128):032X}"
        return f"{qid}${h[:8]}-{h[8:12]}-4{h[13:16]}-A{h[17:20]}-{h[20:]}"

    def add(
        self,
        e: Entity,
        prop: str,
        value: Value | None,
        *,
        qualifiers: Iterable[tuple[str, Value]] = (),
        rank: str = "normal",
        snaktype: str = "value",
        ref: str | None = None,
    ) -> Statement:
        st = Statement(self._sid(e.qid), prop, value, rank, snaktype, list(qualifiers), ref)
        e.claims.setdefault(prop, []).append(st)
        return st

    def remove(self, e: Entity, st: Statement) -> None:
        e.claims[st.prop].remove(st)
        if not e.claims[st.prop]:
            del e.claims[st.prop]

    def find(self, e: Entity, prop: str, value: Value) -> Statement | None:
        for st in e.claims.get(prop, []):
            if st.value == value and st.rank != "deprecated":
                return st
        return None

    # -- supporting items -----------------------------------------------------------------

    def support_item(self, key: str, label: str, description: str,
                     claims: Iterable[tuple[str, Value]] = ()) -> str:
        """The supporting item for ``key`` (an occupation, a league, an award), made on first use."""
        if key in self.support:
            return self.support[key]
        if not self.names.claim(label):
            raise RuntimeError(f"supporting label taken: {label}")
        e = self.new_entity("support", label, description)
        for prop, value in claims:
            self.add(e, prop, value)
        self.support[key] = e.qid
        return e.qid

    def country_info(self, qid: str) -> tuple[str, str]:
        """(name, demonym) of a country entity."""
        e = self.get(qid)
        return e.label, e.attrs["demonym"]

    def league(self, country: str) -> str:
        name, dem = self.country_info(country)
        return self.support_item(
            f"league/{country}", f"{name} Premier League", f"top association football league in {name}",
            [("P17", item(country))],
        )

    def award(self, kind: str, country: str) -> str:
        name, dem = self.country_info(country)
        label, description = {
            "footballer": (f"{dem} Footballer of the Year", f"annual football award in {name}"),
            "coach": (f"{dem} Manager of the Year", f"annual football award in {name}"),
            "politician": (f"Order of Merit of {name}", f"state decoration of {name}"),
            "business": (f"{dem} Entrepreneur of the Year", f"business award in {name}"),
            "actor": (f"{name} Film Award for Best Performance", f"film award in {name}"),
            "club": (f"{name} Club of the Year", f"annual sports award in {name}"),
            "company": (f"{dem} Exporter of the Year", f"business award in {name}"),
            "film": (f"{name} Film Award for Best Picture", f"film award in {name}"),
        }[kind]
        return self.support_item(f"award/{kind}/{country}", label, description, [("P17", item(country))])

    def party(self, country: str, n: int) -> str:
        name, dem = self.country_info(country)
        label = ["Progressive Union of {}", "National Alliance of {}", "Green Forum of {}"][n % 3]
        return self.support_item(
            f"party/{country}/{n % 3}", label.format(name), f"political party in {name}",
            [("P17", item(country))],
        )

    def region(self, country: str, n: int) -> str:
        name, _ = self.country_info(country)
        key = f"region/{country}/{n}"
        if key not in self.support:
            label = self.names.fresh(lambda: f"{self.names.root()} Province")
            self.support[key] = self._plain_support(label, f"province of {name}", [("P17", item(country))])
        return self.support[key]

    def office(self, key: str, label: str, description: str) -> str:
        return self.support_item(f"office/{key}", label, description)

    def university(self, city: str) -> str:
        return self.support_item(
            f"university/{city}", f"University of {self.label(city)}",
            f"university in {self.label(city)}", [("P131", item(city))],
        )

    def venue(self, club: Entity) -> str:
        city = club.attrs["city"]
        key = f"venue/{club.qid}"
        if key not in self.support:
            label = self.names.fresh(
                lambda: f"{self.names.root()} {self.rng.choice(['Arena', 'Park', 'Stadium', 'Ground'])}"
            )
            self.support[key] = self._plain_support(
                label, f"football stadium in {self.label(city)}", [("P131", item(city))]
            )
        return self.support[key]

    def generic(self, key: str, label: str, description: str) -> str:
        return self.support_item(f"generic/{key}", label, description)

    def _plain_support(self, label: str, description: str, claims: Iterable[tuple[str, Value]]) -> str:
        e = self.new_entity("support", label, description)
        for prop, value in claims:
            self.add(e, prop, value)
        return e.qid


POSITIONS = ("goalkeeper", "defender", "midfielder", "forward")
INDUSTRIES = (
    "software", "food processing", "automotive", "logistics", "energy", "pharmaceutical",
    "media", "textile", "aviation", "robotics", "shipping", "brewing", "insurance", "steel",
)


def position_item(w: World, position: str) -> str:
    return w.generic(f"position/{position}", position, "position in association football")


def industry_item(w: World, industry: str) -> str:
    return w.generic(f"industry/{industry}", f"{industry} industry", "branch of the economy")


def manager_item(w: World) -> str:
    return w.generic("occupation/manager", "association football manager", "person who manages a football team")


def tournament_class(w: World) -> str:
    return w.generic("class/tournament", "association football tournament", "competition in association football")

