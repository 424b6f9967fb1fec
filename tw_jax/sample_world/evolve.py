"""One month of change: facts move in Wikidata and the articles follow, plus plain copy-edits.

Each kind of change is a small function that updates statements, edits the affected articles
and logs what it did. ``busy`` keeps two changes from landing on the same article in one month,
so every change stays separately checkable (a renamed article keeps its text unchanged).
"""

from __future__ import annotations

from collections.abc import Callable

from tw_jax.time import wikidata_date

from . import phrases as P
from . import phrases_things as PT
from .articles import write_article
from .articles_things import event_ctx
from .compose import change_date, date_text, elink, make, month_year, pronouns
from .edits import (
    add_list_item,
    append_end,
    append_sentence,
    change_number,
    delete_sentence,
    find_sent,
    insert_middle,
    insert_start,
    reword,
    set_lead,
)
from .model import Entity, Para, Section, item, quantity, string
from .pages import PageStore
from .populate import make_company, make_film, make_footballer, make_person, marry, url_slug
from .schema import DISAMBIGUATION, PERSON_KINDS
from .site import add_entity_pages, add_talk_comment
from .text import link, words
from .world import World


class Evolution:
    """Applies one month of changes to the world and its pages, and records them."""

    def __init__(self, w: World, store: PageStore) -> None:
        self.w = w
        self.store = store
        self.r = w.rng
        self.log: list[dict] = []
        self.busy: set[str] = set()

    # -- bookkeeping ----------------------------------------------------------------------

    def record(self, change: str, e: Entity, **details) -> None:
        entry = {"type": change, "subject": e.qid, "label": e.label}
        if e.article:
            entry.update(page_id=e.article.page_id, title=e.article.title)
        entry.update(details)
        self.log.append(entry)

    def free(self, *kinds: str, article: bool = True) -> list[Entity]:
        """Entities of ``kinds`` untouched this month and older than this month."""
        return [e for e in self.w.of_kind(*kinds)
                if e.qid not in self.busy and e.created < self.w.month and (e.article or not article)]

    def claim(self, *entities: Entity) -> None:
        self.busy.update(e.qid for e in entities)

    def touch(self, e: Entity, comment: str) -> None:
        self.store.touch(e, comment)

    def repeat(self, fn: Callable[[], bool], n: int) -> None:
        for _ in range(n):
            fn()

    # -- the month ------------------------------------------------------------------------

    def run(self) -> list[dict]:
        r = self.r
        self.delete_article()
        self.rename_article()
        self.repeat(self.transfer, r.randint(2, 3))
        self.ceo_change()
        self.coach_change()
        self.mayor_change()
        self.repeat(self.population_update, r.randint(2, 3))
        self.repeat(self.new_award, r.randint(1, 2))
        self.new_relation("spouse")
        self.new_relation("winner" if self.due_events() else "website")
        self.repeat(self.delete_statement, 2)
        self.deprecate_statement()
        self.new_entities(r.randint(3, 5))
        for kind, fn, n in (("prose_start", insert_start, r.randint(1, 2)), ("prose_middle", insert_middle, r.randint(1, 2)),
                            ("prose_end", append_end, r.randint(1, 2)), ("prose_delete", delete_sentence, r.randint(1, 2)),
                            ("prose_reword", reword, r.randint(1, 2)), ("prose_number", change_number, r.randint(1, 2))):
            for _ in range(n):
                self.prose_edit(kind, fn)
        self.talk_comment()
        return self.log

    # -- articles -------------------------------------------------------------------------

    def delete_article(self) -> None:
        cands = [e for e in self.free("footballer", "film", "business", "actor", "politician")
                 if not self.w.referrers(e.qid)]
        if not cands:
            return
        e = self.r.choice(cands)
        self.record("deleted_article", e)
        self.store.delete_article(e)
        self.w.delete(e)

    def rename_article(self) -> None:
        cands = [e for e in self.free("footballer", "film") if e.article.page_id not in self.store.renamed]
        cands = [e for e in cands if f"{e.label} ({DISAMBIGUATION[e.kind]})".lower() not in self.w.names.taken]
        if not cands:
            return
        e = self.r.choice(cands)
        old = e.article.title
        self.claim(e)
        self.store.rename(e, f"{e.label} ({DISAMBIGUATION[e.kind]})")
        self.record("renamed_article", e, old_title=old, new_title=e.article.title)

    # -- facts and the prose that follows them --------------------------------------------

    def transfer(self) -> bool:
        w, r = self.w, self.r
        cands = [f for f in self.free("footballer") if find_sent(f, "lead")]
        if not cands:
            return False
        f = r.choice(cands)
        history = f.items("P54")
        clubs = [c for c in w.of_kind("club") if c.qid not in history]
        if not clubs:
            return False
        new = r.choice(clubs)
        old = f.attrs["club"]
        date_v, date_s = change_date(w)
        current = next(st for st in f.claims["P54"] if st.value == item(old) and st.counts())
        if r.random() < 0.35:
            w.remove(f, current)
        else:
            current.qualifiers.append(("P582", date_v))
        w.add(f, "P54", item(new.qid), qualifiers=[("P580", date_v)])
        f.attrs["club"] = new.qid
        find_sent(f, "lead").update(w.month, club=elink(w, new.qid))
        ctx = {"Last": f.attrs["last"], "date": date_s, "newclub": elink(w, new.qid), "oldclub": elink(w, old),
               "years": r.choice(["two", "three", "four", "five"]), "fee": f"{r.randint(1, 60)}.{r.randint(1, 9)}",
               "newclublabel": words(new.label)}
        sents = [make(w, f"transfer_{w.month}", P.FOOTBALLER["transfer"], ctx),
                 make(w, f"transfer_fee_{w.month}", P.FOOTBALLER["transfer_fee"], ctx)]
        section = f.article.section("Club career")
        idx = f.article.sections.index(section) + 1 if section else len(f.article.sections)
        while idx < len(f.article.sections) and f.article.sections[idx].level == 3:
            idx += 1
        f.article.sections.insert(idx, Section(new.label, 3, [Para(sents)]))
        self.claim(f)
        self.touch(f, f"/* Club career */ transfer to [[{new.label}]]")
        self.record("transfer", f, old_club=old, new_club=new.qid, removed_old=current not in f.claims.get("P54", []))
        return True

    def ceo_change(self) -> None:
        w, r = self.w, self.r
        companies = [c for c in self.free("company") if c.first("P169") and c.first("P169") not in self.busy]
        ceos = {c.first("P169") for c in w.of_kind("company")}
        spare = [b for b in self.free("business") if b.qid not in ceos]
        if not companies or not spare:
            return
        c, new = r.choice(companies), r.choice(spare)
        old = w.get(c.first("P169"))
        date_v, date_s = change_date(w)
        w.remove(c, next(st for st in c.claims["P169"] if st.counts()))
        w.add(c, "P169", item(new.qid), qualifiers=[("P580", date_v)])
        for st in list(old.claims.get("P108", [])):
            if st.value == item(c.qid):
                w.remove(old, st)
        w.add(new, "P108", item(c.qid), qualifiers=[("P580", date_v)])
        new.attrs.update(company=c.qid, since=w.changing().date.year)
        lead_ceo = find_sent(c, "lead_ceo")
        if lead_ceo:
            lead_ceo.update(w.month, ceo=elink(w, new.qid))
        append_sentence(w, c, "History", make(w, f"ceo_change_{w.month}", PT.COMPANY["ceo_change"], {},
                                              date=date_s, newceo=elink(w, new.qid), oldceo=elink(w, old.qid)))
        set_lead(w, new, P.BUSINESS["lead"], company=elink(w, c.qid))
        ctx = {"Last": new.attrs["last"], "date": date_s, "newcompany": elink(w, c.qid)}
        append_sentence(w, new, "Career", make(w, f"appointed_ceo_{w.month}", P.BUSINESS["appointed_ceo"], ctx))
        set_lead(w, old, P.BUSINESS["lead_free"])
        self.claim(c, new, old)
        for e in (c, new, old):
            self.touch(e, "New chief executive")
        self.record("ceo_change", c, old=old.qid, new=new.qid)

    def coach_change(self) -> None:
        w, r = self.w, self.r
        clubs = [c for c in self.free("club") if c.first("P286") and c.first("P286") not in self.busy]
        coaching = {c.first("P286") for c in w.of_kind("club")}
        spare = [x for x in self.free("coach") if x.qid not in coaching]
        if not clubs or not spare:
            return
        club, new = r.choice(clubs), r.choice(spare)
        old = w.get(club.first("P286"))
        date_v, date_s = change_date(w)
        w.remove(club, next(st for st in club.claims["P286"] if st.counts()))
        w.add(club, "P286", item(new.qid), qualifiers=[("P580", date_v)])
        year = w.changing().date.year
        new.attrs.update(club=club.qid, since=year)
        coach_s = find_sent(club, "coach")
        if coach_s:
            coach_s.update(w.month, coach=elink(w, new.qid), since=year)
        append_sentence(w, club, "History", make(w, f"coach_change_{w.month}", PT.CLUB["coach_change"], {},
                                                 date=date_s, newcoach=elink(w, new.qid), oldcoach=elink(w, old.qid)))
        set_lead(w, new, P.COACH["lead"], club=elink(w, club.qid))
        ctx = {"Last": new.attrs["last"], "date": date_s, "newclub": elink(w, club.qid),
               "years": r.choice(["two", "three"]), "oldclub": elink(w, club.qid)}
        append_sentence(w, new, "Managerial career", make(w, f"hired_{w.month}", P.COACH["hired"], ctx))
        set_lead(w, old, P.COACH["lead_free"], club=elink(w, club.qid))
        ctx_old = {**ctx, "Last": old.attrs["last"]}
        append_sentence(w, old, "Managerial career", make(w, f"sacked_{w.month}", P.COACH["sacked"], ctx_old))
        self.claim(club, new, old)
        for e in (club, new, old):
            self.touch(e, "New head coach")
        self.record("coach_change", club, old=old.qid, new=new.qid)

    def mayor_change(self) -> None:
        w, r = self.w, self.r
        cities = [c for c in self.free("city") if c.first("P6") and c.first("P6") not in self.busy]
        spare = [p for p in self.free("politician") if not p.attrs.get("office")]
        if not cities or not spare:
            return
        city = r.choice(cities)
        same = [p for p in spare if p.attrs["country"] == city.attrs["country"]] or spare
        new = r.choice(same)
        old = w.get(city.first("P6"))
        date_v, date_s = change_date(w)
        w.remove(city, next(st for st in city.claims["P6"] if st.counts()))
        w.add(city, "P6", item(new.qid), qualifiers=[("P580", date_v)])
        office = old.attrs["office"]
        for st in old.claims.get("P39", []):
            if st.value == item(office):
                st.qualifiers.append(("P582", date_v))
        w.add(new, "P39", item(office), qualifiers=[("P580", date_v)])
        year = w.changing().date.year
        new.attrs.update(office=office, since=year, place=city.qid)
        old.attrs["office"] = None
        mayor_s = find_sent(city, "mayor")
        if mayor_s:
            mayor_s.update(w.month, mayor=elink(w, new.qid), myear=year)
        append_sentence(w, city, "Government", make(w, f"mayor_change_{w.month}", PT.CITY["mayor_change"], {},
                                                    date=date_s, newmayor=elink(w, new.qid), oldmayor=elink(w, old.qid)))
        set_lead(w, new, P.POLITICIAN["lead"], office=link(w.label(office)), since=year)
        ctx = {"Last": new.attrs["last"], "date": date_s, "office": link(w.label(office))}
        append_sentence(w, new, "Political career", make(w, f"elected_{w.month}", P.POLITICIAN["elected"], ctx))
        party = old.first("P102")
        set_lead(w, old, P.POLITICIAN["lead_free"], party=link(w.label(party)) if party else "party")
        ctx_old = {**pronouns(old.attrs["gender"]), "date": date_s, "office": link(w.label(office))}
        append_sentence(w, old, "Political career", make(w, f"left_office_{w.month}", P.POLITICIAN["left_office"], ctx_old))
        self.claim(city, new, old)
        for e in (city, new, old):
            self.touch(e, "New mayor")
        self.record("mayor_change", city, old=old.qid, new=new.qid)

    def population_update(self) -> None:
        w, r = self.w, self.r
        cands = self.free("city") + (self.free("country") if r.random() < 0.4 else [])
        if not cands:
            return
        e = r.choice(cands)
        date_v, _ = change_date(w)
        current = [st for st in e.claims.get("P1082", []) if st.counts()]
        old_pop = int(current[-1].value[1][1:])
        new_pop = old_pop + r.choice([-1, 1]) * r.randint(max(1, old_pop // 400), max(2, old_pop // 60))
        mode = "replaced"
        if e.kind == "country":
            for st in current:
                st.rank = "normal"
            w.add(e, "P1082", quantity(new_pop), qualifiers=[("P585", date_v)], rank="preferred")
            mode = "added"
            sent = find_sent(e, "pop")
            if sent:
                sent.update(w.month, pop=str(new_pop), popyear=w.changing().date.year)
        else:
            w.remove(e, current[-1])
            w.add(e, "P1082", quantity(new_pop), qualifiers=[("P585", date_v)])
            sent = find_sent(e, "lead_pop")
            if sent and r.random() < 0.6:
                sent.update(w.month, pop=str(new_pop), popyear=w.changing().date.year)
            elif r.random() < 0.5:
                append_sentence(w, e, "Geography", make(w, f"pop_update_{w.month}", PT.CITY["pop_update"],
                                                        {"when": month_year(w)}, pop=str(new_pop)))
        e.attrs["pop"] = new_pop
        self.claim(e)
        self.touch(e, "Updated population estimate")
        self.record("population_update", e, old=old_pop, new=new_pop, mode=mode)

    def new_award(self) -> None:
        w, r = self.w, self.r
        cands = [p for p in self.free(*PERSON_KINDS) if not p.claims.get("P166")]
        if not cands:
            return
        p = r.choice(cands)
        award = w.award(p.kind, p.attrs["country"])
        date_v, _ = change_date(w)
        w.add(p, "P166", item(award), qualifiers=[("P585", date_v)])
        title = {"business": "Awards", "actor": "Awards and nominations"}.get(p.kind, "Honours")
        add_list_item(w, p, title, make(w, f"award_{award}", P.AWARD_ITEM, {}, award=link(w.label(award)),
                                  year=w.changing().date.year))
        self.claim(p)
        self.touch(p, "Added award")
        self.record("new_award", p, award=award)

    def due_events(self) -> list[Entity]:
        """Future tournaments that ended before the dump being built, still without a winner."""
        built = self.w.span.snapshot(self.w.month).date
        dump = (built.year, built.month, built.day)
        return [e for e in self.free("event") if e.attrs["future"] and not e.items("P1346")
                and wikidata_date(e.values("P582")[0][1]) < dump]

    def new_relation(self, kind: str) -> None:
        w, r = self.w, self.r
        if kind == "spouse":
            singles = [p for p in self.free("actor", "politician") if "P26" not in p.claims]
            if len(singles) < 2:
                return self.new_relation("website")
            a, b = r.sample(singles, 2)
            date_v, date_s = change_date(w)
            marry(w, a, b, date_v)
            for x, y in ((a, b), (b, a)):
                append_sentence(w, x, "Personal life", make(w, f"married_{w.month}", P.MARRIAGE, {},
                                                           Last=x.attrs["last"], spouse=elink(w, y.qid), date=date_s))
                self.touch(x, "/* Personal life */ marriage")
            self.claim(a, b)
            self.record("new_relation", a, relation="P26", object=b.qid)
            self.record("new_relation", b, relation="P26", object=a.qid)
        elif kind == "winner":
            e = r.choice(self.due_events())
            teams = e.attrs["teams"]
            for st in list(e.claims.get("P1346", [])):
                w.remove(e, st)
            w.add(e, "P1346", item(teams[0]))
            e.attrs["future"] = False
            ctx = event_ctx(w, e)
            set_lead(w, e, PT.EVENT["lead"], **{k: ctx[k] for k in ("bname", "nth", "series", "city", "start", "end")})
            end = e.values("P582")[0]
            append_sentence(w, e, None, make(w, "decided", PT.EVENT["decided"], ctx, date=date_text(end)))
            self.claim(e)
            self.touch(e, "Result")
            self.record("new_relation", e, relation="P1346", object=teams[0])
        else:
            cands = [e for e in self.free("city", "club") if "P856" not in e.claims]
            if not cands:
                return
            e = r.choice(cands)
            w.add(e, "P856", string(f"https://www.{url_slug(e.label)}.example/"))
            self.claim(e)
            self.touch(e, "Added official website")
            self.record("new_relation", e, relation="P856")

    def delete_statement(self) -> None:
        w, r = self.w, self.r
        cands = [(e, st) for e in self.free(*PERSON_KINDS, "city", "club")
                 for prop in ("P18", "P69", "P856") for st in e.claims.get(prop, []) if st.counts()]
        if not cands:
            return
        e, st = r.choice(cands)
        w.remove(e, st)
        self.claim(e)
        self.touch(e, "Removed unsourced statement")
        self.record("deleted_statement", e, relation=st.prop)

    def deprecate_statement(self) -> None:
        r = self.r
        cands = [(e, st) for e in self.free(*PERSON_KINDS, "club")
                 for prop in ("P69", "P1448") for st in e.claims.get(prop, []) if st.counts()]
        if not cands:
            return
        e, st = r.choice(cands)
        st.rank = "deprecated"
        self.claim(e)
        self.touch(e, "Deprecated statement")
        self.record("deprecated_statement", e, relation=st.prop)

    # -- new entities ---------------------------------------------------------------------

    def new_entities(self, n: int) -> None:
        w, r = self.w, self.r
        kinds = ["film", "footballer", "company"]
        for i in range(n):
            kind = kinds[i % 3] if i < 3 else r.choice(kinds)
            date_v, date_s = change_date(w)
            if kind == "film":
                actors = self.free("actor")
                directors = [a for a in actors if a.attrs.get("director")]
                if not directors or len(actors) < 3:
                    continue
                director = r.choice(directors)
                cast = r.sample([a for a in actors if a is not director], 2)
                e = make_film(w, director, cast, r.choice(w.of_kind("country")), date_v)
                write_article(w, e, new=True)
                add_entity_pages(w, self.store, e, talk_prob=0.1)
                ctx = {**pronouns(director.attrs["gender"]), "film": elink(w, e.qid), "when": month_year(w)}
                append_sentence(w, director, "Career", make(w, f"directed_{w.month}", P.ACTOR["directed"], ctx))
                for a in cast:
                    ctx = {**pronouns(a.attrs["gender"]), "film": elink(w, e.qid), "when": month_year(w)}
                    append_sentence(w, a, "Career", make(w, f"starred_{w.month}", P.ACTOR["starred"], ctx))
                self.claim(director, *cast)
                for a in (director, *cast):
                    self.touch(a, "Added new film")
            elif kind == "footballer":
                city = r.choice(w.of_kind("city"))
                e = make_footballer(w, w.get(city.attrs["country"]), city, w.of_kind("club"),
                                    born=(w.year(2001), w.year(2003)), since=date_v)
                write_article(w, e, new=True)
                add_entity_pages(w, self.store, e, talk_prob=0.0)
            else:
                city = r.choice(w.of_kind("city"))
                founder = make_person(w, "business", w.get(city.attrs["country"]), city,
                                      born=(w.year(1975), w.year(1992)))
                year, month, day = wikidata_date(date_v[1])
                e = make_company(w, city, founder, year, month, day)
                w.add(e, "P169", item(founder.qid), qualifiers=[("P580", date_v)])
                w.add(founder, "P108", item(e.qid), qualifiers=[("P580", date_v)])
                founder.attrs.update(company=e.qid, since=year)
                write_article(w, e, new=True)
                write_article(w, founder, new=True)
                add_entity_pages(w, self.store, e, talk_prob=0.0)
                add_entity_pages(w, self.store, founder, talk_prob=0.0)
                self.claim(founder)
                self.record("new_entity", founder, entity_kind=founder.kind)
            self.claim(e)
            self.record("new_entity", e, entity_kind=e.kind)

    # -- prose ----------------------------------------------------------------------------

    def prose_edit(self, kind: str, fn) -> None:
        cands = self.free("footballer", "coach", "politician", "business", "actor", "club", "company",
                          "city", "country", "film", "event")
        self.r.shuffle(cands)
        for e in cands[:10]:
            sents = fn(self.w, e)
            if sents:
                self.claim(e)
                self.touch(e, "Copyedit")
                field = "deleted" if kind == "prose_delete" else "sentences"
                self.record(kind, e, **{field: [s.plain for s in sents]})
                return

    def talk_comment(self) -> None:
        talks = [p for p in self.store.pages if p.ns == 1]
        if talks:
            page = self.r.choice(talks)
            add_talk_comment(self.w, self.store, page.title)
            self.log.append({"type": "talk_comment", "page_id": page.page_id, "title": page.title})


def evolve(w: World, store: PageStore) -> list[dict]:
    """Advance the world by one month (``w.month`` must already be the new month's index)."""
    return Evolution(w, store).run()
