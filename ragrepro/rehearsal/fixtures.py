"""Hub-schema fixtures: a few rows per hub dataset in the exact schema the hub serves (column
names, nesting, split names), DPR-format files and a Pile-style JSONL, all made from embedded
Wikipedia leads; each method profile's `write_fixtures` adds its own files (RALM the
WikiText-103 forbidden titles, RICHES the Factoid-Wiki propositions).

Row builders are pure (article -> hub row); `write_fixtures` lays them out as
    hub/<repo>/<config>/<split>.jsonl    (read by `datasets.load_dataset("json", ...)`)
    dpr/nq-test.json, dpr/trivia-test-dpr-results.json, dpr/psgs_w100.tsv
    pile/<subset>.jsonl, <method>/... (the profiles' files)
Content is synthetic (questions ask for an article's title); only the format is real."""
from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..data.vital import load_articles
from ..methods import MethodProfile, registered

Article = tuple[str, str]  # (title, text)
N_ROWS = 6                 # rows per split: a rehearsal uses a small `limit`
N_TRAIN = 30               # train rows (dev is 1 in 10 of them)
PILE = ("realnews", "arxiv", "stackexchange", "freelaw")  # conf/dataset/<name>.yaml, local files


def words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def wikitext_rows(articles: Sequence[Article]) -> list[dict]:
    """Salesforce/wikitext rows: ` = Title = \\n`, empty rows, paragraph lines with ` \\n`.
    Seven articles of 55 words make ~1,100-1,150 stand-in tokens: just over the paper's
    1,024-token window, so retrieval windows exist at every swept stride (2-64)."""
    rows: list[dict] = []
    for title, text in articles:
        rows += [{"text": ""}, {"text": f" = {title} = \n"}, {"text": ""},
                 {"text": f" {words(text, 55)} \n"}]
    return rows


def nq_open_row(a: Article, i: int) -> dict:
    return {"question": f"what is {a[0].lower()}", "answer": [a[0]]}


def trivia_qa_row(a: Article, i: int) -> dict:
    title = a[0]
    answer = {"aliases": [title, title.lower()], "normalized_aliases": [title.lower()],
              "matched_wiki_entity_name": title, "normalized_matched_wiki_entity_name": title.lower(),
              "normalized_value": title.lower(), "type": "WikipediaEntity", "value": title}
    return {"question": f"Which subject is described as: {words(a[1], 12)}?",
            "question_id": f"tc_{i}", "question_source": "http://www.triviaqa.com/",
            "entity_pages": {"doc_source": [], "filename": [], "title": [], "wiki_context": []},
            "search_results": {"description": [], "filename": [], "rank": [], "title": [],
                               "url": [], "search_context": []},
            "answer": answer}


def hotpot_row(pair: Sequence[Article], i: int) -> dict:
    t1, t2 = pair[0][0], pair[1][0]
    titles = [a[0] for a in pair]
    sentences = [[s + ". " for s in words(a[1], 40).split(". ")[:3]] for a in pair]
    return {"id": f"5a{i:022x}", "question": f"What links {t1} and {t2}?", "answer": t2,
            "type": "bridge", "level": "hard",
            "supporting_facts": {"title": [t1, t2], "sent_id": [0, 0]},
            "context": {"title": titles, "sentences": sentences}}


def kilt_row(a: Article, i: int, config: str) -> dict:
    prov = [{"bleu_score": 1.0, "end_character": 100, "end_paragraph_id": 1,
             "meta": {"annotation_id": "-1", "evidence_span": [], "fever_page_id": "",
                      "fever_sentence_id": -1, "yes_no_answer": ""},
             "section": "Section::::Abstract.", "start_character": 0, "start_paragraph_id": 1,
             "title": a[0], "wikipedia_id": str(1000 + i)}]
    answer = {"fever": "SUPPORTS", "eli5": words(a[1], 40), "wow": words(a[1], 20)}[config]
    inp = {"fever": f"{a[0]} is described in Wikipedia.", "eli5": f"ELI5: what is {a[0]}?",
           "wow": f"I like {a[0]}.\nWhat do you know about it?\nTell me more."}[config]
    return {"id": f"{config}-{i}", "input": inp,
            "meta": {"left_context": "", "mention": "", "obj_surface": [], "partial_evidence": [],
                     "right_context": "", "sub_surface": [], "subj_aliases": [],
                     "template_questions": []},
            "output": [{"answer": answer, "meta": {"score": 0}, "provenance": prov}]}


def musique_row(pair: Sequence[Article], i: int) -> dict:
    paragraphs = [{"idx": j, "title": t, "paragraph_text": words(x, 60), "is_supporting": True}
                  for j, (t, x) in enumerate(pair)]
    decomposition = [{"id": 1000 + i, "question": f"what is {pair[0][0]}?", "answer": pair[0][0],
                      "paragraph_support_idx": 0},
                     {"id": 2000 + i, "question": "#1 relates to what?", "answer": pair[1][0],
                      "paragraph_support_idx": 1}]
    return {"id": f"2hop__{i}_{i + 1}", "paragraphs": paragraphs,
            "question": f"What relates to {pair[0][0]}?", "question_decomposition": decomposition,
            "answer": pair[1][0], "answer_aliases": [], "answerable": True}


def dpr_item(a: Article, i: int, passages: Sequence[dict]) -> dict:
    """One item of DPR's retriever-results JSON (nq-test.json layout)."""
    ctxs = [{"id": p["id"], "title": p["title"], "text": p["text"], "score": str(80.0 - j),
             "has_answer": a[0] in p["text"] or a[0] == p["title"]}
            for j, p in enumerate(passages)]
    return {"question": f"what is {a[0].lower()}", "answers": [a[0]], "ctxs": ctxs}


HubBuilder = Callable[[Sequence[Article]], list[dict]]


def _single(fn: Callable[[Article, int], dict]) -> HubBuilder:
    return lambda arts: [fn(a, i) for i, a in enumerate(arts)]


def _pairs(fn: Callable[[Sequence[Article], int], dict]) -> HubBuilder:
    return lambda arts: [fn(arts[i:i + 2], i) for i in range(len(arts) - 1)]


def _kilt(config: str) -> HubBuilder:
    return lambda arts: [kilt_row(a, i, config) for i, a in enumerate(arts)]


# (repo, config or None, hub splits, builder): the splits each hub dataset serves.
HUB: tuple[tuple[str, str | None, tuple[str, ...], HubBuilder], ...] = (
    ("Salesforce/wikitext", "wikitext-103-v1", ("train", "validation", "test"), wikitext_rows),
    ("Salesforce/wikitext", "wikitext-103-raw-v1", ("train", "validation", "test"),
     wikitext_rows),
    ("google-research-datasets/nq_open", "nq_open", ("train", "validation"),
     _single(nq_open_row)),
    ("mandarjoshi/trivia_qa", "rc.nocontext", ("train", "validation", "test"),
     _single(trivia_qa_row)),
    ("hotpotqa/hotpot_qa", "distractor", ("train", "validation"), _pairs(hotpot_row)),
    ("dgslibisey/MuSiQue", None, ("train", "validation"), _pairs(musique_row)),
    *(("facebook/kilt_tasks", c, ("train", "validation", "test"), _kilt(c))
      for c in ("eli5", "fever", "wow")),
)


def hub_file(root: Path, repo: str, config: str | None, split: str) -> Path:
    return root / "hub" / repo / (config or "default") / f"{split}.jsonl"


def dpr_passages(articles: Sequence[Article], size: int = 100) -> list[dict]:
    """DPR-style passages (id from 1, 100-word chunks, title per article)."""
    out = []
    for title, text in articles:
        ws = text.split()
        for start in range(0, max(len(ws), 1), size):
            out.append({"id": str(len(out) + 1), "title": title,
                        "text": " ".join(ws[start:start + size])})
    return out


def _jsonl(path: Path, rows: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_fixtures(root: Path, articles: Sequence[Article],
                   profiles: Iterable[MethodProfile] | None = None) -> None:
    """Write every fixture file under `root` (see the module doc for the layout): the core's,
    then each method profile's own (`profiles`, default: every registered one)."""
    for repo, config, splits, build in HUB:
        for k, split in enumerate(splits):
            part = articles[k * N_ROWS:(k + 1) * N_ROWS + 1]
            if split == "train":  # enough rows for a held-out dev part (1 in 10), disjoint
                part = articles[3 * N_ROWS + 1:3 * N_ROWS + 1 + N_TRAIN]
            _jsonl(hub_file(root, repo, config, split), build(part))
    passages = dpr_passages(articles)
    tsv = root / "dpr" / "psgs_w100.tsv"
    tsv.parent.mkdir(parents=True, exist_ok=True)
    with open(tsv, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["id", "text", "title"])
        w.writerows([p["id"], p["text"], p["title"]] for p in passages)
    by_title = {p["title"]: p for p in reversed(passages)}
    items = [dpr_item(a, i, [by_title[a[0]], *passages[i + 1:i + 4]])
             for i, a in enumerate(articles[:N_ROWS])]
    for name in ("nq-test.json", "trivia-test-dpr-results.json"):
        (root / "dpr" / name).write_text(json.dumps(items, indent=1), encoding="utf-8")
    for subset in PILE:
        _jsonl(root / "pile" / f"{subset}.jsonl",
               [{"text": t, "meta": {"pile_set_name": subset}} for _, t in articles[:N_ROWS]])
    for profile in registered() if profiles is None else profiles:
        if profile.rehearsal.write_fixtures is not None:
            profile.rehearsal.write_fixtures(root, articles, N_ROWS)


def fixture_articles(n: int = 60, extra_titles: Sequence[str] = ()) -> list[Article]:
    """Embedded Wikipedia leads with at least 60 words (a stable, offline source), then the
    articles named in `extra_titles` (the few-shot demonstrations' sources)."""
    arts = [(str(a["title"]), str(a["extract"])) for a in load_articles()]
    out = [a for a in arts if len(a[1].split()) >= 60][:n]
    have = {t for t, _ in out}
    return out + [a for a in arts if a[0] in set(extra_titles) and a[0] not in have]


def load_fixture_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
