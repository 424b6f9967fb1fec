"""Article bodies for people: footballers, coaches, politicians, executives, actors.

Each builder returns the sections of the article (lead first) made of template sentences whose
slots come from ``person_ctx``: the entity's statements and prose-only attributes.
"""

from __future__ import annotations

from tw_jax.time import wikidata_date

from . import phrases as P
from .compose import add_refs, date_text, elink, make, para, pick, pronouns
from .infobox import coached_clubs
from .model import Entity, Items, Para, Raw, Section, time_value
from .text import bold, italic, link, words
from .world import World

JOBS = ("teacher", "nurse", "carpenter", "fisherman", "baker", "miner", "librarian", "farmer", "tailor")
SUBJECTS = ("economics", "law", "history", "engineering", "philosophy", "chemistry", "geography")
HOBBIES = ("sailor", "chess player", "gardener", "cyclist", "photographer", "birdwatcher")
TRAITS = ("pace", "work rate", "composure", "vision", "aerial ability", "positional sense")
SKILLS = ("accurate passing", "powerful shooting", "strong tackling", "calm finishing", "set-piece delivery")
TACTICS = ("high-pressing", "possession-based", "counter-attacking", "defensive", "direct")
PLAYS = ("The Cherry Orchard", "Hedda Gabler", "Twelfth Night", "The Seagull", "Antigone")
DIVISIONS = ("retail", "international", "logistics", "consumer", "digital")


def person_ctx(w: World, e: Entity) -> dict:
    """Slot values for a person: names, pronouns, birth, home town, and a few random details."""
    r = w.rng
    a = e.attrs
    y, m, d = a["birth"]
    country = w.get(a["country"])
    ctx: dict = dict(pronouns(a["gender"]))
    ctx.update(
        bname=bold(words(e.label)), name=words(e.label), Last=a["last"], Short=a["last"],
        demonym=country.attrs["demonym"], bcity=elink(w, a["city"]),
        bcitylabel=words(w.label(a["city"])), bcountry=elink(w, country.qid),
        born=date_text(time_value(y, m, d), nbsp=r.random() < 0.3), byear=y, ymin=y + 16,
        job1=r.choice(JOBS), job2=r.choice([j for j in JOBS]), saint=r.choice(("Aldric", "Brannoc", "Ivo")),
        schoolyear=y + 18, subject=r.choice(SUBJECTS), gradyear=y + 22, hobby=r.choice(HOBBIES),
        rcity=elink(w, r.choice(w.of_kind("city")).qid),
    )
    while ctx["job2"] == ctx["job1"]:
        ctx["job2"] = r.choice(JOBS)
    unis = e.items("P69")
    if unis:
        ctx["uni"] = link(w.label(unis[0]))
    if a.get("spouse") and a["spouse"] in w.entities:
        ctx["spouse"] = elink(w, a["spouse"])
    return ctx


def early_life(w: World, e: Entity, ctx: dict, extra: list[str] = ()) -> Section:
    keys = pick(w, ["born_in", "parents", "school"], 2)
    if "uni" in ctx:
        keys.append("uni")
    keys += list(extra)
    table = {**P.PERSON, **P.POLITICIAN, **P.ACTOR}
    return Section("Early life and education" if "uni" in ctx else "Early life", 2, [para(w, ctx, table, keys)])


def personal_life(w: World, e: Entity, ctx: dict) -> Section | None:
    keys = pick(w, ["lives", "hobby"], 1)
    if "spouse" in ctx:
        keys.insert(0, "spouse")
    if len(keys) < 2 and w.rng.random() < 0.5:
        return None
    return Section("Personal life", 2, [para(w, ctx, P.PERSON, keys)])


def award_items(w: World, e: Entity, ctx: dict) -> list:
    out = []
    for st in e.claims.get("P166", []):
        if st.counts():
            when = dict(st.qualifiers).get("P585")
            year = wikidata_date(when[1])[0] if when else w.year(2015)
            out.append(make(w, f"award_{st.value[1]}", P.AWARD_ITEM, ctx, award=link(w.label(st.value[1])), year=year))
    return out


def file_line(w: World, e: Entity, caption_link: str | None, year: int) -> str:
    last = e.attrs.get("last", e.label)
    cap = f"{last} in {year}"
    if caption_link:
        cap = f"{last} with [[{caption_link}]] in {year}"
    return f"[[File:{e.label.replace('.', '')} {year}.jpg|thumb|upright|{cap}]]"



def add_personal_and_awards(
    w: World, e: Entity, ctx: dict, sections: list[Section], awards_heading: str
) -> None:
    """The closing sections every person article shares: personal life, then awards."""
    personal = personal_life(w, e, ctx)
    if personal:
        sections.append(personal)
    honours = award_items(w, e, ctx)
    if honours:
        sections.append(Section(awards_heading, 2, [Items(honours)]))

def footballer(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = person_ctx(w, e)
    y = a["birth"][0]
    country = w.get(a["country"])
    pos = w.label(e.items("P413")[0])
    others = [c for c in w.of_kind("country") if c.qid != country.qid]
    clubs = w.of_kind("club")
    ctx.update(
        footballer=link("Association football", "footballer"), footballers=link("footballer", trail="s"),
        position=link(f"{pos.capitalize()} (association football)", pos),
        club=elink(w, a["club"]), natteam=link(f"{country.label} national football team", f"{country.label} national team"),
        intyear=y + r.randint(19, 23), trait=r.choice(TRAITS), skill=r.choice(SKILLS),
        youthclub=elink(w, a["youthclub"]), age=r.randint(9, 15), debutyear=min(y + r.randint(17, 19), w.year(2020)),
        rival=elink(w, next((c for c in (r.choice(clubs) for _ in range(5)) if c.qid != a["club"]), clubs[0]).qid),
        goals1=r.randint(2, 19), apps1=r.randint(14, 38), joinyear=a["joinyear"],
        fee=f"{r.randint(1, 40)}.{r.randint(1, 9)}", shirt=r.randint(2, 99), apps=r.randint(100, 420),
        opp=elink(w, r.choice(others).qid), caps=r.randint(5, 90),
    )
    ctx["intgoals"] = r.randint(0, ctx["caps"] // 2)
    ctx["intyear"] = min(ctx["intyear"], w.year(2020))
    international = r.random() < 0.6
    lead = [make(w, "lead", P.FOOTBALLER["lead"], ctx)]
    if international:
        lead.append(make(w, "lead_nat", P.FOOTBALLER["lead_nat"], ctx))
    lead.append(make(w, "lead_style", P.FOOTBALLER["lead_style"], ctx))
    sections = [Section(None, 0, [Para(lead)]), early_life(w, e, ctx)]
    sections.append(Section("Club career", 2, []))
    sections.append(Section("Early career", 3, [
        para(w, ctx, P.FOOTBALLER, pick(w, ["youth", "peers", "debut", "firstseason"], 2),
             above=file_line(w, e, w.label(a["debutclub"]), ctx["debutyear"] + 1))]))
    sections.append(Section(w.label(a["club"]), 3, [para(w, ctx, P.FOOTBALLER, pick(w, ["signed", "shirt", "apps"], 2))]))
    if international:
        sections.append(Section("International career", 2, [para(w, ctx, P.FOOTBALLER, ["intdebut", "caps"])]))
    personal = personal_life(w, e, ctx)
    if personal:
        sections.append(personal)
    sections.append(Section("Career statistics", 2, [Raw("@stats")]))
    honours = award_items(w, e, ctx)
    if r.random() < 0.4:
        league = w.league(a["country"])
        honours.append(make(w, "honour_league", P.HONOUR_ITEM, ctx, league=link(w.label(league)),
                            club=elink(w, a["club"]), year=r.randint(ctx["debutyear"] + 1, w.year(2021))))
    if honours:
        sections.append(Section("Honours", 2, [Items(honours)]))
    add_refs(w, [s for sec in sections[:3] for b in sec.blocks if isinstance(b, Para) for s in b.sents], e.label, y + 20)
    return sections


def coach(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = person_ctx(w, e)
    pos = w.label(e.items("P413")[0])
    ctx.update(
        footballer=link("Association football", "footballer"), club=elink(w, a["club"]),
        position=link(f"{pos.capitalize()} (association football)", pos), pclub=elink(w, a["pclub"]),
        pyears=r.randint(6, 14), retyear=a["birth"][0] + r.randint(32, 36), tactic=r.choice(TACTICS),
        since=a.get("since", w.year(2018)),
    )
    employed = bool(coached_clubs(w, e.qid))
    key = "lead" if employed else "lead_free"
    lead = Para([make(w, "lead", P.COACH[key], ctx), make(w, "style", P.COACH["style"], ctx)])
    sections = [Section(None, 0, [lead]), early_life(w, e, ctx)]
    sections.append(Section("Playing career", 2, [para(w, ctx, P.COACH, ["playing", "retired"])]))
    if employed:
        sections.append(Section("Managerial career", 2, [Para([make(w, "appointed", P.COACH["appointed"], ctx)])]))
    add_personal_and_awards(w, e, ctx, sections, "Honours")
    add_refs(w, lead.sents + sections[2].blocks[0].sents, e.label, a["birth"][0] + 30)
    return sections


def politician(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = person_ctx(w, e)
    party = e.first("P102")
    ctx.update(
        politician=link("Politician", "politician"), party=link(w.label(party)) if party else "party",
        partyyear=a["birth"][0] + r.randint(20, 30), councilyear=a["birth"][0] + r.randint(28, 34),
        subject2=r.choice(SUBJECTS), electyear=r.choice([w.year(y) for y in (2014, 2016, 2018, 2019)]),
        votes=r.randint(12, 480) * 100 + r.randint(1, 99),
    )
    if a.get("office"):
        ctx.update(office=link(w.label(a["office"])), since=a["since"])
    lead = Para([make(w, "lead", P.POLITICIAN["lead" if a.get("office") else "lead_free"], ctx),
                 make(w, "party", P.POLITICIAN["party"], ctx)])
    extra = ["phd"] if r.random() < 0.35 else []
    sections = [Section(None, 0, [lead]), early_life(w, e, ctx, extra)]
    career = Para([make(w, "council", P.POLITICIAN["council"], ctx), make(w, "votes", P.POLITICIAN["votes"], ctx)],
                  above=file_line(w, e, None, w.year(2019)) if r.random() < 0.5 else "")
    sections.append(Section("Political career", 2, [career]))
    if r.random() < 0.5:
        sections[-1].blocks.append(Raw(election_table(w, e, ctx)))
    add_personal_and_awards(w, e, ctx, sections, "Honours")
    add_refs(w, lead.sents + career.sents, e.label, ctx["councilyear"])
    return sections


def election_table(w: World, e: Entity, ctx: dict) -> str:
    rows = [f"|-\n| {ctx['electyear'] - 4 * i} || [[{w.label(e.first('P102'))}]] || {{{{formatnum:{w.rng.randint(3000, 60000)}}}}}"
            for i in range(3) if e.first("P102")]
    return "{| class=\"wikitable\"\n|+ Electoral history\n! Year !! Party !! Votes\n" + "\n".join(rows) + "\n|}"


def business(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = person_ctx(w, e)
    ctx.update(
        businessperson=link("Businessperson", "businessman" if a["gender"] == "male" else "businesswoman"),
        company=elink(w, a["company"]), jobyear=a["birth"][0] + r.randint(22, 26),
        joinyear=max(a["birth"][0] + 28, w.year(1990)), division=r.choice(DIVISIONS),
        wealth=f"{r.randint(12, 900)}.{r.randint(1, 9)}",
    )
    is_ceo = w.get(a["company"]).first("P169") == e.qid
    lead = Para([make(w, "lead", P.BUSINESS["lead" if is_ceo else "lead_free"], ctx),
                 make(w, "wealth", P.BUSINESS["wealth"], ctx)])
    sections = [Section(None, 0, [lead]), early_life(w, e, ctx)]
    sections.append(Section("Career", 2, [para(w, ctx, P.BUSINESS, ["early_job", "rise"])]))
    add_personal_and_awards(w, e, ctx, sections, "Awards")
    add_refs(w, lead.sents + sections[2].blocks[0].sents, e.label, ctx["jobyear"])
    return sections


def actor(w: World, e: Entity) -> list[Section]:
    r = w.rng
    a = e.attrs
    ctx = person_ctx(w, e)
    y = a["birth"][0]
    ctx.update(
        actor=link("Actor", "actor" if a["gender"] == "male" or r.random() < 0.5 else "actress"),
        dramayear=y + r.randint(17, 20), play=italic(r.choice(PLAYS)),
        stageyear=y + r.randint(21, 24), series=words(f"The {w.names.root()} Files"), tvyear=min(y + r.randint(25, 30), w.year(2020)),
    )
    lead_keys = ["lead"] + (["lead_director"] if a.get("director") else [])
    lead = Para([make(w, k, P.ACTOR[k], ctx) for k in lead_keys])
    sections = [Section(None, 0, [lead]), early_life(w, e, ctx, ["drama_school"])]
    sections.append(Section("Career", 2, [para(w, ctx, P.ACTOR, ["stage", "breakthrough"],
                                                above=file_line(w, e, None, ctx["tvyear"]))]))
    sections.append(Section("Filmography", 3, [Raw("@filmography")]))
    add_personal_and_awards(w, e, ctx, sections, "Awards and nominations")
    add_refs(w, lead.sents + sections[2].blocks[0].sents, e.label, ctx["stageyear"])
    return sections


BUILDERS = {"footballer": footballer, "coach": coach, "politician": politician, "business": business, "actor": actor}
SPARES = {
    "footballer": {**P.PERSON_SPARE, **P.FOOTBALLER_SPARE},
    "coach": P.PERSON_SPARE, "politician": P.PERSON_SPARE, "business": P.PERSON_SPARE, "actor": P.PERSON_SPARE,
}
