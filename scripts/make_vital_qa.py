"""Build ragrepro/data/embedded/vital_qa.jsonl, the hand-written QA set over wiki-vital.

Every question below was written by reading the article lead(s) it cites (corpus articles
only, never the held-out LM articles). This script only validates the items and assigns ids
and splits; the committed JSONL is the artefact. Run:

    .venv/bin/python scripts/make_vital_qa.py          # writes the JSONL
    .venv/bin/python scripts/make_vital_qa.py --check  # validates, writes nothing

S(title, question, *answers): single-hop; every answer occurs verbatim in the title's lead.
B(first, second, bridge_entity, question, *answers): two-hop bridge; the bridge entity occurs
in the first lead and is the title of the second; the answers occur in the second lead.
Splits are article-disjoint (VITAL_QA_VERSION embedded-v2 in ragrepro/data/loaders.py): questions that share a gold article are joined
into one group (connected components over gold titles), and the whole group gets one split by
sha256(smallest title of the group) mod 10 -> 0-5 train, 6-7 dev, 8-9 test (about 60/20/20).
The articles of the RICHES prompt demonstrations (PINNED_TRAIN) are pinned to train, so no
dev/test question shares an article with a demonstration either. embedded-v1 split by a hash of
the qid, so 17 of 62 test questions shared a gold article with a train question.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragrepro.data.vital import heldout_split, load_articles

log = logging.getLogger("make_vital_qa")
OUT = ROOT / "ragrepro" / "data" / "embedded" / "vital_qa.jsonl"
SINGLE: list[tuple] = []
BRIDGE: list[tuple] = []


def S(title: str, question: str, *answers: str) -> None:
    SINGLE.append((title, question, list(answers)))


def B(first: str, second: str, bridge: str, question: str, *answers: str) -> None:
    BRIDGE.append((first, second, bridge, question, list(answers)))


# Gold articles of the demonstrations in riches/conf/riches/prompts/*.yaml (a test checks the list).
PINNED_TRAIN = frozenset({"Microsoft", "Sierra Leone", "Krakatoa", "Death of a Salesman",
                          "Arthur Miller", "Carl Gustaf Emil Mannerheim", "Finland", "Zurich",
                          "Switzerland"})


def split_of(key: str) -> str:
    """Hash rule: sha256(key) mod 10 -> 0-5 train, 6-7 dev, 8-9 test."""
    bucket = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 10
    return "train" if bucket < 6 else "dev" if bucket < 8 else "test"


def article_groups(gold_titles: list[list[str]]) -> list[str]:
    """For each question (its gold titles), the smallest title of its connected component,
    where two questions are connected when they share a gold article."""
    parent: dict[str, str] = {}

    def find(t: str) -> str:
        parent.setdefault(t, t)
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    for titles in gold_titles:
        for t in titles[1:]:
            a, b = find(titles[0]), find(t)
            if a != b:  # keep the smaller title as the root, so the root is the group's minimum
                parent[max(a, b)] = min(a, b)
        find(titles[0])
    return [find(titles[0]) for titles in gold_titles]


def assign_splits(gold_titles: list[list[str]], pinned: frozenset[str] = PINNED_TRAIN
                  ) -> list[str]:
    """Article-disjoint splits: one split per group; a group holding a pinned title is train."""
    roots = article_groups(gold_titles)
    pinned_roots = {r for r, titles in zip(roots, gold_titles) if pinned & set(titles)}
    return ["train" if r in pinned_roots else split_of(r) for r in roots]


# --- single-hop questions -----------------------------------------------------------------
S("Noam Chomsky", "At which university is Noam Chomsky a laureate professor of linguistics?", "University of Arizona")
S("St. Peter's Basilica", "Which Roman emperor built Old St. Peter's Basilica in the fourth century?", "Constantine")
S("Paleogene", "How many million years does the Paleogene Period span?", "43 million years", "43")
S("Krakatoa", "In which strait is the Krakatoa caldera located?", "Sunda Strait")
S("Krakatoa", "In what year did an eruption mostly destroy the island of Krakatoa?", "1883")
S("Sargon of Akkad", "Who was the first ruler of the Akkadian Empire?", "Sargon of Akkad", "Sargon the Great", "Sargon")
S("Minotaur", "Which architect designed the Labyrinth in which the Minotaur dwelt?", "Daedalus")
S("Grasshopper", "To which insect suborder do grasshoppers belong?", "Caelifera")
S("Democratic Republic of the Congo", "What was the former name of the Democratic Republic of the Congo?", "Zaire")
S("Laos", "What is the capital of Laos?", "Vientiane")
S("Breathless (1960 film)", "Who wrote and directed the 1960 film Breathless?", "Jean-Luc Godard", "Godard")
S("Typha", "In which plant family is the genus Typha?", "Typhaceae")
S("Microsoft", "In which city is Microsoft headquartered?", "Redmond, Washington", "Redmond")
S("Pound sterling", "Since 1971, into how many pence has each pound sterling been divided?", "100")
S("Gaspard Monge", "Which French mathematician is commonly presented as the inventor of descriptive geometry?", "Gaspard Monge", "Monge")
S("Betty Friedan", "Which 1963 book by Betty Friedan is credited with sparking the second wave of American feminism?", "The Feminine Mystique")
S("Betty Friedan", "Which organization did Betty Friedan co-found in 1966?", "National Organization for Women", "NOW")
S("Albania", "What is the area of Albania in square kilometres?", "28,748\u00a0km2", "28,748")
S("A Doll's House", "Which playwright wrote A Doll's House?", "Henrik Ibsen", "Ibsen")
S("A Doll's House", "At which theatre did A Doll's House premiere in 1879?", "Royal Danish Theatre")
S("Silicon Valley", "Silicon Valley corresponds roughly to the geographical area of which valley?", "Santa Clara Valley")
S("Louis XIV", "In what year did Louis XIV die?", "1715")
S("Louis XIV", "What nickname, referring to a star, did Louis XIV style himself with?", "The Sun King", "Sun King")
S("Valparaíso", "Valparaíso is a major city and seaport in which country?", "Chile")
S("Valparaíso", "What is the population of the commune of Valparaíso?", "284,938")
S("Satellite navigation", "What is the acronym of Russia's satellite navigation system?", "GLONASS")
S("Western honey bee", "What is the genus name of the western honey bee?", "Apis")
S("Henry Wadsworth Longfellow", "Henry Wadsworth Longfellow was the first American to completely translate which work by Dante Alighieri?", "Divine Comedy")
S("Ra", "Ra was the ancient Egyptian deity of what?", "the Sun", "Sun")
S("Calcium chloride", "What is the chemical formula of calcium chloride?", "CaCl2")
S("Kiwifruit", "To which genus do the woody vines that bear kiwifruit belong?", "Actinidia")
S("Josephus", "In which city was the historian Flavius Josephus born?", "Jerusalem")
S("Josephus", "What is the best-known work of the historian Flavius Josephus?", "The Jewish War")
S("Tigris", "Which river, together with the Tigris, defines Mesopotamia?", "Euphrates")
S("Tigris", "Into which gulf do the Tigris and Euphrates ultimately flow?", "Persian Gulf")
S("Mahjong", "How many tiles is mahjong typically played with?", "144")
S("The Rite of Spring", "Which Russian composer wrote The Rite of Spring?", "Igor Stravinsky", "Stravinsky")
S("The Rite of Spring", "Who created the original choreography of The Rite of Spring?", "Vaslav Nijinsky", "Nijinsky")
S("The Rite of Spring", "In which Paris theatre was The Rite of Spring first performed in 1913?", "Théâtre des Champs-Élysées")
S("Tiger", "Into how many subspecies is the tiger traditionally classified?", "nine")
S("Yuzuru Hanyu", "What kind of athlete is Yuzuru Hanyu, widely recognized as one of the greatest in history?", "figure skater")
S("Vytautas the Great", "Vytautas the Great ruled which grand duchy?", "Grand Duchy of Lithuania", "Lithuania")
S("Hindu Kush", "How long is the Hindu Kush mountain range in kilometres?", "800")
S("Hypothermia", "Below what body core temperature in degrees Celsius is hypothermia defined in humans?", "35.0\u00a0°C", "35.0")
S("Sargasso Sea", "In which ocean is the Sargasso Sea?", "Atlantic Ocean", "Atlantic")
S("Catherine the Great", "Against which husband did Catherine the Great stage the coup that brought her to power?", "Peter III")
S("Catherine the Great", "In what year did Catherine the Great's reign as Empress of Russia end?", "1796")
S("Cultural Revolution", "Which CCP chairman launched the Cultural Revolution in 1966?", "Mao Zedong", "Mao")
S("Cairo", "Cairo is the capital and largest city of which country?", "Egypt")
S("The Simpsons", "Who created the animated sitcom The Simpsons?", "Matt Groening", "Groening")
S("The Simpsons", "In which fictional town is The Simpsons set?", "Springfield")
S("Swallow", "What is the scientific family name of the swallows and martins?", "Hirundinidae")
S("Sundanese language", "On which island is the Sundanese language spoken?", "Java")
S("Hedgehog", "How many species of hedgehog are there?", "17")
S("Golden Gate Bridge", "The Golden Gate Bridge links San Francisco to which county?", "Marin County", "Marin")
S("Islam", "What is the holy book on which Islam is based?", "Quran")
S("Ralph Waldo Emerson", "Which mid-19th-century movement did Ralph Waldo Emerson lead?", "Transcendentalist movement", "Transcendentalist")
S("Sierra Leone", "What is the capital of Sierra Leone?", "Freetown")
S("Sesame Street", "Whose Muppets is Sesame Street known for using?", "Jim Henson", "Jim Henson's")
S("Sesame Street", "On what date did Sesame Street premiere?", "November 10, 1969")
S("William Wyler", "How many Academy Award nominations for Best Director did William Wyler receive?", "12")
S("Mammoth", "What is the genus name of the mammoths?", "Mammuthus")
S("Alexander Pushkin", "Alexander Pushkin was a poet of which literary era?", "Romantic era", "Romantic")
S("International Space Station", "What is Russia's partner space agency for the International Space Station?", "Roscosmos")
S("Great Victoria Desert", "The Great Victoria Desert lies in Western Australia and which other Australian state?", "South Australia")
S("Mycology", "Mycology is the branch of biology concerned with the study of what?", "fungi")
S("Mahavira", "What was the birth name of Mahavira?", "Vardhamana")
S("Betelgeuse", "In which constellation is the star Betelgeuse?", "Orion")
S("Attack on Pearl Harbor", "On which island is the naval base of Pearl Harbor, attacked in 1941?", "Oahu")
S("Attack on Pearl Harbor", "On what date did the attack on Pearl Harbor take place?", "December 7, 1941")
S("Andalusia", "Into how many provinces is Andalusia divided?", "eight")
S("W. B. Yeats", "In what year was W. B. Yeats awarded the Nobel Prize in Literature?", "1923")
S("W. B. Yeats", "Which Dublin theatre did W. B. Yeats co-found with Synge and Lady Gregory?", "Abbey Theatre")
S("German reunification", "On what date did German reunification culminate?", "3 October 1990")
S("Benzodiazepine", "Who discovered the first benzodiazepine, chlordiazepoxide?", "Leo Sternbach", "Sternbach")
S("Americium", "What is the atomic number of americium?", "95")
S("Thirty Years' War", "In what year did the Thirty Years' War end?", "1648")
S("Francisco Goya", "What nationality was the painter Francisco Goya?", "Spanish")
S("Archaeopteryx", "What is the German name for Archaeopteryx?", "Urvogel")
S("Corvus", "Corvus, the genus of crows and ravens, belongs to which bird family?", "Corvidae")
S("Hypha", "What is the collective name for the hyphae of a fungus?", "mycelium")
S("Greece", "What is the official name of Greece?", "Hellenic Republic", "the Hellenic Republic")
S("Brahmaputra River", "By what name is the Brahmaputra known in Bangladesh?", "Jamuna River", "Jamuna")
S("Kirchhoff's circuit laws", "In what year were Kirchhoff's circuit laws first described?", "1845")
S("Premier League", "How many clubs contest the Premier League?", "20")
S("Premier League", "How many matches does each Premier League team play in a season?", "38")
S("Song dynasty", "Who founded the Song dynasty?", "Emperor Taizu of Song", "Taizu of Song", "Taizu")
S("Rothschild family", "The Rothschild banking family originally came from which German city?", "Frankfurt")
S("Zagreb", "Zagreb lies along which river?", "Sava River", "Sava")
S("Zagreb", "Zagreb is the capital of which country?", "Croatia")
S("Miriam Makeba", "What was Miriam Makeba's nickname?", "Mama Africa")
S("Réunion", "Réunion is an overseas department and region of which country?", "France")
S("Réunion", "To which island group does Réunion belong?", "Mascarene Islands")
S("Taiping Rebellion", "Which dynasty fought the Taiping Heavenly Kingdom in the Taiping Rebellion?", "Qing dynasty", "Qing")
S("Taiping Rebellion", "How many years did the Taiping Rebellion last?", "14 years", "14")
S("Zapotec civilization", "In which valley did the Zapotec civilization flourish?", "Valley of Oaxaca", "Oaxaca")
S("Zapotec civilization", "What is the name of the ancient Zapotec city with monumental buildings and ball courts?", "Monte Albán")
S("Ptolemy I Soter", "Which kingdom centered in Egypt did Ptolemy I Soter found?", "Ptolemaic Kingdom")
S("Ptolemy I Soter", "In what year did Ptolemy I Soter die?", "282 BC")
S("Al-Khwarizmi", "In which city was the House of Wisdom where al-Khwarizmi worked?", "Baghdad")
S("Parvati", "Along with Lakshmi and Sarasvati, Parvati forms which trinity of goddesses?", "Tridevi")
S("Min Chinese", "Min Chinese is spoken in a region centered on which Chinese province?", "Fujian Province", "Fujian")
S("Dutch Golden Age", "In what year did the Dutch Golden Age end with the Rampjaar?", "1672")
S("Ufa", "Ufa is the capital of which Russian republic?", "Bashkortostan")
S("Akhenaten", "What was Akhenaten's original name?", "Amenhotep IV")
S("C. S. Lewis", "Which series of books is C. S. Lewis best known for?", "The Chronicles of Narnia", "Chronicles of Narnia")
S("ABBA", "In which city was the pop group ABBA formed?", "Stockholm")
S("ABBA", "In what year was ABBA formed?", "1972")
S("Yiddish", "Yiddish was historically spoken by which Jewish group?", "Ashkenazi Jews", "Ashkenazi")
S("Edwin Hubble", "Besides extragalactic astronomy, which field did Edwin Hubble play a crucial role in establishing?", "observational cosmology")
S("Grouper", "In which fish family are groupers classified?", "Epinephelidae")
S("Vanilla", "From plants of which family is the spice vanilla derived?", "orchids")
S("Valmiki", "Valmiki is celebrated as the traditional author of which epic?", "Ramayana")
S("Philip II of France", "By what other name is King Philip II of France known?", "Philip Augustus")
S("Philip II of France", "Who was the father of Philip II of France?", "Louis VII")
S("Australia", "What is the land area of Australia in square kilometres?", "7,688,287\u00a0km2", "7,688,287")
S("Qin dynasty", "The Qin dynasty was the first imperial dynasty of which country?", "China")
S("Syracuse, Sicily", "What is the population of Syracuse, Sicily as of 2025?", "115,636")
S("Ulysses S. Grant", "Which number president of the United States was Ulysses S. Grant?", "18th")
S("Arnolfini Portrait", "Which painter created the Arnolfini Portrait?", "Jan van Eyck", "van Eyck")
S("Arnolfini Portrait", "In which gallery is the Arnolfini Portrait now held?", "National Gallery, London", "National Gallery")
S("Singin' in the Rain", "In what year was Singin' in the Rain released?", "1952")
S("Lu Xun", "Lu Xun is the pen name of which Chinese writer's adult name?", "Zhou Shuren")
S("Ross Sea", "After which British explorer is the Ross Sea named?", "James Clark Ross")
S("Ross Sea", "In what year did James Clark Ross visit the area of the Ross Sea?", "1841")
S("Permian–Triassic extinction event", "What is the colloquial name of the Permian–Triassic extinction event?", "the Great Dying", "Great Dying")
S("Tinamou", "How many species of tinamou are there?", "46")
S("Cao Cao", "Which son and successor of Cao Cao ended the Eastern Han dynasty?", "Cao Pi")
S("Cumans", "What are the Cumans called in Rus' chronicles?", "Polovtsians", "Polovtsy")
S("Rabbi Akiva", "What was Rabbi Akiva's full name?", "Akiva ben Joseph")
S("Thomas Aquinas", "Which school of thought is Thomas Aquinas the father of?", "Thomism")
S("Thomas Aquinas", "To which religious order did the friar Thomas Aquinas belong?", "Dominican")
S("Hermes", "Which Olympian deity is considered the herald of the gods?", "Hermes")
S("Sean Connery", "In which 1962 film did Sean Connery originate the role of James Bond?", "Dr. No")
S("Sean Connery", "In how many Bond films did Sean Connery star?", "seven")
S("Mexican–American War", "The Mexican–American War followed the 1845 American annexation of which territory?", "Texas")
S("John Lennon", "With whom did John Lennon have the most successful songwriting partnership in history?", "Paul McCartney", "McCartney")
S("World Heritage Site", "Which organization administers the treaty protecting World Heritage Sites?", "UNESCO")
S("Laplace transform", "After whom is the Laplace transform named?", "Pierre-Simon Laplace")
S("Albert Bandura", "At which university was psychologist Albert Bandura a professor?", "Stanford University", "Stanford")
S("Abdul Hamid II", "Abdul Hamid II was the 34th sultan of which empire?", "Ottoman Empire")
S("Tabanidae", "Horse flies and deer flies belong to which insect family?", "Tabanidae")
S("Flowering plant", "What was the former name of the flowering plant group Angiospermae?", "Magnoliophyta")
S("Congo Free State", "Which Belgian king privately owned the Congo Free State?", "Leopold II", "King Leopold II")
S("Friedrich Schiller", "Friedrich Schiller was one of the most important figures of which German literary movement?", "Sturm and Drang")
S("Koi", "What is the more specific Japanese name for koi?", "nishikigoi")
S("James Bond", "Which writer created the character James Bond in 1953?", "Ian Fleming", "Fleming")
S("Santa Cruz de la Sierra", "Santa Cruz de la Sierra is the largest city in which country?", "Bolivia")
S("Amda Seyon I", "What was the throne name of Emperor Amda Seyon I of Ethiopia?", "Gebre Mesqel")
S("Isabella I of Castile", "Which king was the husband of Isabella I of Castile?", "Ferdinand II", "King Ferdinand II")
S("Isabella I of Castile", "By what title are Isabella I of Castile and Ferdinand II known together?", "the Catholic Monarchs", "Catholic Monarchs")
S("Comoros", "What is the capital of the Comoros?", "Moroni")
S("Comoros", "How many islands make up the country of the Comoros?", "three")
S("Sulidae", "The bird family Sulidae comprises boobies and which other seabirds?", "gannets")
S("Common starling", "To which bird family does the common starling belong?", "Sturnidae")
S("Jack L. Warner", "In which city were the Warner Bros. Studios led by Jack L. Warner located?", "Burbank, California", "Burbank")
S("Alkaline earth metal", "In which group of the periodic table are the alkaline earth metals?", "group 2")
S("Asteraceae", "Asteraceae belongs to which order of flowering plants?", "Asterales")
S("Tunisia", "Tunisia lies in which region of North Africa?", "Maghreb")
S("Lena River", "How long is the Lena River in kilometres?", "4,294\u00a0km", "4,294")
S("Mount Vesuvius", "On which gulf is Mount Vesuvius located?", "Gulf of Naples")
S("Sindhi language", "In which Pakistani province does the Sindhi language have official status?", "Sindh")
S("The Chronicles of Narnia", "Who illustrated The Chronicles of Narnia?", "Pauline Baynes")
S("The Chronicles of Narnia", "How many novels make up The Chronicles of Narnia?", "seven")
S("William of Ockham", "To which religious order did William of Ockham belong?", "Franciscan")
S("Josephine Baker", "In which 1927 French silent film was Josephine Baker the first Black woman to star in a major motion picture?", "Siren of the Tropics")
S("Aeschylus", "Which ancient Greek tragedian is often described as the father of tragedy?", "Aeschylus")
S("Major League Baseball", "How many teams compose Major League Baseball?", "30")
S("Mandarin Chinese", "What percentage of all Chinese speakers natively speak Mandarin varieties?", "70 percent", "70")
S("Cambodia", "What is the official name of Cambodia?", "Kingdom of Cambodia", "the Kingdom of Cambodia")
S("Marajó", "Marajó is a large coastal island in which Brazilian state?", "Pará")
S("Centripetal force", "Who coined the term centripetal force?", "Isaac Newton", "Newton")
S("Marco Polo", "Which book records Marco Polo's journeys through Asia?", "The Travels of Marco Polo")
S("Marco Polo", "Along which trade route did Marco Polo travel through Asia?", "Silk Road", "the Silk Road")
S("Ashoka", "Ashoka was the third ruler of which dynasty?", "Mauryan dynasty", "Mauryan")
S("Electron configuration", "What is the electron configuration of the neon atom?", "1s2 2s2 2p6")
S("Jomo Kenyatta", "In what year did Jomo Kenyatta become the first President of Kenya?", "1964")
S("Omar Khayyam", "In which city was Omar Khayyam born?", "Nishapur")
S("Tin", "What is the chemical symbol of tin?", "Sn")
S("Tin", "What is the atomic number of tin?", "50")
S("Cucurbita", "In which plant family is the genus Cucurbita?", "Cucurbitaceae")
S("Common quail", "To which bird family does the common quail belong?", "Phasianidae")
S("Lake Mweru", "Lake Mweru lies on the border between the Democratic Republic of the Congo and which other country?", "Zambia")
S("Boston", "Boston is the capital of which U.S. state?", "Massachusetts")
S("Boston", "What was the population of Boston at the 2020 census?", "675,647")
S("Konbaung dynasty", "In what year did the Konbaung dynasty's rule of Burma end?", "1885")
S("Lydia", "What was the capital of the ancient kingdom of Lydia?", "Sardis")
S("Claude Debussy", "In which town was the composer Claude Debussy born?", "Saint-Germain-en-Laye")
S("Chennai", "By what other name is Chennai also known?", "Madras")
S("Chennai", "Chennai is the capital of which Indian state?", "Tamil Nadu")
S("Samsung", "In which city is the Samsung Group headquartered?", "Seoul")
S("Cosmological constant", "Which physicist initially added the cosmological constant to his field equations of general relativity?", "Albert Einstein", "Einstein")
S("Plotinus", "Plotinus is widely regarded as the founder of which philosophical school?", "Neoplatonism")
S("Knot (unit)", "A knot equals exactly how many kilometres per hour?", "1.852\u00a0km/h", "1.852")
S("Old World monkey", "In which family are the Old World monkeys classified?", "Cercopithecidae")
S("Trout", "Trout are members of which fish family?", "Salmonidae")
S("Joni Mitchell", "What is Joni Mitchell's real first name?", "Roberta Joan Mitchell", "Roberta")
S("Whooping cough", "Which bacterium causes whooping cough?", "Bordetella pertussis")
S("Cape Horn", "On which small island is Cape Horn located?", "Hornos Island")
S("Cape Horn", "Cape Horn marks the northern boundary of which passage?", "Drake Passage")
S("Muhammad ibn Abd al-Wahhab", "Which religious movement is named after Muhammad ibn Abd al-Wahhab?", "Wahhabi movement", "Wahhabi")
S("Great Rift Valley", "What is the approximate total length of the Great Rift Valley in kilometres?", "6,500 kilometres", "6,500")
S("Ibn Battuta", "From which city did the traveller Ibn Battuta come?", "Tangier")
S("Pope Innocent III", "In what year did Pope Innocent III die?", "1216")
S("Common snapping turtle", "In which turtle family is the common snapping turtle?", "Chelydridae")
S("Andrey Kolmogorov", "In the creation of which modern theory did Andrey Kolmogorov play a central role?", "probability theory", "modern probability theory")
S("Sydney Opera House", "On the foreshore of which harbour is the Sydney Opera House located?", "Sydney Harbour")
S("Gajah Mada", "Gajah Mada was a general of which Javanese empire?", "Majapahit Empire", "Majapahit")
S("Gajah Mada", "What is the name of the oath delivered by Gajah Mada?", "Sumpah Palapa")
S("Geoffrey Chaucer", "What work is Geoffrey Chaucer best known for?", "The Canterbury Tales", "Canterbury Tales")
S("Geoffrey Chaucer", "Geoffrey Chaucer was the first writer buried in what became which part of Westminster Abbey?", "Poets' Corner")
S("Association football", "How many players are on each team in association football?", "11")
S("Neil Armstrong", "As commander of which mission did Neil Armstrong become the first person to walk on the Moon?", "Apollo 11")
S("Mole cricket", "Mole crickets are members of which insect family?", "Gryllotalpidae")
S("Thutmose III", "Thutmose III was a pharaoh of which dynasty of Egypt?", "18th Dynasty")
S("Chulalongkorn", "What regnal title did Chulalongkorn of the Chakri dynasty have?", "Rama V")
S("Yuri Gagarin", "On which spacecraft did Yuri Gagarin travel into outer space?", "Vostok 1")
S("Yuri Gagarin", "On what date did Yuri Gagarin complete one orbit of Earth?", "12 April 1961")
S("Yuri Gagarin", "From which cosmodrome was Yuri Gagarin launched?", "Baikonur Cosmodrome", "Baikonur")
S("Panchatantra", "In what language is the Panchatantra written?", "Sanskrit")
S("Pinwheel Galaxy", "In which constellation is the Pinwheel Galaxy located?", "Ursa Major")
S("Pinwheel Galaxy", "Who discovered the Pinwheel Galaxy in 1781?", "Pierre Méchain", "Méchain")
S("Sumerian language", "Sumerian was spoken in the area of which modern-day country?", "Iraq")
S("Ukiyo-e", "Ukiyo-e is a genre of art from which country?", "Japan", "Japanese")

# --- two-hop bridge questions -------------------------------------------------------------
B("1931 China floods", "Wuhan", "Wuhan", "Of which province is the first major city named as hit by the 1931 China floods the capital?", "Hubei")
B("Maurice Ravel", "Claude Debussy", "Claude Debussy", "In which town was Maurice Ravel's elder contemporary, with whom he is associated with Impressionism, born?", "Saint-Germain-en-Laye")
B("Ethiopian Empire", "Haile Selassie", "Haile Selassie", "Under which empress did the Ethiopian emperor deposed in the 1974 coup serve as regent?", "Zewditu", "Empress Zewditu")
B("Uttar Pradesh", "Rajasthan", "Rajasthan", "What is the area, in square kilometres, of the state that borders Uttar Pradesh to the west?", "342,239")
B("Grigori Rasputin", "Nicholas II", "Nicholas II", "In what year did the emperor whose family Rasputin befriended abdicate?", "1917")
B("Sesame Street", "Jim Henson", "Jim Henson", "Which 1982 film was directed by the puppeteer whose Muppets appear on Sesame Street?", "The Dark Crystal")
B("Samuel Goldwyn", "Cecil B. DeMille", "Cecil B. DeMille", "How many features did the filmmaker after whom Samuel Goldwyn's Golden Globe award is named create?", "70")
B("Hamburg", "Berlin", "Berlin", "How many inhabitants does the only German city larger than Hamburg have?", "3.7 million")
B("Varanasi", "Uttar Pradesh", "Uttar Pradesh", "How many inhabitants does the Indian state in which Varanasi lies have?", "241\u00a0million", "over 241\u00a0million")
B("Is–ought problem", "David Hume", "David Hume", "With which 1739–40 work did the philosopher who first articulated the is–ought problem begin his science of man?", "A Treatise of Human Nature")
B("Giacomo Casanova", "Venice", "Venice", "On how many islands is the city that gave its name to Casanova's birth republic built?", "126")
B("Zurich", "Switzerland", "Switzerland", "What is the official name of the country whose largest city is Zurich?", "Swiss Confederation", "the Swiss Confederation")
B("Herat", "Afghanistan", "Afghanistan", "What is the official name of the country in which the city of Herat lies?", "Islamic Emirate of Afghanistan", "the Islamic Emirate of Afghanistan")
B("Gregorian chant", "Pope Gregory I", "Pope Gregory I", "What number Bishop of Rome was the pope after whom Gregorian chant is named?", "64th")
B("Juan Carlos I", "Francisco Franco", "Francisco Franco", "From what year was the man who chose Juan Carlos I as his successor dictator of Spain?", "1939")
B("Peru", "Bolivia", "Bolivia", "What is the official name of the country that borders Peru to the southeast?", "Plurinational State of Bolivia", "the Plurinational State of Bolivia")
B("Analytical psychology", "Carl Jung", "Carl Jung", "What nationality was the psychiatrist whose practices analytical psychology refers to?", "Swiss")
B("Belfast", "Northern Ireland", "Northern Ireland", "What was the 2021 census population of the part of the United Kingdom whose capital is Belfast?", "1,903,175")
B("Palk Strait", "Bay of Bengal", "Bay of Bengal", "What is the area of the bay that the Palk Strait links to the Laccadive Sea?", "2,600,000\u00a0km2", "2,600,000")
B("The Golden Ass", "Augustine of Hippo", "Augustine of Hippo", "From which town did the theologian who called Apuleius's Metamorphoses The Golden Ass come?", "Thagaste")
B("Sri Lankan civil war", "Sri Lanka", "Sri Lanka", "What was the former name of the country in which the civil war against the Liberation Tigers of Tamil Eelam was fought?", "Ceylon")
B("Georges-Eugène Haussmann", "Napoleon III", "Napoleon III", "In what year was the emperor who chose Haussmann to renovate Paris deposed?", "1870")
B("Charles de Gaulle", "Algiers", "Algiers", "What was the estimated 2025 urban population of the city whose 1958 putsch preceded de Gaulle's return to power?", "4.325 million")
B("John D. Rockefeller", "Cleveland", "Cleveland", "Of which county is the Ohio city where Rockefeller's family eventually settled the county seat?", "Cuyahoga County", "Cuyahoga")
B("Alibaba Group", "Hangzhou", "Hangzhou", "For which lake is the city in which Alibaba was founded celebrated?", "West Lake")
B("Augusto Pinochet", "Salvador Allende", "Salvador Allende", "Which number president of Chile was the president overthrown by Pinochet's junta in 1973?", "29th")
B("Carl Gustaf Emil Mannerheim", "Finland", "Finland", "What is the capital of the country of which Mannerheim was regent in 1918–1919?", "Helsinki")
B("Slovakia", "Czech Republic", "Czech Republic", "By what historical name is the country bordering Slovakia to the northwest known?", "Bohemia")
B("Thomas Hardy", "William Wordsworth", "William Wordsworth", "With whom did the Romantic poet whose poetry influenced Thomas Hardy publish Lyrical Ballads?", "Samuel Taylor Coleridge", "Coleridge")
B("Strait of Dover", "English Channel", "English Channel", "The channel whose narrowest part is the Strait of Dover separates Southern England from which country?", "France", "northern France")
B("Enrico Fermi", "Chicago", "Chicago", "What was the 2020 census population of the city after which Fermi's first nuclear reactor was named?", "2.74 million")
B("Lope de Vega", "Miguel de Cervantes", "Miguel de Cervantes", "Which two-part novel is the writer, whom Lope de Vega is considered second only to, best known for?", "Don Quixote")
B("Hebei", "Inner Mongolia", "Inner Mongolia", "What is the capital of the region that borders Hebei to the north?", "Hohhot")
B("Kigali", "Rwanda", "Rwanda", "What is the official name of the country whose capital is Kigali?", "Republic of Rwanda", "the Republic of Rwanda")
B("Korean War", "North Korea", "North Korea", "What is the official name of the country that fought South Korea in the Korean War with Chinese and Soviet support?", "Democratic People's Republic of Korea", "DPRK")
B("Robinson Crusoe", "Daniel Defoe", "Daniel Defoe", "Which 1722 novel was written by the author of Robinson Crusoe?", "Moll Flanders")
B("Polytheism", "Alexandria", "Alexandria", "In what year was the city of Philo, who coined the term polytheism, founded?", "331 BC")
B("Laos", "Vientiane", "Vientiane", "On the banks of which river is the capital of Laos located?", "Mekong")
B("Reggae", "Jamaica", "Jamaica", "What is the area, in square kilometres, of the country in which reggae originated?", "10,991")
B("Death of a Salesman", "Arthur Miller", "Arthur Miller", "Which 1953 play was written by the author of Death of a Salesman?", "The Crucible")
B("Ur", "Euphrates", "Euphrates", "In which country does the river near whose mouth Ur was located originate?", "Turkey")
B("Daegu", "Busan", "Busan", "What is the population of the city that, besides Seoul, forms a larger urban agglomeration than Daegu?", "3.3 million", "over 3.3 million")
B("Quanzhou", "Taiwan Strait", "Taiwan Strait", "How wide is the strait beside which Quanzhou lies at its narrowest part?", "126\u00a0km")
B("One Hundred Years of Solitude", "Gabriel García Márquez", "Gabriel García Márquez", "Which prize did the author of One Hundred Years of Solitude receive in 1972?", "Neustadt International Prize for Literature")
B("Kingdom of Kongo", "Republic of the Congo", "Republic of the Congo", "By what name, which includes its capital, is the last-listed present-day country that the Kingdom of Kongo covered also known?", "Congo-Brazzaville")
B("Costa Rica", "Caribbean Sea", "Caribbean Sea", "The sea that borders Costa Rica to the northeast lies south of which gulf?", "Gulf of Mexico")
B("Dacians", "Carpathian Mountains", "Carpathian Mountains", "Roughly how many kilometres long is the mountain range near which the Dacians lived?", "1,500\u00a0km", "1,500")
B("Barents Sea", "Willem Barentsz", "Willem Barentsz", "What nationality was the navigator after whom the Barents Sea is named?", "Dutch")
B("Bosnia and Herzegovina", "Montenegro", "Montenegro", "How many municipalities does the country bordering Bosnia and Herzegovina to the southeast have?", "25")
B("Naples", "Milan", "Milan", "Of which region is the second of the two Italian cities larger than Naples the capital?", "Lombardy")
B("William Shockley", "John Bardeen", "John Bardeen", "In what year did the first-named member of Shockley's Bell Labs research group win his second Nobel Prize in Physics?", "1972")
B("Panama City", "Panama Canal", "Panama Canal", "How long, in kilometres, is the canal of the country whose capital is Panama City?", "82-kilometer", "82")
B("Rosario", "Buenos Aires", "Buenos Aires", "On the southwest of which river is the city that lies 300 km southeast of Rosario located?", "Río de la Plata")
B("Tipu Sultan", "Mysore", "Mysore", "In which Indian state is the city that gave its name to Tipu Sultan's sultanate?", "Karnataka")
B("Battle of Marathon", "Athens", "Athens", "Of which region is the city whose citizens fought at Marathon the capital, besides being Greece's capital?", "Attica")
B("Late antiquity", "Diocletian", "Diocletian", "In what year did the emperor named in the lead on late antiquity abdicate?", "305")
B("The General Theory of Employment, Interest and Money", "John Maynard Keynes", "John Maynard Keynes", "The author of The General Theory of Employment, Interest and Money was originally trained in which subject?", "mathematics")
B("History of Islam", "Medina", "Medina", "In which region of Saudi Arabia is the second city named as the place of Muhammad's mission?", "Hejaz", "the Hejaz region")
B("The Legend of Zelda", "Shigeru Miyamoto", "Shigeru Miyamoto", "Since what year has the first-named creator of The Legend of Zelda served as one of Nintendo's representative directors?", "2002")
B("Drake Passage", "Francis Drake", "Francis Drake", "Between which years did the explorer for whom the Drake Passage is named circumnavigate the world?", "1577 and 1580")
B("Pericles", "Thucydides", "Thucydides", "The historian who called Pericles 'the first citizen' of Athens wrote the history of which war?", "Peloponnesian War", "the Peloponnesian War")
B("Sea of Marmara", "Dardanelles", "Dardanelles", "What is the other name of the strait linking the Sea of Marmara to the Aegean Sea?", "Strait of Gallipoli")
B("Mauritania", "Western Sahara", "Western Sahara", "What is the surface area of the territory that borders Mauritania to the north and northwest?", "272,000 square kilometres", "272,000")
B("Omdurman", "Khartoum", "Khartoum", "What is the estimated population of the greater urban area of the capital city that lies opposite Omdurman?", "7.1 million")
B("Sundarbans", "West Bengal", "West Bengal", "What was the 2011 population of the Indian state where the Sundarbans begin at the Hooghly River?", "91 million", "around 91 million")
B("Jordan", "Jordan River", "Jordan River", "How long is the river after which the country of Jordan is named?", "251-kilometre", "251")
B("Coimbatore", "Western Ghats", "Western Ghats", "What is the other name of the mountain range that surrounds Coimbatore?", "Sahyadri", "the Sahyadri")
B("Rafael Trujillo", "Dominican Republic", "Dominican Republic", "On which island is the country ruled by Rafael Trujillo located?", "Hispaniola")
B("Antioch", "Syria", "Syria", "What is the official name of the country in whose northern part ancient Antioch was located?", "Syrian Arab Republic", "the Syrian Arab Republic")
B("Erie Canal", "Niagara Falls", "Niagara Falls", "What is the largest of the three waterfalls of the falls above which the Erie Canal connected the Atlantic to the upper Great Lakes?", "Horseshoe Falls")
B("Shang dynasty", "Yellow River", "Yellow River", "What is the estimated length of the river in whose valley the Shang dynasty ruled?", "5,464\u00a0km", "5,464")
B("Burkina Faso", "Ivory Coast", "Ivory Coast", "What is the capital of the country that borders Burkina Faso to the southwest?", "Yamoussoukro")
B("Pride and Prejudice", "Jane Austen", "Jane Austen", "How many novels did the author of Pride and Prejudice write?", "six")


def build() -> tuple[list[dict], list[str]]:
    """Records and a list of problems (empty when every item is valid)."""
    leads = {a["title"]: a for a in load_articles()}
    problems: list[str] = []
    records: list[dict] = []

    def check_title(t: str, where: str) -> bool:
        if t not in leads:
            problems.append(f"{where}: title {t!r} is not a wiki-vital article")
            return False
        if heldout_split(t) is not None:
            problems.append(f"{where}: {t!r} is a held-out LM article")
            return False
        return True

    for i, (title, question, answers) in enumerate(SINGLE, start=1):
        qid = f"vq1-{i:04d}"
        if not check_title(title, qid):
            continue
        text = leads[title]["extract"]
        problems += [f"{qid}: answer {a!r} not in the lead of {title!r}"
                     for a in answers if a not in text]
        problems += [f"{qid}: the question contains its answer {a!r}"
                     for a in answers if re.search(rf"\b{re.escape(a.lower())}\b", question.lower())]
        records.append({"qid": qid, "question": question, "answers": answers,
                        "gold_titles": [title], "hops": 1, "split": None,
                        "bridge_entity": None, "topic": leads[title]["topic"]})
    for i, (first, second, bridge, question, answers) in enumerate(BRIDGE, start=1):
        qid = f"vq2-{i:04d}"
        if not (check_title(first, qid) and check_title(second, qid)):
            continue
        if bridge not in leads[first]["extract"]:
            problems.append(f"{qid}: bridge entity {bridge!r} not in the lead of {first!r}")
        if bridge.lower() in question.lower():
            problems.append(f"{qid}: the question names the bridge entity {bridge!r}")
        if bridge != second:
            problems.append(f"{qid}: bridge entity {bridge!r} is not the title {second!r}")
        problems += [f"{qid}: answer {a!r} not in the lead of {second!r}"
                     for a in answers if a not in leads[second]["extract"]]
        records.append({"qid": qid, "question": question, "answers": answers,
                        "gold_titles": [first, second], "hops": 2, "split": None,
                        "bridge_entity": bridge, "topic": leads[first]["topic"]})
    for r, split in zip(records, assign_splits([r["gold_titles"] for r in records])):
        r["split"] = split
    seen: set[str] = set()
    for r in records:
        if r["question"] in seen:
            problems.append(f"{r['qid']}: duplicate question {r['question']!r}")
        seen.add(r["question"])
    return records, problems


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="validate only")
    args = parser.parse_args()
    records, problems = build()
    for p in problems:
        log.error(p)
    if problems:
        return 1
    if not args.check:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                       encoding="utf-8")
    hops = [r["hops"] for r in records]
    log.info("%d questions (%d single-hop, %d bridge) -> %s", len(records), hops.count(1),
             hops.count(2), OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
