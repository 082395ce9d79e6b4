"""Build the hand-checked attribution-judge set (ragrepro/data/embedded/attribution_judge.jsonl).

Every item is (evidence, question, answer, attributable). The 60 questions are vital-qa
train/dev single-hop questions whose gold article is a wiki-vital corpus article (never a
held-out RALM article, never the gold article of a vital-qa test question). Each question
gives one attributable item (its gold lead + its gold answer) and one non-attributable item of
one of three named kinds, 20 per kind:

- `wrong_answer_in_passage`: the gold lead, and a wrong answer of the same type that the lead
  names in another role (another year, person, place, number).
- `topic_passage_lacks_answer`: the gold answer, and the lead of another corpus article on
  the same topic that does not state it.
- `related_unsupported`: the gold lead, and a plausible related answer (often true of the
  world, or another attribute) that the lead does not mention.

The negatives below were written by hand, and every item's evidence was read by the checker
named in CHECKED_BY; the assertions only guard the typing (a wrong-answer string must occur in
the lead, an unsupported one must not). Deterministic: `python -m scripts.judge_build_set`.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from ragrepro.data.loaders import vital_qa_path
from ragrepro.data.vital import heldout_split, load_articles

log = logging.getLogger(__name__)

OUT = Path(__file__).resolve().parents[1] / "ragrepro/data/embedded/attribution_judge.jsonl"
CHECKED_BY = "h-judge (read every evidence passage, 2026-11-30)"
ABBREVIATIONS = ("Dr.", "Bros.", "St.", "c.", "Mr.")
KINDS = ("wrong_answer_in_passage", "topic_passage_lacks_answer", "related_unsupported")

# qid -> wrong answer taken from the gold lead, and why it does not answer the question
WRONG_IN_PASSAGE: dict[str, tuple[str, str]] = {
    "vq1-0001": ("Massachusetts Institute of Technology", "MIT is where he is institute professor emeritus; the laureate professorship is at Arizona"),
    "vq1-0003": ("66", "66 Ma is when the period starts; it spans 43 million years"),
    "vq1-0007": ("King Minos", "Minos commanded the Labyrinth; the lead names Daedalus as its architect"),
    "vq1-0009": ("Kinshasa", "Kinshasa is the capital; the former name is Zaire"),
    "vq1-0010": ("Luang Prabang", "Luang Prabang is a World Heritage town; the capital is Vientiane"),
    "vq1-0011": ("Jean-Paul Belmondo", "Belmondo stars in the film; Godard wrote and directed it"),
    "vq1-0021": ("San Francisco Bay Area", "the Bay Area is the region it lies in; the valley is Santa Clara Valley"),
    "vq1-0022": ("1643", "1643 is when his reign began; he died in 1715"),
    "vq1-0024": ("Spain", "Spain is where its namesake lies; the city is in Chile"),
    "vq1-0026": ("GPS", "GPS is the United States' system; Russia's is GLONASS"),
    "vq1-0038": ("Nicholas Roerich", "Roerich made the stage designs and costumes; Nijinsky choreographed"),
    "vq1-0085": ("38", "38 is the number of matches per team; 20 clubs contest the league"),
    "vq1-0090": ("Slovenia", "Slovenia is across the nearby border; Zagreb is Croatia's capital"),
    "vq1-0141": ("Russian Empire", "the Russian Empire was his war opponent; he was sultan of the Ottoman Empire"),
    "vq1-0142": ("Oestridae", "Oestridae are the botflies; horse and deer flies are Tabanidae"),
    "vq1-0147": ("Kingsley Amis", "Amis wrote later authorised Bond novels; Fleming created Bond"),
    "vq1-0149": ("Amda Tsiyon", "Amda Tsiyon is a spelling of his name; the throne name is Gebre Mesqel"),
    "vq1-0156": ("Hollywood", "Hollywood appears only in 'Hollywood studio moguls'; the studios were in Burbank"),
    "vq1-0160": ("2,668", "2,668 is the length in miles; in kilometres it is 4,294"),
    "vq1-0162": ("Balochistan", "Balochistan has historic communities; official status is in Sindh"),
}

# qid -> (title of another corpus article on the topic, why it does not state the answer)
OTHER_PASSAGE: dict[str, tuple[str, str]] = {
    "vq1-0005": ("Sumatra", "mentions the Krakatoa archipelago but no eruption or year"),
    "vq1-0006": ("Akkadian Empire", "describes the empire but never names its first ruler"),
    "vq1-0015": ("Differential geometry", "describes the field; no mathematician credited with descriptive geometry"),
    "vq1-0017": ("Feminism", "describes feminism; no organisation or Friedan"),
    "vq1-0020": ("Henrik Ibsen", "lists A Doll's House among Ibsen's works but not where it premiered"),
    "vq1-0023": ("Palace of Versailles", "names Louis XIV as a resident; no nickname"),
    "vq1-0029": ("Ancient Egypt", "about Egyptian history; no deity or the Sun"),
    "vq1-0037": ("Vaslav Nijinsky", "names Le Sacre du Printemps as Nijinsky's choreography, not its composer"),
    "vq1-0058": ("Liberia", "Sierra Leone appears only as a neighbour; the capital named is Monrovia, Liberia's"),
    "vq1-0076": ("Curium", "gives curium's atomic number (96), not americium's"),
    "vq1-0089": ("Croatia", "names Zagreb as the capital but no river"),
    "vq1-0104": ("Ural Mountains", "about the mountain range; no Ufa or republic"),
    "vq1-0122": ("Gene Kelly", "says he co-directed musicals of the 1940s and 1950s; no film or year"),
    "vq1-0124": ("Southern Ocean", "about the ocean; no Ross Sea or explorer"),
    "vq1-0134": ("James Bond", "about the Bond franchise and novels; no Connery or Dr. No"),
    "vq1-0146": ("Carp", "says carp are ornamental fish; no Japanese name"),
    "vq1-0150": ("Reconquista", "names the Catholic Monarchs but not Isabella's husband"),
    "vq1-0153": ("Mozambique Channel", "describes the channel; no Comoros or island count"),
    "vq1-0161": ("Pompeii", "names Vesuvius, Naples and Campania but no gulf"),
    "vq1-0167": ("Sophocles", "names Aeschylus as a rival tragedian, never as father of tragedy"),
}

# qid -> related answer the gold lead does not state, and why it is related
UNSUPPORTED: dict[str, tuple[str, str]] = {
    "vq1-0004": ("Strait of Malacca", "another Indonesian strait; the lead says Sunda Strait"),
    "vq1-0012": ("Poaceae", "the grass family of similar wetland plants; the lead says Typhaceae"),
    "vq1-0013": ("Seattle", "the nearby large city; the lead says Redmond"),
    "vq1-0014": ("240", "the pre-1971 division; the lead says 100 since 1971"),
    "vq1-0016": ("The Second Stage", "a later Friedan book, not in the lead"),
    "vq1-0019": ("August Strindberg", "a contemporary Scandinavian playwright; the lead says Ibsen"),
    "vq1-0028": ("La Vita Nuova", "another work by Dante, not in the lead"),
    "vq1-0107": ("Gothenburg", "another Swedish city; the lead says Stockholm"),
    "vq1-0137": ("George Harrison", "another Beatle; the lead names McCartney"),
    "vq1-0139": ("Joseph Fourier", "namesake of the related Fourier transform; the lead says Laplace"),
    "vq1-0140": ("University of Iowa", "another university; the lead says Stanford"),
    "vq1-0143": ("Anthophyta", "another old name for flowering plants, but the lead names only Magnoliophyta"),
    "vq1-0145": ("Romanticism", "a neighbouring movement; the lead says Sturm and Drang"),
    "vq1-0148": ("Argentina", "a neighbour with a Santa Cruz province; the lead says Bolivia"),
    "vq1-0152": ("Mutsamudu", "another Comorian town; the lead says Moroni"),
    "vq1-0154": ("cormorants", "other plunging seabirds; the lead says gannets"),
    "vq1-0155": ("Corvidae", "another passerine family; the lead says Sturnidae"),
    "vq1-0157": ("group 1", "the alkali metals' group; the lead says group 2"),
    "vq1-0159": ("Sahel", "another African region; the lead says Maghreb"),
    "vq1-0166": ("Zouzou", "a later Baker film, not in the lead"),
}


def _sentences(text: str) -> list[str]:
    """Sentences of a lead; a split after an abbreviation ("Dr. No", "Warner Bros. Studios")
    is undone."""
    out: list[str] = []
    for part in re.split(r"(?<=[.!?])\s+", text):
        if out and out[-1].split()[-1] in ABBREVIATIONS:
            out[-1] += " " + part
        else:
            out.append(part)
    return out


def _sentence_with(text: str, answer: str) -> str:
    """The first sentence of the lead that contains the answer as whole words (the
    positive's reason)."""
    pattern = re.compile(r"(?<!\w)" + re.escape(answer) + r"(?!\w)", re.IGNORECASE)
    for sent in _sentences(text.replace("\xa0", " ")):
        if pattern.search(sent):
            return sent.strip()
    raise ValueError(f"answer {answer!r} not in the lead")


def _item(q: dict, title: str, evidence: str, answer: str, kind: str, reason: str) -> dict:
    return {"id": "", "qid": q["qid"], "source_split": q["split"], "evidence_title": title,
            "evidence": evidence, "question": q["question"], "answer": answer,
            "attributable": kind == "supported", "kind": kind, "checked_by": CHECKED_BY,
            "reason": reason}


def _negative(q: dict, lead: str, gold: str, answer: str, arts: dict[str, str]) -> dict:
    qid = q["qid"]
    if qid in WRONG_IN_PASSAGE:
        wrong, why = WRONG_IN_PASSAGE[qid]
        assert wrong.lower() in lead.lower() and wrong.lower() != answer.lower(), qid
        return _item(q, gold, lead, wrong, KINDS[0], why)
    if qid in OTHER_PASSAGE:
        title, why = OTHER_PASSAGE[qid]
        assert title != gold and heldout_split(title) is None, qid
        return _item(q, title, arts[title], answer, KINDS[1], why)
    wrong, why = UNSUPPORTED[qid]
    assert wrong.lower() not in lead.lower(), qid
    return _item(q, gold, lead, wrong, KINDS[2], why)


def build() -> list[dict]:
    arts = {a["title"]: a["extract"] for a in load_articles()}
    rows = [json.loads(line) for line in vital_qa_path().read_text(encoding="utf-8").splitlines()]
    test_titles = {t for r in rows if r["split"] == "test" for t in r["gold_titles"]}
    wanted = {**WRONG_IN_PASSAGE, **OTHER_PASSAGE, **UNSUPPORTED}
    assert len(wanted) == 60, "each question has exactly one negative kind"
    items: list[dict] = []
    for q in (r for r in rows if r["qid"] in wanted):
        gold = q["gold_titles"][0]
        assert q["split"] in ("train", "dev") and q["hops"] == 1, q["qid"]
        assert gold not in test_titles and heldout_split(gold) is None, q["qid"]
        lead, answer = arts[gold], q["answers"][0].replace("\xa0", " ")
        items.append(_item(q, gold, lead, answer, "supported",
                           f"the lead states it: {_sentence_with(lead, answer)}"))
        items.append(_negative(q, lead, gold, answer, arts))
    assert not any(it["evidence_title"] in test_titles for it in items), "a test article"
    for i, it in enumerate(items):
        it["id"] = f"aj-{i + 1:03d}"
    return items


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    items = build()
    OUT.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items),
                   encoding="utf-8")
    log.info("wrote %d items to %s", len(items), OUT)


if __name__ == "__main__":
    main()
