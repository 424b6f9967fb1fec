"""The initial world (its first month, 2021-08 by default): countries, cities, people, clubs,
companies, films, tournaments.

Creates the entities and their statements only; articles are written afterwards by the article
builders, once every entity they link to exists. Entities that later months need as spares
(unattached coaches, executives, politicians) are created here too. Years are the default world's
history moved to this world's start (:meth:`~.world.World.year`).
"""

from __future__ import annotations

import datetime

from tw_jax.time import Snapshot

from .model import Entity, item, mono, quantity, string, time_value
from .names import COUNTRIES, RIVERS
from .schema import KIND_SHARES, MAIN_KINDS
from .world import (
    INDUSTRIES,
    POSITIONS,
    World,
    industry_item,
    manager_item,
    position_item,
    tournament_class,
)

OCCUPATION = {"footballer": "Q937857", "coach": "Q937857", "politician": "Q82955",
              "business": "Q43845", "actor": "Q33999"}
GENRES = ("Q130232", "Q157443", "Q188473")
SERIES = ("Cup", "Super Cup", "League Cup", "Shield", "Champions Trophy", "Invitational", "Youth Cup")
WORD_INDUSTRY = dict(zip(
    ["Systems", "Foods", "Motors", "Logistics", "Energy", "Pharmaceuticals", "Media", "Textiles", "Airlines", "Robotics", "Software", "Shipping", "Brewing", "Insurance", "Steel"],
    ["software", "food processing", "automotive", "logistics", "energy", "pharmaceutical", "media", "textile", "aviation", "robotics", "software", "shipping", "brewing", "insurance", "steel"], strict=True,
))


def kind_counts(n: int) -> dict[str, int]:
    """How many entities of each main kind make up ``n`` (largest remainders get the rest)."""
    raw = {k: n * KIND_SHARES[k] for k in MAIN_KINDS}
    counts = {k: max(2, int(v)) for k, v in raw.items()}
    order = sorted(MAIN_KINDS, key=lambda k: (-(raw[k] - int(raw[k])), MAIN_KINDS.index(k)))
    i = 0
    while sum(counts.values()) < n:
        counts[order[i % len(order)]] += 1
        i += 1
    return counts


def url_slug(label: str) -> str:
    return "".join(c for c in label.lower() if c.isalnum())


def make_country(w: World, name: str, demonym: str) -> Entity:
    w.names.claim(name)
    e = w.new_entity("country", name, "country on the Selden Sea")
    e.attrs.update(demonym=demonym, official=f"Republic of {name}", indep=w.rng.randint(w.year(1810), w.year(1960)))
    e.other_labels = {"de": name, "fr": name}
    e.aliases = [f"Republic of {name}"]
    w.add(e, "P31", item("Q6256"))
    w.add(e, "P1448", mono(f"Republic of {name}"))
    w.add(e, "P571", time_value(e.attrs["indep"]))
    pop = w.rng.randint(1_500_000, 9_000_000)
    e.attrs["pop"] = pop
    w.add(e, "P1082", quantity(pop), qualifiers=[("P585", time_value(w.year(2020)))], rank="preferred",
          ref=f"https://stats.{url_slug(name)}.example/population")
    w.add(e, "P2046", quantity(f"{w.rng.randint(20000, 90000)}.{w.rng.randint(1, 9)}", "Q712226"))
    w.add(e, "P856", string(f"https://www.gov.{url_slug(name)}.example/"))
    return e


def make_city(w: World, country: Entity, n: int) -> Entity:
    label = w.names.city()
    e = w.new_entity("city", label, f"city in {country.label}")
    r = w.rng
    e.attrs.update(country=country.qid, region=w.region(country.qid, n % 2), river=r.choice(RIVERS),
                   founded=r.randint(w.year(1100), w.year(1850)), area=f"{r.randint(40, 700)}.{r.randint(1, 9)}")
    e.attrs["pop"] = r.randint(20_000, 1_900_000)
    e.aliases = [f"City of {label}"] if r.random() < 0.4 else []
    w.add(e, "P31", item("Q515"))
    w.add(e, "P17", item(country.qid))
    w.add(e, "P131", item(e.attrs["region"]))
    w.add(e, "P571", time_value(e.attrs["founded"]))
    w.add(e, "P1082", quantity(e.attrs["pop"]), qualifiers=[("P585", time_value(w.year(2020)))])
    w.add(e, "P2046", quantity(e.attrs["area"], "Q712226"))
    if r.random() < 0.6:
        w.add(e, "P856", string(f"https://www.{url_slug(label)}.example/"))
    return e


def make_person(w: World, kind: str, country: Entity, city: Entity, *, born: tuple[int, int]) -> Entity:
    r = w.rng
    gender = "male" if r.random() < (0.75 if kind in ("footballer", "coach") else 0.5) else "female"
    label, first, last = w.names.person(gender, initials=kind == "business" and r.random() < 0.3)
    demonym = country.attrs["demonym"]
    desc = {"footballer": "footballer", "coach": "football manager", "politician": "politician",
            "business": "business executive", "actor": "actor"}[kind]
    e = w.new_entity(kind, label, f"{demonym} {desc}")
    y, m, d = r.randint(*born), r.randint(1, 12), r.randint(1, 28)
    e.attrs.update(first=first, last=last, gender=gender, country=country.qid, city=city.qid, birth=(y, m, d))
    if r.random() < 0.35:
        e.aliases.append(f"{first} {r.choice('ABCDEFGHJKLMNPRSTW')}. {last}" if "." not in label
                         else f"{first} {last}")
    w.add(e, "P31", item("Q5"))
    w.add(e, "P21", item("Q6581097" if gender == "male" else "Q6581072"))
    w.add(e, "P27", item(country.qid))
    w.add(e, "P19", item(city.qid))
    if r.random() < 0.06:  # a wrong date kept as deprecated beside the right one
        w.add(e, "P569", time_value(y + 1, m, d), rank="deprecated")
        w.add(e, "P569", time_value(y, m, d), rank="preferred")
    else:
        w.add(e, "P569", time_value(y, m, d) if r.random() < 0.9 else time_value(y, m))
    w.add(e, "P106", item(OCCUPATION[kind]))
    if kind == "coach":
        w.add(e, "P106", item(manager_item(w)))
    if r.random() < 0.5:
        w.add(e, "P18", string(f"{label.replace('.', '')} {r.randint(w.year(2012), w.year(2020))}.jpg"))
    return e


def populate(w: World) -> None:
    """Create the world of its first month: ``w.n_entities`` main entities plus countries and
    supports."""
    r = w.rng
    counts = kind_counts(w.n_entities)
    n_countries = max(3, min(len(COUNTRIES), w.n_entities // 30))
    countries = [make_country(w, n, d) for n, d in COUNTRIES[:n_countries]]
    for c in countries:
        w.league(c.qid)
    cities = [make_city(w, countries[i % n_countries], i // n_countries) for i in range(counts["city"])]
    for c in countries:  # the first city of each country is its capital
        capital = next(x for x in cities if x.attrs["country"] == c.qid)
        capital.attrs["capital"] = True
        w.add(c, "P36", item(capital.qid))

    def home() -> tuple[Entity, Entity]:
        city = r.choice(cities)
        return w.get(city.attrs["country"]), city

    clubs = []
    for i in range(counts["club"]):
        city = cities[i % len(cities)]
        country = w.get(city.attrs["country"])
        label = w.names.club(city.label)
        e = w.new_entity("club", label, f"association football club in {city.label}, {country.label}")
        e.attrs.update(city=city.qid, country=country.qid, founded=r.randint(w.year(1880), w.year(1975)),
                       capacity=r.randint(8, 60) * 1000 + r.randint(1, 9) * 100)
        w.add(e, "P31", item("Q476028"))
        w.add(e, "P17", item(country.qid))
        w.add(e, "P131", item(city.qid))
        w.add(e, "P571", time_value(e.attrs["founded"]))
        w.add(e, "P115", item(w.venue(e)))
        w.add(e, "P118", item(w.league(country.qid)))
        w.add(e, "P1448", mono(f"{label} Football Club" if "FC" not in label else label.replace("FC", "Football Club")))
        if r.random() < 0.7:
            w.add(e, "P856", string(f"https://www.{url_slug(label)}.example/"))
        if not label.startswith(("FC ", "Real ")):
            e.aliases.append(f"{city.label} FC")
        clubs.append(e)

    for _ in range(counts["footballer"]):
        country, city = home()
        make_footballer(w, country, city, clubs, born=(w.year(1988), w.year(2001)))
    for _ in range(counts["coach"]):
        country, city = home()
        e = make_person(w, "coach", country, city, born=(w.year(1962), w.year(1982)))
        w.add(e, "P413", item(position_item(w, r.choice(POSITIONS))))
        pclub = r.choice(clubs)
        e.attrs["pclub"] = pclub.qid
        start = e.attrs["birth"][0] + 19
        w.add(e, "P54", item(pclub.qid), qualifiers=[("P580", time_value(start)), ("P582", time_value(start + 9))])
    for _ in range(counts["politician"]):
        country, city = home()
        e = make_person(w, "politician", country, city, born=(w.year(1955), w.year(1985)))
        w.add(e, "P102", item(w.party(country.qid, r.randrange(3))))
        if r.random() < 0.6:
            w.add(e, "P69", item(w.university(r.choice(cities).qid)))
    for _ in range(counts["business"]):
        country, city = home()
        e = make_person(w, "business", country, city, born=(w.year(1958), w.year(1990)))
        if r.random() < 0.7:
            w.add(e, "P69", item(w.university(r.choice(cities).qid)))
    for i in range(counts["actor"]):
        country, city = home()
        e = make_person(w, "actor", country, city, born=(w.year(1960), w.year(1998)))
        if i % 3 == 0:
            w.add(e, "P106", item("Q2526255"))
            e.attrs["director"] = True
        if r.random() < 0.4:
            w.add(e, "P69", item(w.university(r.choice(cities).qid)))

    people = w.of_kind("footballer", "coach", "politician", "business", "actor")
    for e in people:
        if r.random() < 0.3:
            kind = e.kind
            for _ in range(r.randint(1, 2)):
                award = w.award(kind, e.attrs["country"])
                if w.find(e, "P166", item(award)) is None:
                    w.add(e, "P166", item(award), qualifiers=[("P585", time_value(r.randint(w.year(2008), w.year(2020))))])
                if kind != "footballer":
                    break
                kind = "coach" if e.kind == "coach" else "footballer"

    populate_orgs(w, countries, cities, clubs, counts)
    assign_roles(w, countries, cities, clubs)


def populate_orgs(w: World, countries: list[Entity], cities: list[Entity], clubs: list[Entity],
                  counts: dict[str, int]) -> None:
    """Companies, films and tournaments, which refer to the people made before them."""
    r = w.rng
    business = w.of_kind("business")
    for _ in range(counts["company"]):
        founder = r.choice(business) if business and r.random() < 0.4 else None
        make_company(w, r.choice(cities), founder, r.randint(w.year(1890), w.year(2012)))

    actors = w.of_kind("actor")
    directors = [a for a in actors if a.attrs.get("director")] or actors
    for _ in range(counts["film"]):
        make_film(w, r.choice(directors), r.sample(actors, min(3, len(actors))),
                  r.choice(countries),
                  time_value(r.randint(w.year(1996), w.year(2020)), r.randint(1, 12), r.randint(1, 28)))

    for i in range(counts["event"]):
        country = countries[i % len(countries)]
        future = i % 5 == 4
        year = w.year(2021) if future else w.year(2010) + r.randrange(11)
        make_event(w, country, year, future, clubs, cities)


def make_footballer(w: World, country: Entity, city: Entity, clubs: list[Entity], *, born: tuple[int, int],
                    since=None) -> Entity:
    """A footballer with a club history (P54 with start and end times) ending at a current club."""
    r = w.rng
    e = make_person(w, "footballer", country, city, born=born)
    w.add(e, "P413", item(position_item(w, r.choice(POSITIONS[1:]) if r.random() < 0.9 else POSITIONS[0])))
    same = [c.qid for c in w.in_country("club", country.qid)] or [c.qid for c in clubs]
    if since is not None:  # a newcomer: one club, joined this month
        path = [r.choice(same)]
    else:
        path = [c.qid for c in r.sample(clubs, min(len(clubs), r.randint(1, 3)))]
        if r.random() < 0.6:
            path[-1] = r.choice(same)
            path = list(dict.fromkeys(path))
    year = e.attrs["birth"][0] + r.randint(17, 20)
    for i, club in enumerate(path):
        last = i == len(path) - 1
        end = min(year + r.randint(1, 3), w.year(2020)) if not last else None
        quals = [("P580", since if since is not None else time_value(min(year, w.year(2020))))]
        if end:
            quals.append(("P582", time_value(end)))
        w.add(e, "P54", item(club), qualifiers=quals)
        year = end or year
    e.attrs.update(club=path[-1], joinyear=min(year, w.year(2021)), youthclub=r.choice(same), debutclub=path[0])
    return e


def make_company(w: World, city: Entity, founder: Entity | None, year: int, month: int = 0, day: int = 0) -> Entity:
    r = w.rng
    country = w.get(city.attrs["country"])
    label, short = w.names.company()
    word = next((x for x in WORD_INDUSTRY if x in label), None)
    industry = WORD_INDUSTRY[word] if word else r.choice(INDUSTRIES)
    e = w.new_entity("company", label, f"{industry} company in {country.label}")
    e.attrs.update(city=city.qid, country=country.qid, short=short, industry=industry, founded=year,
                   employees=r.randint(3, 90) * 100 + r.randint(0, 9) * 10,
                   revenue=f"{r.randint(12, 950)}.{r.randint(1, 9)}")
    if short != label:
        e.aliases.append(short)
    w.add(e, "P31", item("Q4830453"))
    w.add(e, "P17", item(country.qid))
    w.add(e, "P159", item(city.qid))
    if month:
        w.add(e, "P571", time_value(year, month, day))
    else:
        w.add(e, "P571", time_value(year, r.randint(1, 12), r.randint(1, 28)) if r.random() < 0.5 else time_value(year))
    w.add(e, "P452", item(industry_item(w, industry)))
    w.add(e, "P1128", quantity(e.attrs["employees"]), qualifiers=[("P585", time_value(w.year(2020)))])
    amount = int(float(e.attrs["revenue"]) * 1_000_000)
    w.add(e, "P2139", quantity(amount, "Q4917"), qualifiers=[("P585", time_value(w.year(2020)))])
    w.add(e, "P856", string(f"https://www.{url_slug(short)}.example/"))
    w.add(e, "P1448", mono(label))
    if founder is not None:
        w.add(e, "P112", item(founder.qid))
        e.attrs["founder"] = founder.qid
    return e


def make_film(w: World, director: Entity, cast: list[Entity], country: Entity, released) -> Entity:
    r = w.rng
    title = w.names.film()
    year = int(released[1][1:5])
    e = w.new_entity("film", title, f"{year} film directed by {director.label}")
    e.attrs.update(country=country.qid, budget=f"{r.randint(2, 60)}.{r.randint(1, 9)}",
                   gross=f"{r.randint(3, 300)}.{r.randint(1, 9)}", genre=r.choice(GENRES))
    w.add(e, "P31", item("Q11424"))
    w.add(e, "P1476", mono(title))
    w.add(e, "P57", item(director.qid))
    for a in cast:
        w.add(e, "P161", item(a.qid))
    w.add(e, "P577", released)
    w.add(e, "P136", item(e.attrs["genre"]))
    w.add(e, "P495", item(country.qid))
    w.add(e, "P2130", quantity(int(float(e.attrs["budget"]) * 1_000_000), "Q4917"))
    return e


def make_event(w: World, country: Entity, year: int, future: bool, clubs: list[Entity],
               cities: list[Entity]) -> Entity:
    r = w.rng
    host = r.choice(w.in_country("city", country.qid) or cities)
    prefix = [country.label, country.label, host.label]
    label = w.names.fresh(lambda: f"{year} {r.choice(prefix)} {r.choice(SERIES)}")
    series = label.split(" ", 1)[1]
    e = w.new_entity("event", label, f"edition of the {series}")
    if future:  # begins one to three months after the world starts (the start year's edition)
        begins = w.span.snapshot(r.randint(1, 3)).date
    else:  # May to August of a past year
        begins = datetime.date(year, r.randint(5, 8), 1)
    ends = Snapshot(begins).plus_months(1).date
    e.attrs.update(country=country.qid, city=host.qid, future=future, year=year,
                   series=series, nth=year - w.year(1950))
    w.add(e, "P31", item(tournament_class(w)))
    w.add(e, "P17", item(country.qid))
    w.add(e, "P276", item(host.qid))
    w.add(e, "P580", time_value(begins.year, begins.month, r.randint(1, 10)))
    w.add(e, "P582", time_value(ends.year, ends.month, r.randint(11, 28)))
    teams = r.sample(clubs, min(len(clubs), 4))
    for c in teams:
        w.add(e, "P710", item(c.qid))
    e.attrs["teams"] = [c.qid for c in teams]
    if not future:
        w.add(e, "P1346", item(teams[0].qid))
    elif r.random() < 0.5:
        w.add(e, "P1346", None, snaktype="somevalue")
    return e


def assign_roles(w: World, countries: list[Entity], cities: list[Entity], clubs: list[Entity]) -> None:
    """Heads of state and government, mayors, head coaches, chief executives, spouses."""
    r = w.rng
    politicians = list(w.of_kind("politician"))
    r.shuffle(politicians)
    keep_free = max(3, len(politicians) // 5)  # spares for the mayor changes of later months
    for c in countries:
        if len(politicians) <= keep_free:
            break
        hog = next((p for p in politicians if p.attrs["country"] == c.qid), politicians[0])
        politicians.remove(hog)
        set_office(w, hog, c, "P6", f"hog/{c.qid}", f"Prime Minister of {c.label}",
                   r.randint(w.year(2014), w.year(2020)))
    mayors = max(2, len(cities) * 2 // 5)
    for city in cities[::-1]:  # capitals come first; they get mayors last, if politicians remain
        if len(politicians) <= keep_free or mayors == 0:
            break
        mayor = next((p for p in politicians if p.attrs["country"] == city.attrs["country"]), politicians[0])
        politicians.remove(mayor)
        mayors -= 1
        set_office(w, mayor, city, "P6", f"mayor/{city.qid}", f"Mayor of {city.label}",
                   r.randint(w.year(2014), w.year(2020)))
    for c in countries:
        if len(politicians) > keep_free + 2 and r.random() < 0.6:
            hos = next((p for p in politicians if p.attrs["country"] == c.qid), politicians[0])
            politicians.remove(hos)
            set_office(w, hos, c, "P35", f"hos/{c.qid}", f"President of {c.label}",
                       r.randint(w.year(2012), w.year(2020)))

    coaches = list(w.of_kind("coach"))
    spare = max(1, len(coaches) // 5)
    for club, coach in zip(r.sample(clubs, min(len(clubs), len(coaches) - spare)), coaches, strict=False):
        since = r.randint(w.year(2016), w.year(2021))
        w.add(club, "P286", item(coach.qid), qualifiers=[("P580", time_value(since))])
        coach.attrs.update(club=club.qid, since=since)
    for coach in coaches:
        coach.attrs.setdefault("club", coach.attrs["pclub"])

    business = list(w.of_kind("business"))
    spare = max(2, len(business) // 4)
    companies = w.of_kind("company")
    for company, ceo in zip(r.sample(companies, min(len(companies), len(business) - spare)), business, strict=False):
        since = r.randint(w.year(2012), w.year(2021))
        w.add(company, "P169", item(ceo.qid), qualifiers=[("P580", time_value(since))])
        w.add(ceo, "P108", item(company.qid))
        ceo.attrs.update(company=company.qid, since=since)
    for b in business:
        if "company" not in b.attrs:
            b.attrs["company"] = r.choice(companies).qid

    singles = [p for p in w.of_kind("actor", "politician") if r.random() < 0.5]
    r.shuffle(singles)
    couples = max(2, len(singles) // 5)
    for a, b in zip(singles[0:2 * couples:2], singles[1:2 * couples:2], strict=False):
        marry(w, a, b)
    for p in singles[2 * couples:2 * couples + 2]:
        w.add(p, "P26", None, snaktype="novalue" if r.random() < 0.5 else "somevalue")


def set_office(w: World, person: Entity, place: Entity, prop: str, key: str, office: str, since: int) -> None:
    w.add(place, prop, item(person.qid), qualifiers=[("P580", time_value(since))])
    office_q = w.office(key, office, f"political office in {place.label}")
    w.add(person, "P39", item(office_q), qualifiers=[("P580", time_value(since))])
    person.attrs.update(office=office_q, since=since, place=place.qid)


def marry(w: World, a: Entity, b: Entity, since=None) -> None:
    quals = [("P580", since)] if since else []
    w.add(a, "P26", item(b.qid), qualifiers=quals)
    w.add(b, "P26", item(a.qid), qualifiers=quals)
    a.attrs["spouse"] = b.qid
    b.attrs["spouse"] = a.qid
