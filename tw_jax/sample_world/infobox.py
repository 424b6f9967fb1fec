"""Infoboxes and generated tables: wikitext that the plain text never shows.

They are rendered from the entity's current statements every month (so a transfer or a new
mayor changes them), and must not draw from the random generator: a page whose facts did not
change has to come out byte-identical. Numbers they need come from :func:`stable_int`.
"""

from __future__ import annotations

import hashlib

from .model import Entity, Value
from .world import World


def stable_int(key: str, lo: int, hi: int) -> int:
    """A number in [lo, hi] fixed by ``key`` (no random state involved)."""
    digest = int.from_bytes(hashlib.md5(key.encode()).digest()[:8], "big")
    return lo + digest % (hi - lo + 1)


def build_render_index(w: World) -> dict:
    """Reverse lookups for one rendering pass (squads, coaches, filmographies, clubs by city)."""
    index: dict = {"squad": {}, "coach": {}, "films": {}, "city_clubs": {}}
    for p in w.of_kind("footballer"):
        index["squad"].setdefault(p.attrs.get("club"), []).append(p)
    for c in w.of_kind("club"):
        index["city_clubs"].setdefault(c.attrs["city"], []).append(c)
        coach = c.first("P286")
        if coach:
            index["coach"].setdefault(coach, []).append(c)
    for f in w.of_kind("film"):
        for q in dict.fromkeys(f.items("P57") + f.items("P161")):
            index["films"].setdefault(q, []).append(f)
    return index


def _lookup(w: World, table: str, key: str, scan) -> list[Entity]:
    if w.render_index is not None:
        return w.render_index[table].get(key, [])
    return scan()


def coached_clubs(w: World, coach: str) -> list[Entity]:
    return _lookup(w, "coach", coach, lambda: [c for c in w.of_kind("club") if c.first("P286") == coach])


def clubs_in(w: World, city: str) -> list[Entity]:
    return _lookup(w, "city_clubs", city, lambda: [c for c in w.of_kind("club") if c.attrs["city"] == city])


def squad(w: World, club: str) -> list[Entity]:
    return _lookup(w, "squad", club, lambda: [p for p in w.of_kind("footballer") if p.attrs.get("club") == club])


def films_of(w: World, person: str) -> list[Entity]:
    return _lookup(w, "films", person, lambda: [f for f in w.of_kind("film")
                                                if person in f.items("P161") or f.first("P57") == person])


def ymd(value: Value) -> tuple[int, int, int]:
    t = value[1]
    return int(t[1:5]), int(t[6:8]), int(t[9:11])


def wl(w: World, qid: str | None, label: str | None = None) -> str:
    """``[[Title|Label]]`` for an entity (its article's title if it has one)."""
    if not qid or qid not in w.entities:
        return ""
    e = w.get(qid)
    title = e.article.title if e.article else e.label
    shown = label or e.label
    return f"[[{title}]]" if title == shown else f"[[{title}|{shown}]]"


def _box(name: str, fields: list[tuple[str, str]]) -> str:
    lines = [f"{{{{{name}"]
    lines += [f"| {k} = {v}" for k, v in fields if v != ""]
    return "\n".join(lines) + "\n}}"


def _birth(w: World, e: Entity) -> list[tuple[str, str]]:
    y, m, d = e.attrs["birth"]
    return [("birth_date", f"{{{{birth date and age|{y}|{m}|{d}|df=y}}}}"),
            ("birth_place", f"{wl(w, e.attrs['city'])},<br />{wl(w, e.attrs['country'])}")]


def _image(e: Entity) -> list[tuple[str, str]]:
    images = [v[1] for v in e.values("P18")]
    return [("image", images[0])] if images else []


def _awards(w: World, e: Entity) -> str:
    awards = e.items("P166")
    if not awards:
        return ""
    return "{{plainlist|\n" + "\n".join(f"* {wl(w, a)}" for a in awards) + "\n}}"


def _clubs(w: World, e: Entity) -> list[tuple[str, str]]:
    out = []
    for i, st in enumerate([s for s in e.claims.get("P54", []) if s.counts()], 1):
        q = dict(st.qualifiers)
        start = ymd(q["P580"])[0] if "P580" in q else ""
        end = ymd(q["P582"])[0] if "P582" in q else ""
        out += [(f"years{i}", f"{start}&ndash;{end}"), (f"clubs{i}", wl(w, st.value[1])),
                (f"caps{i}", str(stable_int(f"{e.qid}{st.sid}c", 5, 160))),
                (f"goals{i}", str(stable_int(f"{e.qid}{st.sid}g", 0, 60)))]
    return out


def person_box(w: World, e: Entity) -> str:
    a = e.attrs
    if e.kind in ("footballer", "coach"):
        pos = e.first("P413")
        fields = [("name", e.label), *_image(e), ("full_name", f"{a['first']} {a['last']}"), *_birth(w, e),
                  ("height", f"{{{{height|m=1.{stable_int(e.qid + 'h', 68, 94)}}}}}"),
                  ("position", wl(w, pos, w.label(pos).capitalize()) if pos else "")]
        if e.kind == "footballer":
            fields += [("currentclub", wl(w, a["club"])), ("clubnumber", str(stable_int(e.qid + "n", 1, 99))),
                       ("youthclubs1", wl(w, a["youthclub"]))]
        else:
            coached = coached_clubs(w, e.qid)
            fields += [("currentclub", wl(w, coached[0].qid) if coached else ""),
                       ("manageryears1", f"{a.get('since', w.year(2018))}&ndash;"), ("managerclubs1", wl(w, a["club"]))]
        fields += _clubs(w, e)
        return _box("Infobox football biography", fields)
    if e.kind == "politician":
        offices = [st for st in e.claims.get("P39", []) if st.counts()]
        fields = [("name", e.label), *_image(e)]
        for i, st in enumerate(offices, 1):
            q = dict(st.qualifiers)
            suffix = "" if i == 1 else str(i)
            fields += [(f"office{suffix}", wl(w, st.value[1])),
                       (f"term_start{suffix}", f"{{{{start date|{ymd(q['P580'])[0]}}}}}" if "P580" in q else ""),
                       (f"term_end{suffix}", f"{{{{end date|{ymd(q['P582'])[0]}}}}}" if "P582" in q else "")]
        fields += [*_birth(w, e), ("party", wl(w, e.first("P102"))), ("spouse", wl(w, e.first("P26"))),
                   ("alma_mater", wl(w, e.first("P69"))), ("awards", _awards(w, e))]
        return _box("Infobox officeholder", fields)
    occupation = "[[Business executive]]" if e.kind == "business" else "[[Actor]]"
    fields = [("name", e.label), *_image(e), *_birth(w, e),
              ("nationality", f"{{{{flagicon|{w.label(a['country'])}}}}} {w.get(a['country']).attrs['demonym']}"),
              ("occupation", occupation), ("employer", wl(w, e.first("P108"))),
              ("title", "[[Chief executive officer]]" if e.first("P108") else ""),
              ("alma_mater", wl(w, e.first("P69"))), ("spouse", wl(w, e.first("P26"))), ("awards", _awards(w, e))]
    return _box("Infobox person", fields)


def thing_box(w: World, e: Entity) -> str:
    a = e.attrs
    site = [v[1] for v in e.values("P856")]
    url = f"{{{{URL|{site[0]}}}}}" if site else ""
    if e.kind == "club":
        names = [v[1] for v in e.values("P1448")]
        return _box("Infobox football club", [
            ("clubname", e.label), ("image", f"{e.label} logo.svg"), ("fullname", names[0] if names else ""),
            ("founded", f"{{{{start date and age|{a['founded']}}}}}"), ("ground", wl(w, e.first("P115"))),
            ("capacity", f"{{{{formatnum:{a['capacity']}}}}}"), ("manager", wl(w, e.first("P286"))),
            ("league", wl(w, e.first("P118"))), ("season", f"{w.year(2020)}&ndash;{w.year(2021) % 100:02d}"),
            ("position", f"{stable_int(e.qid + 'p', 1, 18)}th"), ("website", url)])
    if e.kind == "company":
        inception = e.values("P571")[0]
        y, m, d = ymd(inception)
        founded = f"{{{{start date and age|{y}|{m}|{d}}}}}" if d else f"{{{{start date and age|{y}}}}}"
        emp = [v[1][1:] for v in e.values("P1128")]
        ceo = e.first("P169")
        return _box("Infobox company", [
            ("name", e.label), ("logo", f"{a['short']} logo.svg"), ("type", "[[Public company|Public]]"),
            ("industry", wl(w, e.first("P452"), a["industry"].capitalize())),
            ("founded", f"{founded} in {wl(w, a['city'])}"), ("founder", wl(w, e.first("P112"))),
            ("hq_location_city", wl(w, e.first("P159"))), ("hq_location_country", wl(w, e.first("P17"))),
            ("key_people", f"{wl(w, ceo)} ([[Chief executive officer|CEO]])" if ceo else ""),
            ("revenue", f"{{{{increase}}}} {{{{US$|{a['revenue']} million}}}} ({w.year(2020)})"),
            ("num_employees", f"{{{{formatnum:{emp[0]}}}}} ({w.year(2020)})" if emp else ""), ("website", url)])
    if e.kind == "city":
        pops = [st for st in e.claims.get("P1082", []) if st.counts()]
        pop = pops[-1].value[1][1:] if pops else ""
        return _box("Infobox settlement", [
            ("name", e.label), ("official_name", f"City of {e.label}"), ("settlement_type", "[[City]]"),
            ("image_skyline", f"{e.label} skyline.jpg"), ("subdivision_type", "Country"),
            ("subdivision_name", f"{{{{flag|{w.label(a['country'])}}}}}"), ("subdivision_type1", "Province"),
            ("subdivision_name1", wl(w, e.first("P131"))), ("leader_title", "[[Mayor]]"),
            ("leader_name", wl(w, e.first("P6"))), ("established_title", "First mentioned"),
            ("established_date", str(a["founded"])), ("area_total_km2", a["area"]),
            ("population_total", f"{{{{formatnum:{pop}}}}}" if pop else ""), ("population_as_of", str(population_year(w, pops))),
            ("website", url)])
    if e.kind == "country":
        pops = [st for st in e.claims.get("P1082", []) if st.counts()]
        return _box("Infobox country", [
            ("conventional_long_name", a["official"]), ("common_name", e.label), ("capital", wl(w, e.first("P36"))),
            ("leader_title1", f"[[President of {e.label}|President]]"), ("leader_name1", wl(w, e.first("P35"))),
            ("leader_title2", f"[[Prime Minister of {e.label}|Prime Minister]]"), ("leader_name2", wl(w, e.first("P6"))),
            ("area_km2", e.values("P2046")[0][1][1:]),
            ("population_estimate", f"{{{{formatnum:{pops[-1].value[1][1:]}}}}}" if pops else ""),
            ("established_event1", "Independence"), ("established_date1", str(a["indep"])), ("website", url)])
    if e.kind == "film":
        y, m, d = ymd(e.values("P577")[0])
        cast = "{{plainlist|\n" + "\n".join(f"* {wl(w, q)}" for q in e.items("P161")) + "\n}}"
        return _box("Infobox film", [
            ("name", e.label), ("image", f"{e.label} poster.jpg"), ("caption", "Theatrical release poster"),
            ("director", wl(w, e.first("P57"))), ("starring", cast),
            ("released", f"{{{{Film date|{y}|{m}|{d}|df=y}}}}"), ("country", w.label(a["country"])),
            ("language", "English"), ("budget", f"${a['budget']} million"), ("gross", f"${a['gross']} million")])
    (y1, m1, d1), (y2, m2, d2) = ymd(e.values("P580")[0]), ymd(e.values("P582")[0])
    return _box("Infobox football tournament season", [
        ("tourney_name", a["series"]), ("year", str(a["year"])), ("country", wl(w, a["country"])),
        ("dates", f"{{{{dts|{y1}|{m1}|{d1}}}}} &ndash; {{{{dts|{y2}|{m2}|{d2}}}}}"),
        ("num_teams", str(len(a["teams"]) * 4)), ("champion", wl(w, e.first("P1346"))),
        ("matches", str(stable_int(e.qid + "m", 15, 31)))])


def population_year(w: World, pops: list) -> int:
    """The year a city's population is given as of: the start year, or the year of a later
    estimate (its ``P585``)."""
    dated = [ymd(dict(st.qualifiers)["P585"])[0] for st in pops[-1:] if "P585" in dict(st.qualifiers)]
    return max([w.year(2021), *dated])


def generated_table(w: World, e: Entity, name: str) -> str:
    """The tables marked ``@stats``, ``@squad``, ``@filmography``, ``@participants`` in articles."""
    if name == "@stats":
        rows = []
        for st in [s for s in e.claims.get("P54", []) if s.counts()]:
            q = dict(st.qualifiers)
            start = ymd(q["P580"])[0] if "P580" in q else w.year(2015)
            rows.append(f"|-\n| {wl(w, st.value[1])} || {start}&ndash;{str(start + 1)[2:]} || "
                        f"{stable_int(st.sid + 'a', 3, 38)} || {stable_int(st.sid + 'g', 0, 20)}")
        return ('{| class="wikitable" style="text-align:center"\n|+ Appearances and goals by club and season\n'
                "! Club !! Season !! Apps !! Goals\n" + "\n".join(rows) + "\n|}")
    if name == "@squad":
        players = squad(w, e.qid)
        rows = [f"|-\n| {stable_int(p.qid + 'n', 1, 99)} || {w.label(p.first('P413'))[:2].upper()} || "
                f"{{{{flagicon|{w.label(p.attrs['country'])}}}}} || {wl(w, p.qid)}" for p in players]
        return ('{| class="wikitable"\n! No. !! Pos. !! Nation !! Player\n' + "\n".join(rows) + "\n|}")
    if name == "@filmography":
        films = films_of(w, e.qid)
        rows = []
        for f in films:
            role = "Director" if f.first("P57") == e.qid else "Cast"
            rows.append(f"|-\n| {ymd(f.values('P577')[0])[0]} || ''{wl(w, f.qid)}'' || {role}")
        return '{| class="wikitable sortable"\n! Year !! Title !! Role\n' + "\n".join(rows) + "\n|}"
    if name == "@participants":
        rows = [f"|-\n| {wl(w, q)} || {wl(w, w.get(q).attrs['city'])}" for q in e.attrs["teams"] if q in w.entities]
        return '{| class="wikitable"\n! Club !! City\n' + "\n".join(rows) + "\n|}"
    raise KeyError(name)

