"""Hub row converters: one hub row (in the hub's own schema) -> QARecord. Pure functions.

A hub dataset config names its converter (`converter: nq_open_row`); a name not registered
here is read as a dotted path to a function of the same signature (`mypkg.rows.my_row`), so a
new schema needs a function, not an edit of this module."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hydra.utils import get_object

from ..errors import ConfigError
from .records import Passage, QARecord

# (row, index in the split, our split name, the hub config) -> record
Converter = Callable[[Mapping[str, Any], int, str, "str | None"], QARecord]

# The record-level task of KILT configs (the records say what kind of output they expect).
KILT_TASKS = {"eli5": "lfqa", "fever": "fact", "wow": "dialog"}


def nq_open_row(r: Mapping[str, Any], i: int, split: str, config: str | None) -> QARecord:
    return QARecord(qid=f"nq-open-{split}-{i}", question=r["question"], answers=list(r["answer"]),
                    split=split, meta={"source": "nq_open"})


def trivia_qa_row(r: Mapping[str, Any], i: int, split: str, config: str | None) -> QARecord:
    ans = r["answer"]
    answers = list(dict.fromkeys([ans["value"], *ans.get("aliases", [])]))
    return QARecord(qid=str(r.get("question_id", f"tqa-{i}")), question=r["question"],
                    answers=answers, split=split, meta={"source": "trivia_qa"})


def hotpot_row(r: Mapping[str, Any], i: int, split: str, config: str | None) -> QARecord:
    ctx = r["context"]
    passages = [Passage(pid=f"{r['id']}-{j}", title=t, text="".join(s))
                for j, (t, s) in enumerate(zip(ctx["title"], ctx["sentences"]))]
    gold = list(dict.fromkeys(r["supporting_facts"]["title"]))
    return QARecord(qid=str(r["id"]), question=r["question"], answers=[r["answer"]],
                    gold_titles=gold, passages=passages, task="multihop", hops=2, split=split,
                    meta={"source": "hotpot_qa", "type": r.get("type"), "level": r.get("level")})


def kilt_row(r: Mapping[str, Any], i: int, split: str, config: str | None) -> QARecord:
    """KILT: input (FEVER claim; WoW history joined by newlines), output[{answer, provenance}]."""
    outputs = r.get("output") or []
    answers = [o["answer"] for o in outputs if o.get("answer")]
    titles = [p.get("title") or p.get("wikipedia_title") for o in outputs
              for p in (o.get("provenance") or [])]
    return QARecord(qid=str(r["id"]), question=r["input"], answers=answers,
                    gold_titles=list(dict.fromkeys(t for t in titles if t)),
                    task=KILT_TASKS.get(str(config), "qa"), split=split,
                    meta={"source": f"kilt_{config}"})


def musique_row(r: Mapping[str, Any], i: int, split: str, config: str | None) -> QARecord:
    paragraphs = r.get("paragraphs") or []
    passages = [Passage(pid=f"{r['id']}-{p.get('idx', j)}", title=p.get("title", ""),
                        text=p["paragraph_text"]) for j, p in enumerate(paragraphs)]
    gold = [p.get("title", "") for p in paragraphs if p.get("is_supporting")]
    decomposition = r.get("question_decomposition") or []
    return QARecord(qid=str(r["id"]), question=r["question"],
                    answers=[r["answer"], *(r.get("answer_aliases") or [])], gold_titles=gold,
                    passages=passages, task="multihop", hops=max(2, len(decomposition)),
                    split=split, meta={"source": "musique",
                                       "answerable": r.get("answerable", True)})


CONVERTERS: dict[str, Converter] = {
    "nq_open_row": nq_open_row, "trivia_qa_row": trivia_qa_row, "hotpot_row": hotpot_row,
    "kilt_row": kilt_row, "musique_row": musique_row,
}


def get_converter(name: str) -> Converter:
    """A registered converter, or the function at a dotted path."""
    if name in CONVERTERS:
        return CONVERTERS[name]
    if "." in name:

        try:
            fn = get_object(name)
        except Exception as e:
            raise ConfigError(f"converter {name!r} cannot be imported ({e}).") from e
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    raise ConfigError(f"Unknown converter {name!r}: use one of {sorted(CONVERTERS)} or a dotted "
                      f"path to a function (row, index, split, config) -> QARecord.")
