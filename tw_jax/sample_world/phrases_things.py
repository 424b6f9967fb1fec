"""Sentence templates for clubs, companies, places, films and tournaments (see ``phrases``)."""

from __future__ import annotations

T = tuple[str, ...]

CLUB: dict[str, T] = {
    "lead": (
        "{bname} is a professional {football} club based in {city}, {country}.",
        "{bname} is a professional {football} club from {city}, {country}.",
    ),
    "lead_league": (
        "The club competes in the {league}, the top tier of {demonym} football.",
        "It plays in the {league}, the highest level of {demonym} football.",
    ),
    "lead_ground": (
        "Home matches are played at the {venue}, which holds {capacity} spectators.",
        "The team plays its home matches at the {venue}, with room for {capacity} spectators.",
    ),
    "founded": (
        "The club was founded in {founded} by workers of a local {ind} plant.",
        "Workers of a local {ind} plant founded the club in {founded}.",
    ),
    "first_title": (
        "It won its first national title in {titleyear}.",
        "Its first national title came in {titleyear}.",
    ),
    "relegation": (
        "The club was relegated in {relyear} and returned to the top flight two seasons later.",
        "After relegation in {relyear}, the club returned to the top flight two seasons later.",
    ),
    "coach": (
        "Since {since}, the team has been coached by {coach}.",
        "The team has been coached by {coach} since {since}.",
    ),
    "coach_change": (
        "On {date}, the club appointed {newcoach} as head coach in place of {oldcoach}.",
        "{newcoach} replaced {oldcoach} as head coach on {date}.",
    ),
    "stadium": (
        "The {venuelabel} was opened in {openyear} and renovated in {renoyear}.",
        "Opened in {openyear}, the {venuelabel} was renovated in {renoyear}.",
    ),
    "record": (
        "Its record attendance of {record} was set in {recyear} {small}.",
        "A record crowd of {record} watched a match there in {recyear} {small}.",
    ),
    "rival": (
        "The club's fiercest rival is {rival}, and their matches draw the largest crowds of the season.",
        "Matches against {rival}, the club's fiercest rival, draw the largest crowds of the season.",
    ),
    "colours": (
        "The team traditionally plays in {colour1} shirts and {colour2} shorts.",
        "Its traditional kit is {colour1} shirts with {colour2} shorts.",
    ),
}

COMPANY: dict[str, T] = {
    "lead": (
        "{bname} is a {demonym} {industry} company headquartered in {hq}.",
        "{bname} is a company in the {industry} industry, based in {hq}, {country}.",
    ),
    "lead_ceo": (
        "The company is led by its chief executive officer, {ceo}.",
        "Its chief executive officer is {ceo}.",
    ),
    "lead_size": (
        "In {lastyear} it employed {employees} people and reported revenue of {revenue} million dollars.",
        "It reported revenue of {revenue} million dollars in {lastyear}, with {employees} employees.",
    ),
    "founded": (
        "The company was founded in {founded} in {fcity}.",
        "It was founded in {fcity} in {founded}.",
    ),
    "founder": (
        "Its founder, {founder}, still sits on the board.",
        "{founder}, who founded the company, still sits on the board.",
    ),
    "listing": (
        "Its shares were first traded on the {hqlabel} stock exchange in {listyear}.",
        "The company went public on the {hqlabel} stock exchange in {listyear}.",
    ),
    "acquisition": (
        "In {acqyear}, it bought its smaller rival {rivalco} for {acqprice} million dollars.",
        "It acquired its smaller rival {rivalco} in {acqyear} for {acqprice} million dollars.",
    ),
    "plants": (
        "The company operates {nplants} manufacturing {plants} and {noffices} sales offices.",
        "It runs {nplants} manufacturing {plants} as well as {noffices} sales offices.",
    ),
    "rnd": (
        "About {pct} percent of its revenue is spent on research {_amp} development.",
        "It spends about {pct} percent of its revenue on research {_amp} development.",
    ),
    "website": (
        "The company publishes its annual reports on its {site}.",
        "Annual reports are published on the company's {site}.",
    ),
    "ceo_change": (
        "On {date}, {newceo} succeeded {oldceo} as chief executive officer.",
        "{newceo} took over from {oldceo} as chief executive officer on {date}.",
    ),
    "new_lead": (
        "{bname} is a {demonym} {industry} company founded in {when} in {hq}.",
        "{bname} is a company in the {industry} industry, founded in {hq} in {when}.",
    ),
}

CITY: dict[str, T] = {
    "lead": (
        "{bname} is a city in {region}, {country}.",
        "{bname} is a city of {country}, located in {region}.",
    ),
    "lead_capital": (
        "It is the capital and largest city of {country}.",
        "The city is the capital of {country} and its largest city.",
    ),
    "lead_pop": (
        "As of {popyear}, the city had a population of {pop}.",
        "The city had a population of {pop} as of {popyear}.",
    ),
    "founded": (
        "{Short} is first mentioned in records from {founded}.",
        "The earliest records of {Short} date from {founded}.",
    ),
    "charter": (
        "The town received a royal charter in {charter}.",
        "A royal charter was granted to the town in {charter}.",
    ),
    "growth": (
        "During the {century} century the city grew around its {ind} industry.",
        "The {ind} industry drove the growth of the city during the {century} century.",
    ),
    "river": (
        "{Short} lies on the banks of the {river} River, one of the longest {rivers} in the region.",
        "The {river} River, one of the longest {rivers} in the region, runs through {Short}.",
    ),
    "area": (
        "The city covers an area of {area} square kilometres.",
        "Its area is {area} square kilometres.",
    ),
    "landmark": (
        "Its best known landmark is St.{_nbsp}{saint} Cathedral, completed in {cathedral}.",
        "St.{_nbsp}{saint} Cathedral, completed in {cathedral}, is its best known landmark.",
    ),
    "mayor": (
        "The current mayor is {mayor}, who took office in {myear}.",
        "{mayor} has been the mayor since {myear}.",
    ),
    "mayor_change": (
        "On {date}, {newmayor} succeeded {oldmayor} as mayor.",
        "{newmayor} replaced {oldmayor} as mayor on {date}.",
    ),
    "pop_update": (
        "An estimate published in {when} put the population at {pop}.",
        "The population was estimated at {pop} in {when}.",
    ),
    "sports": (
        "The city is home to the football club {club}.",
        "The football club {club} is based in the city.",
    ),
    "university": (
        "The {uni} was founded in the city in {uniyear}.",
        "In {uniyear}, the {uni} was founded in the city.",
    ),
}

COUNTRY: dict[str, T] = {
    "lead": (
        "{bname}, officially the {official}, is a country on the western coast of the Selden Sea.",
        "{bname}, officially the {official}, is a sovereign state on the Selden Sea.",
    ),
    "lead_cap": ("Its capital is {capital}.", "The capital is {capital}."),
    "lead_popm": (
        "It has a population of about {popm} million people.",
        "About {popm} million people live in the country.",
    ),
    "independence": (
        "The country became independent in {indep}.",
        "Independence was declared in {indep}.",
    ),
    "hos": ("The head of state is {hos}.", "{hos} is the head of state."),
    "hog": ("The head of government is {hog}.", "{hog} leads the government."),
    "economy": (
        "Its economy is based on {ind1}, {ind2} and tourism.",
        "Tourism, {ind1} and {ind2} are the main sectors of its economy.",
    ),
    "pop": (
        "According to the {popyear} estimate, the population was {pop}.",
        "The {popyear} estimate gave a population of {pop}.",
    ),
    "area": (
        "The country covers {area} square kilometres.",
        "Its territory covers {area} square kilometres.",
    ),
    "hog_change": (
        "On {date}, {newhog} succeeded {oldhog} as head of government.",
        "{newhog} replaced {oldhog} as head of government on {date}.",
    ),
}

FILM: dict[str, T] = {
    "lead": (
        "{bname} is a {year} {demonym} {genre} film directed by {director}.",
        "{bname} is a {demonym} {genre} film from {year}, directed by {director}.",
    ),
    "lead_cast": ("It stars {cast1} and {cast2}.", "The film stars {cast1} and {cast2}."),
    "lead_release": (
        "The film was released on {released} and grossed {gross} million dollars worldwide.",
        "Released on {released}, it grossed {gross} million dollars worldwide.",
    ),
    "plot1": (
        "A young {role} returns to {setting} after the death of {rel}.",
        "After the death of {rel}, a young {role} returns to {setting}.",
    ),
    "plot2": (
        "There {pron} uncovers a secret that {pron2} family had kept for {decades} decades.",
        "{Pron} uncovers a secret that {pron2} family had kept for {decades} decades.",
    ),
    "budget": (
        "The film was made on a budget of {budget} million dollars.",
        "Its budget was {budget} million dollars.",
    ),
    "shoot": (
        "Principal photography began in {shootcity} in {shootmonth} {shootyear}.",
        "Filming started in {shootmonth} {shootyear} in {shootcity}.",
    ),
    "review": (
        "Critics praised the {aspect1} but found the {aspect2} uneven.",
        "Reviewers admired the {aspect1} while calling the {aspect2} uneven.",
    ),
    "tickets": (
        "It sold {tickets} tickets in its opening week.",
        "In its opening week the film sold {tickets} tickets.",
    ),
    "role": ("{actor} as {character}.", "{actor} plays {character}."),
    "award": (
        "On {date}, the film won the {award}.",
        "The film received the {award} on {date}.",
    ),
}

EVENT: dict[str, T] = {
    "lead": (
        "The {bname} was the {nth} edition of the {series}, held in {city} from {start} to {end}.",
        "The {bname}, the {nth} edition of the {series}, took place in {city} from {start} to {end}.",
    ),
    "lead_future": (
        "The {bname} is the {nth} edition of the {series}, held in {city} from {start} to {end}.",
        "The {bname}, the {nth} edition of the {series}, takes place in {city} from {start} to {end}.",
    ),
    "winner": (
        "{winner} won the tournament, beating {runner} in the final.",
        "The tournament was won by {winner}, who beat {runner} in the final.",
    ),
    "teams": (
        "{nteams} clubs took part in the tournament.",
        "The tournament had {nteams} participating clubs.",
    ),
    "goals": (
        "A total of {goals} goals were scored in {matches} matches.",
        "The {matches} matches produced {goals} goals.",
    ),
    "final": (
        "The final was played at the {venue} in front of {attendance} spectators.",
        "A crowd of {attendance} watched the final at the {venue}.",
    ),
    "scorer": (
        "The top scorer was {scorer} with {sgoals} goals.",
        "{scorer} finished as top scorer with {sgoals} goals.",
    ),
    "decided": (
        "On {date}, {winner} won the final against {runner}.",
        "{winner} beat {runner} in the final on {date}.",
    ),
}

THING_SPARE: dict[str, T] = {
    "sp_history_note": (
        "A history of {Short} written by {painter} appeared in {y1}.",
        "In {y1}, {painter} published a history of {Short}.",
    ),
    "sp_exhibition": (
        "An exhibition about {Short} was shown at the national museum in {y2}.",
        "The national museum showed an exhibition about {Short} in {y2}.",
    ),
    "sp_visitors": (
        "More than {n5} visitors came to events connected with {Short} in {y3}.",
        "In {y3}, events connected with {Short} drew more than {n5} visitors.",
    ),
    "sp_archive": (
        "Records about {Short} from before {y4} are kept in the national archive.",
        "The national archive keeps records about {Short} from before {y4}.",
    ),
    "sp_anniversary": (
        "A celebration marked the {nth} anniversary of {Short} in {y5}.",
        "In {y5}, a celebration marked the {nth} anniversary of {Short}.",
    ),
    "sp_stamp": (
        "The national postal service issued a stamp featuring {Short} in {y6}.",
        "In {y6}, a postage stamp featuring {Short} was issued.",
    ),
    "sp_study": (
        "A study published in {y7} counted {n3} mentions of {Short} in national newspapers.",
        "National newspapers mentioned {Short} {n3} times according to a study published in {y7}.",
    ),
    "sp_award": (
        "In {y8}, {Short} received a civic award from the city of {ucity}.",
        "The city of {ucity} gave {Short} a civic award in {y8}.",
    ),
    "sp_fund": (
        "A fund set up in {y9} supports projects linked to {Short}.",
        "Projects linked to {Short} are supported by a fund set up in {y9}.",
    ),
    "sp_survey": (
        "In a survey from {y1b}, {n2} percent of respondents said they knew of {Short}.",
        "A survey from {y1b} found that {n2} percent of respondents knew of {Short}.",
    ),
}
