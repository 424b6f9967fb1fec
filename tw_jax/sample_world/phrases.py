"""Sentence templates, by kind: the prose the articles are made of.

Each entry is a family of wordings of the same statement; month-to-month rewording switches
between them. Slots are filled from the entity's context (see ``articles.context``) or, for the
spare sentences that copy-edits insert, with fresh values. The years are the world's calendar:
``{season}`` and ``{lastyear}`` the season and the year before its start, ``{when}`` a month with
its year (``August 2021``). Templates never end on an
abbreviation or an initial and every sentence starts with a capital or a digit, so sentence
boundaries are unambiguous (``check.py`` enforces it on every build).
"""

from __future__ import annotations

T = tuple[str, ...]

PERSON: dict[str, T] = {
    "born_in": (
        "{Last} was born in {bcity}, {bcountry}, on {born}.",
        "{Last} was born on {born} in {bcity}, {bcountry}.",
    ),
    "parents": (
        "{His} father worked as a {job1} and {his} mother was a {job2}.",
        "{He} is the child of a {job1} and a {job2}.",
    ),
    "school": (
        "{He} attended St.{_nbsp}{saint} School in {bcitylabel} until {schoolyear}.",
        "Until {schoolyear}, {he} was a pupil at St.{_nbsp}{saint} School in {bcitylabel}.",
    ),
    "uni": (
        "{He} studied {subject} at the {uni}, graduating in {gradyear}.",
        "{He} graduated in {subject} from the {uni} in {gradyear}.",
    ),
    "spouse": (
        "{Last} is married to {spouse}.",
        "{He} is married to {spouse}, with whom {he} lives in {bcitylabel}.",
    ),
    "lives": (
        "{He} lives in {rcity} with {his} family.",
        "{Last} and {his} family live in {rcity}.",
    ),
    "hobby": (
        "In {his} spare time {he} is a keen {hobby}.",
        "{He} is a keen {hobby} in {his} spare time.",
    ),
}

PERSON_SPARE: dict[str, T] = {
    "sp_charity": (
        "{Last} is a patron of a children's charity based in {bcitylabel}.",
        "{Last} supports a children's charity in {bcitylabel} as its patron.",
    ),
    "sp_interview": (
        "In a {y1} interview, {Last} described {his} upbringing as modest.",
        "{Last} described {his} upbringing as modest in an interview given in {y1}.",
    ),
    "sp_book": (
        "{His} memoir was published in {y2} and sold more than {n5} copies.",
        "More than {n5} copies of {his} memoir were sold after its publication in {y2}.",
    ),
    "sp_lang": (
        "{He} speaks {demonym}, English and {lang} fluently.",
        "Besides {demonym} and English, {he} speaks fluent {lang}.",
    ),
    "sp_documentary": (
        "A documentary about {his} life premiered in {bcitylabel} in {y3}.",
        "In {y3}, a documentary about {his} life premiered in {bcitylabel}.",
    ),
    "sp_honorary": (
        "The University of {ucity} awarded {him} an honorary degree in {y4}.",
        "In {y4}, {he} received an honorary degree from the University of {ucity}.",
    ),
    "sp_nickname": (
        "{He} is nicknamed the {nick} by the press.",
        "The press calls {him} the {nick}.",
    ),
    "sp_marathon": (
        "{Last} completed the {bcitylabel} marathon in {y5} to raise money for a hospital.",
        "To raise money for a hospital, {Last} ran the {bcitylabel} marathon in {y5}.",
    ),
    "sp_portrait": (
        "A portrait of {Last} by the painter {painter} hangs in the town hall of {bcitylabel}.",
        "The town hall of {bcitylabel} displays a portrait of {Last} by the painter {painter}.",
    ),
    "sp_dr": (
        "{He} was treated by Dr.{_nbsp}{painter} after a serious injury in {y6}.",
        "After a serious injury in {y6}, {he} was treated by Dr.{_nbsp}{painter}.",
    ),
}

FOOTBALLER: dict[str, T] = {
    "lead": (
        "{bname} (born {born}) is a {demonym} professional {footballer} who plays as a {position} for {club}.",
        "{bname} (born {born}) is a {demonym} professional {footballer} who plays for {club} as a {position}.",
    ),
    "lead_nat": (
        "{He} has represented the {natteam} since {intyear}.",
        "Since {intyear}, {he} has been a member of the {natteam}.",
    ),
    "lead_style": (
        "{Last} is known for {his} {trait} and {skill}.",
        "Known for {his} {trait} and {skill}, {Last} is a regular starter for {his} club.",
    ),
    "youth": (
        "{Last} joined the youth academy of {youthclub} at the age of {age}.",
        "At the age of {age}, {Last} entered the youth academy of {youthclub}.",
    ),
    "peers": (
        "{He} is one of several {footballers} from {bcitylabel} to reach the top division.",
        "Several {footballers} from {bcitylabel} have reached the top division, {Last} among them.",
    ),
    "debut": (
        "{He} made {his} senior debut in {debutyear} against {rival}.",
        "{His} senior debut came in {debutyear} in a league match against {rival}.",
    ),
    "firstseason": (
        "During {his} first full season {he} scored {goals1} goals in {apps1} appearances.",
        "{He} scored {goals1} goals in {apps1} appearances during {his} first full season.",
    ),
    "signed": (
        "In {joinyear}, {Last} signed for {club} for a reported fee of {fee} million dollars.",
        "{club} signed {Last} in {joinyear} for a reported fee of {fee} million dollars.",
    ),
    "shirt": (
        "{He} was given the No.{_nbsp}{shirt} shirt upon arrival.",
        "Upon arrival {he} was handed the No.{_nbsp}{shirt} shirt.",
    ),
    "apps": (
        "By the end of the {season} season {he} had made {apps} appearances in all competitions.",
        "{He} had played {apps} matches in all competitions by the end of the {season} season.",
    ),
    "intdebut": (
        "{Last} made {his} international debut in {intyear} against {opp}.",
        "{His} international debut came against {opp} in {intyear}.",
    ),
    "caps": (
        "{He} has earned {caps} caps and scored {intgoals} goals for {his} country.",
        "For {his} country {he} has scored {intgoals} goals in {caps} matches.",
    ),
    "transfer": (
        "On {date}, {Last} joined {newclub} from {oldclub} on a {years}-year contract.",
        "{newclub} signed {Last} from {oldclub} on {date} on a {years}-year contract.",
    ),
    "transfer_fee": (
        "The fee was reported to be {fee} million dollars, a club record for {newclublabel}.",
        "Reports put the fee at {fee} million dollars, a club record for {newclublabel}.",
    ),
}

FOOTBALLER_SPARE: dict[str, T] = {
    "sp_idol": (
        "{He} has named the former {demonym} striker {painter} as {his} childhood idol.",
        "The former {demonym} striker {painter} was {his} childhood idol.",
    ),
    "sp_injury": (
        "{Last} missed {n2} matches of the {y1} season with a knee injury.",
        "A knee injury kept {Last} out of {n2} matches of the {y1} season.",
    ),
    "sp_captain": (
        "{He} captained {his} club for the first time in {y2}.",
        "In {y2}, {he} wore the captain's armband for the first time.",
    ),
    "sp_hattrick": (
        "{He} scored {his} first professional hat-trick in {y3}.",
        "{His} first professional hat-trick came in {y3}.",
    ),
}

COACH: dict[str, T] = {
    "lead": (
        "{bname} (born {born}) is a {demonym} football manager and former player who is the head coach of {club}.",
        "{bname} (born {born}) is a {demonym} former {footballer} and the current head coach of {club}.",
    ),
    "lead_free": (
        "{bname} (born {born}) is a {demonym} football manager and former player who last coached {club}.",
        "{bname} (born {born}) is a {demonym} former {footballer} who most recently coached {club}.",
    ),
    "playing": (
        "As a player {he} spent {pyears} seasons as a {position} with {pclub}.",
        "{He} played as a {position} for {pclub} for {pyears} seasons.",
    ),
    "retired": (
        "{Last} retired from playing in {retyear} and took {his} coaching licence soon after.",
        "After retiring in {retyear}, {Last} took {his} coaching licence.",
    ),
    "appointed": (
        "{He} was appointed head coach of {club} in {since}.",
        "In {since}, {club} appointed {him} as head coach.",
    ),
    "style": (
        "{His} teams are known for a {tactic} style of play.",
        "{Last} favours a {tactic} style of play.",
    ),
    "hired": (
        "On {date}, {newclub} appointed {Last} as head coach on a {years}-year contract.",
        "{newclub} named {Last} head coach on {date}, on a {years}-year contract.",
    ),
    "sacked": (
        "{Last} left {oldclub} on {date} after a run of poor results.",
        "After a run of poor results, {Last} left {oldclub} on {date}.",
    ),
}

POLITICIAN: dict[str, T] = {
    "lead": (
        "{bname} (born {born}) is a {demonym} {politician} who has served as {office} since {since}.",
        "{bname} (born {born}) is a {demonym} {politician} and the {office} since {since}.",
    ),
    "lead_free": (
        "{bname} (born {born}) is a {demonym} {politician} and a member of the {party}.",
        "{bname} (born {born}) is a {demonym} {politician} who belongs to the {party}.",
    ),
    "party": (
        "{He} joined the {party} in {partyyear}.",
        "In {partyyear}, {he} became a member of the {party}.",
    ),
    "council": (
        "{Last} was first elected to the city council of {bcitylabel} in {councilyear}.",
        "{His} first election was to the city council of {bcitylabel} in {councilyear}.",
    ),
    "phd": (
        "{He} later earned a doctorate in {subject2} and is often addressed as Dr.{_nbsp}{Last} in parliament.",
        "After earning a doctorate in {subject2}, {he} is often addressed as Dr.{_nbsp}{Last} in parliament.",
    ),
    "votes": (
        "In the {electyear} election {he} received {votes} votes.",
        "{He} won {votes} votes in the {electyear} election.",
    ),
    "elected": (
        "On {date}, {Last} was sworn in as {office}.",
        "{Last} took office as {office} on {date}.",
    ),
    "left_office": (
        "{His} term as {office} ended on {date}.",
        "{He} stepped down as {office} on {date}.",
    ),
}

BUSINESS: dict[str, T] = {
    "lead": (
        "{bname} (born {born}) is a {demonym} business executive who is the chief executive officer of {company}.",
        "{bname} (born {born}) is a {demonym} {businessperson} and the chief executive of {company}.",
    ),
    "lead_free": (
        "{bname} (born {born}) is a {demonym} {businessperson} and investor.",
        "{bname} (born {born}) is a {demonym} investor and {businessperson}.",
    ),
    "early_job": (
        "{He} began {his} career as an analyst at a bank in {bcitylabel} in {jobyear}.",
        "In {jobyear}, {he} started work as an analyst at a bank in {bcitylabel}.",
    ),
    "rise": (
        "{Last} joined {company} in {joinyear} and rose to lead its {division} division.",
        "After joining {company} in {joinyear}, {Last} rose to lead its {division} division.",
    ),
    "wealth": (
        "{His} personal fortune was estimated at {wealth} million dollars in {lastyear}.",
        "In {lastyear} {his} personal fortune was estimated at {wealth} million dollars.",
    ),
    "appointed_ceo": (
        "On {date}, {Last} was appointed chief executive officer of {newcompany}.",
        "{newcompany} named {Last} its chief executive officer on {date}.",
    ),
    "founded_co": (
        "In {when} {he} founded {newcompany} in {city}.",
        "{He} founded {newcompany} in {city} in {when}.",
    ),
}

ACTOR: dict[str, T] = {
    "lead": (
        "{bname} (born {born}) is a {demonym} {actor} known for {his} work in film and theatre.",
        "{bname} (born {born}) is a {demonym} {actor} who works in film and theatre.",
    ),
    "lead_director": (
        "{He} has also directed several feature films.",
        "{He} is also a film director.",
    ),
    "drama_school": (
        "{He} trained at the {bcitylabel} Academy of Dramatic Arts from {dramayear}.",
        "From {dramayear}, {he} trained at the {bcitylabel} Academy of Dramatic Arts.",
    ),
    "stage": (
        "{His} stage debut was in a production of {play} in {stageyear}.",
        "{He} made {his} stage debut in {stageyear} in a production of {play}.",
    ),
    "breakthrough": (
        "{His} breakthrough came with the television series {series} in {tvyear}.",
        "The television series {series} brought {him} wider recognition in {tvyear}.",
    ),
    "starred": (
        "In {when}, {he} starred in the film {film}.",
        "{He} starred in the film {film}, released in {when}.",
    ),
    "directed": (
        "{He} directed the film {film}, which was released in {when}.",
        "In {when}, {his} film {film} was released.",
    ),
}

MARRIAGE: T = (
    "On {date}, {Last} married {spouse}.",
    "{Last} and {spouse} married on {date}.",
)
AWARD_ITEM: T = ("{award}: {year}.", "{award} ({year}).")
HONOUR_ITEM: T = ("{league} champion with {club}: {year}.", "Champion of the {league} with {club}: {year}.")
