"""Article bodies for clubs, companies, cities, countries, films and tournaments."""

from __future__ import annotations

from tw_jax.time import wikidata_date

from . import phrases as P
from . import phrases_things as PT
from .compose import add_refs, date_text, elink, make, para, pick
from .infobox import clubs_in
from .model import Entity, Items, Para, Raw, Section
from .schema import MONTH_NAMES
from .text import bold, ext, italic, link, small, words
from .world import INDUSTRIES, World

COLOURS = ("red", "blue", "green", "white", "black", "yellow", "orange", "claret")
CENTURIES = ("16th", "17th", "18th", "19th")
ROLES = ("doctor", "teacher", "soldier", "journalist", "painter", "sailor", "detective")
RELATIVES = ("a parent", "an uncle", "a grandmother", "an old friend", "a brother", "a sister")
ASPECTS = ("acting", "photography", "score", "script", "editing", "pacing", "dialogue")
GENRE_WORDS = {"Q130232": "drama", "Q157443": "comedy", "Q188473": "action"}


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def base_ctx(w: World, e: Entity, short: str) -> dict:
    return {"bname": bold(words(e.label)), "name": words(e.label), "Short": words(short), "ymin": w.year(1960)}


def club(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    country = w.get(a["country"])
    venue = e.first("P115")
    ctx = base_ctx(w, e, e.label)
    others = [c for c in (r.choice(w.of_kind("club")) for _ in range(3)) if c.qid != e.qid]
    ctx.update(
        football=link("Association football", "football"), city=elink(w, a["city"]), country=elink(w, country.qid),
        demonym=country.attrs["demonym"], league=link(w.label(e.first("P118"))), venue=link(w.label(venue)),
        venuelabel=words(w.label(venue)), capacity=a["capacity"], founded=a["founded"], ind=r.choice(INDUSTRIES),
        titleyear=a["founded"] + r.randint(5, 40), relyear=r.randint(w.year(1980), w.year(2015)), openyear=a["founded"] + r.randint(1, 30),
        renoyear=r.randint(w.year(1995), w.year(2019)), record=a["capacity"] + r.randint(1, 9) * 100, recyear=r.randint(w.year(1960), w.year(2010)),
        small=small("(a national record at the time)"), rival=elink(w, r.choice(others).qid) if others else "none",
        colour1=r.choice(COLOURS), colour2=r.choice(COLOURS),
    )
    history = ["founded", "first_title"] + (["relegation"] if r.random() < 0.5 else [])
    coach = e.first("P286")
    hist = para(w, ctx, PT.CLUB, history)
    if coach:
        since = int(dict(e.claims["P286"][0].qualifiers)["P580"][1][1:5])
        hist.sents.append(make(w, "coach", PT.CLUB["coach"], ctx, coach=elink(w, coach), since=since))
    sections = [
        Section(None, 0, [para(w, ctx, PT.CLUB, ["lead", "lead_league", "lead_ground"])]),
        Section("History", 2, [hist]),
        Section("Stadium", 2, [para(w, ctx, PT.CLUB, ["stadium", "record"],
                                    above=f"[[File:{w.label(venue)} {ctx['renoyear']}.jpg|thumb|The [[{w.label(venue)}]] in {ctx['renoyear']}]]")]),
    ]
    if others:
        sections.append(Section("Supporters and rivalries", 2, [para(w, ctx, PT.CLUB, ["rival", "colours"])]))
    sections += [Section("Players", 2, []), Section("Current squad", 3, [Raw("@squad")])]
    if r.random() < 0.6:
        years = sorted(r.sample(range(a["founded"] + 5, w.year(2021)), 2))
        sections.append(Section("Honours", 2, [Items([make(
            w, "honour_titles", ("{league} champions: {y1}, {y2}.", "Champions of the {league}: {y1}, {y2}."),
            ctx, y1=years[0], y2=years[1])])]))
    add_refs(w, sections[0].blocks[0].sents + hist.sents, e.label, a["founded"] + 100)
    return sections


def company(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    country = w.get(a["country"])
    short = a["short"].replace(" & Co.", "")
    ctx = base_ctx(w, e, short)
    founded = a["founded"]
    ctx.update(
        demonym=country.attrs["demonym"], industry=link(f"{a['industry'].capitalize()} industry", a["industry"]),
        hq=elink(w, a["city"]), hqlabel=words(w.label(a["city"])), country=elink(w, country.qid),
        employees=a["employees"], revenue=a["revenue"], founded=founded, fcity=elink(w, a["city"]),
        listyear=min(founded + r.randint(10, 60), w.year(2019)),
        acqyear=r.randint(min(max(founded + 5, w.year(1995)), w.year(2020)), w.year(2020)),
        rivalco=words(f"{w.names.root()} {r.choice(['Works', 'Trading', 'Partners'])}"),
        acqprice=r.randint(110, 990), nplants=r.randint(2, 40), plants=link("Factory", "plant", "s"), noffices=r.randint(5, 90),
        pct=f"{r.randint(1, 9)}.{r.randint(1, 9)}", site=ext(f"https://www.{short.lower().replace(' ', '')}.example/investors", "website"),
        when=founding_month(e),
    )
    young = founded >= w.year(2021)  # founded since the world started
    lead = [make(w, "lead", PT.COMPANY["new_lead" if young else "lead"], ctx)]
    ceo = e.first("P169")
    if ceo:
        lead.append(make(w, "lead_ceo", PT.COMPANY["lead_ceo"], ctx, ceo=elink(w, ceo)))
    lead.append(make(w, "lead_size", PT.COMPANY["lead_size"], ctx))
    hist = ["founded"] + (["founder"] if a.get("founder") else [])
    if not young:
        hist += pick(w, ["listing", "acquisition"], 1)
    if a.get("founder"):
        ctx["founder"] = elink(w, a["founder"])
    history = para(w, ctx, PT.COMPANY, hist)
    sections = [
        Section(None, 0, [Para(lead)]),
        Section("History", 2, [history]),
        Section("Operations", 2, [para(w, ctx, PT.COMPANY, pick(w, ["plants", "rnd", "website"], 2))]),
    ]
    if r.random() < 0.4:
        sections.append(Section("Financial data", 2, [Raw(finance_table(w, a))]))
    add_refs(w, lead + history.sents, e.label, max(founded, w.year(2000)))
    return sections


def founding_month(e: Entity) -> str:
    """``March 2021``: the month a company was founded in (its year alone when its inception
    has no month), as the lead of a company founded since the world started names it."""
    year, month, _ = wikidata_date(e.values("P571")[0][1])
    return f"{MONTH_NAMES[month - 1]} {year}" if month else str(year)


def finance_table(w: World, a: dict) -> str:
    rows = "\n".join(
        f"|-\n| {y} || {{{{US$|{w.rng.randint(50, 900)}.{w.rng.randint(0, 9)} million}}}} || {w.rng.randint(100, 9000)}"
        for y in (w.year(2018), w.year(2019), w.year(2020))
    )
    return '{| class="wikitable sortable"\n! Year !! Revenue !! Employees\n' + rows + "\n|}"


def city(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    country = w.get(a["country"])
    ctx = base_ctx(w, e, e.label)
    ctx.update(
        region=link(w.label(a["region"])), country=elink(w, country.qid), popyear=w.year(2020),
        pop=str(a["pop"]),
        founded=a["founded"], charter=a["founded"] + r.randint(40, 200), century=r.choice(CENTURIES),
        ind=r.choice(INDUSTRIES), river=a["river"], rivers=link("river", trail="s"), area=a["area"], saint=r.choice(("Aldric", "Cedwin", "Hilde", "Ivo")),
        cathedral=a["founded"] + r.randint(60, 300),
    )
    lead = ["lead"] + (["lead_capital"] if a.get("capital") else []) + ["lead_pop"]
    sections = [
        Section(None, 0, [para(w, ctx, PT.CITY, lead)]),
        Section("History", 2, [para(w, ctx, PT.CITY, pick(w, ["founded", "charter", "growth"], 2))]),
        Section("Geography", 2, [para(w, ctx, PT.CITY, ["river", "area", "landmark"],
                                      above=f"{{{{Main|Geography of {e.label}}}}}")]),
    ]
    mayor = e.first("P6")
    if mayor:
        since = int(dict(e.claims["P6"][0].qualifiers)["P580"][1][1:5])
        gov = Para([make(w, "mayor", PT.CITY["mayor"], ctx, mayor=elink(w, mayor), myear=since)])
        sections.append(Section("Government", 2, [gov]))
    sports = clubs_in(w, e.qid)
    unis = [w.support[f"university/{e.qid}"]] if f"university/{e.qid}" in w.support else []
    culture = []
    if sports:
        culture.append(make(w, "sports", PT.CITY["sports"], ctx, club=elink(w, sports[0].qid)))
    if unis:
        culture.append(make(w, "university", PT.CITY["university"], ctx, uni=link(w.label(unis[0])),
                            uniyear=r.randint(w.year(1600), w.year(1990))))
    if culture:
        sections.append(Section("Sport and education", 2, [Para(culture)]))
    if r.random() < 0.5:
        sections.append(Section("Gallery", 2, [Raw(
            f"<gallery>\nFile:{e.label} harbour.jpg|The harbour\nFile:{e.label} old town.jpg|The [[old town]]\n</gallery>")]))
    add_refs(w, sections[0].blocks[0].sents + sections[1].blocks[0].sents, e.label, w.year(2015))
    return sections


def country(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = base_ctx(w, e, e.label)
    inds = r.sample(INDUSTRIES, 2)
    pop = e.values("P1082")[0][1][1:]
    area = e.values("P2046")[0][1][1:]
    ctx.update(
        official=words(a["official"]), capital=elink(w, e.first("P36")), popm=f"{int(pop) / 1e6:.1f}", indep=a["indep"],
        ind1=inds[0], ind2=inds[1], popyear=w.year(2020), pop=pop, area=area,
    )
    politics = []
    if e.first("P35"):
        politics.append(make(w, "hos", PT.COUNTRY["hos"], ctx, hos=elink(w, e.first("P35"))))
    politics.append(make(w, "hog", PT.COUNTRY["hog"], ctx, hog=elink(w, e.first("P6"))))
    sections = [
        Section(None, 0, [para(w, ctx, PT.COUNTRY, ["lead", "lead_cap", "lead_popm"])]),
        Section("History", 2, [para(w, ctx, PT.COUNTRY, ["independence", "economy"])]),
        Section("Politics", 2, [Para(politics)]),
        Section("Demographics", 2, [para(w, ctx, PT.COUNTRY, ["pop", "area"])]),
    ]
    add_refs(w, sections[0].blocks[0].sents, e.label, w.year(2018))
    return sections


def film_ctx(w: World, e: Entity) -> dict:
    r = w.rng
    a = e.attrs
    released = e.values("P577")[0]
    cast = e.items("P161")
    gender = r.choice(["male", "female"])
    ctx = base_ctx(w, e, e.label)
    ctx.update(
        bname=bold(italic(words(e.label))), year=int(released[1][1:5]), demonym=w.get(a["country"]).attrs["demonym"],
        genre=link(w.label(a["genre"]).capitalize(), GENRE_WORDS[a["genre"]]), director=elink(w, e.first("P57")),
        cast1=elink(w, cast[0]), cast2=elink(w, cast[1]) if len(cast) > 1 else words("newcomers"),
        released=date_text(released), gross=a["gross"], role=r.choice(ROLES), setting=elink(w, r.choice(w.of_kind("city")).qid),
        rel=r.choice(RELATIVES), pron="he" if gender == "male" else "she", Pron="He" if gender == "male" else "She",
        pron2="his" if gender == "male" else "her", decades=r.randint(2, 9), budget=a["budget"],
        shootcity=elink(w, r.choice(w.of_kind("city")).qid), shootmonth=r.choice(("March", "April", "June", "October")),
        shootyear=int(released[1][1:5]) - 1, aspect1=r.choice(ASPECTS[:3]), aspect2=r.choice(ASPECTS[3:]),
        tickets=r.randint(15, 900) * 1000 + r.randint(100, 999),
    )
    return ctx


def film(w: World, e: Entity) -> list[Section]:
    r = w.rng
    ctx = film_ctx(w, e)
    roles = [make(w, f"role_{q}", PT.FILM["role"], ctx, actor=elink(w, q),
                  character=f"{w.names.first_name(r.choice(['male', 'female']))} {w.names.surname()}")
             for q in e.items("P161")]
    sections = [
        Section(None, 0, [para(w, ctx, PT.FILM, ["lead", "lead_cast", "lead_release"])]),
        Section("Plot", 2, [para(w, ctx, PT.FILM, ["plot1", "plot2"])]),
        Section("Cast", 2, [Items(roles)]),
        Section("Production", 2, [para(w, ctx, PT.FILM, ["budget", "shoot"])]),
        Section("Reception", 2, [para(w, ctx, PT.FILM, ["review", "tickets"])]),
    ]
    add_refs(w, sections[0].blocks[0].sents + sections[3].blocks[0].sents, e.label, ctx["year"])
    return sections


def event_ctx(w: World, e: Entity) -> dict:
    r = w.rng
    a = e.attrs
    teams = a["teams"]
    footballers = w.of_kind("footballer")
    ctx = base_ctx(w, e, "the " + e.label)
    ctx.update(
        nth=ordinal(a["nth"]), series=words(a["series"]), city=elink(w, a["city"]),
        start=date_text(e.values("P580")[0]), end=date_text(e.values("P582")[0]),
        winner=elink(w, teams[0]), runner=elink(w, teams[1]), nteams=len(teams) * 4,
        goals=r.randint(20, 90), matches=r.randint(15, 31), venue=words(f"{w.label(a['city'])} Stadium"),
        attendance=r.randint(9, 70) * 1000 + r.randint(100, 999), sgoals=r.randint(4, 11),
        scorer=elink(w, r.choice(footballers).qid) if footballers else words("a local player"),
    )
    return ctx


def event(w: World, e: Entity) -> list[Section]:
    a = e.attrs
    ctx = event_ctx(w, e)
    if a["future"]:
        sections = [Section(None, 0, [Para([make(w, "lead", PT.EVENT["lead_future"], ctx)])]),
                    Section("Format", 2, [Para([make(w, "teams", PT.EVENT["teams"], ctx)])])]
    else:
        sections = [
            Section(None, 0, [para(w, ctx, PT.EVENT, ["lead", "winner"])]),
            Section("Format", 2, [para(w, ctx, PT.EVENT, ["teams", "goals"])]),
            Section("Final", 2, [para(w, ctx, PT.EVENT, ["final", "scorer"])]),
        ]
    sections.append(Section("Participants", 2, [Raw("@participants")]))
    add_refs(w, sections[0].blocks[0].sents, e.label, a["year"])
    return sections


BUILDERS = {"club": club, "company": company, "city": city, "country": country, "film": film, "event": event}
SPARES = {k: PT.THING_SPARE for k in BUILDERS}
KIND_TABLES = {
    "footballer": P.FOOTBALLER, "coach": P.COACH, "politician": P.POLITICIAN, "business": P.BUSINESS,
    "actor": P.ACTOR, "club": PT.CLUB, "company": PT.COMPANY, "city": PT.CITY, "country": PT.COUNTRY,
    "film": PT.FILM, "event": PT.EVENT,
}
