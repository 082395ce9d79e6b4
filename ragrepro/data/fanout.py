"""`fanout-grounded`: FanOutQA sub-questions answerable from one wiki-vital lead.

FanOutQA (Zhu et al., 2024; data CC BY-SA 4.0) ships with the `fanoutqa` PyPI package.
Every question has a decomposition tree whose leaves carry an answer and the Wikipedia
title of their evidence. We keep each sub-question (any depth) whose evidence article is a
wiki-vital *corpus* article (held-out LM articles excluded) and whose answer is a single
string occurring verbatim in that article's lead: a small, human-written QA set grounded in
the embedded corpus. Only the dev split has answers (test ships questions only).
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..assets import fanoutqa_file
from ..errors import ConfigError
from ..io import read_json
from .common import finish_qa
from .records import QARecord
from .vital import corpus_passages

log = logging.getLogger(__name__)

FANOUT_LICENSE = "CC BY-SA 4.0 (FanOutQA, Zhu et al. 2024)"


def walk_subquestions(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Depth-first over every node below `node` (the root question itself is not yielded)."""
    for child in node.get("decomposition") or []:
        yield child
        yield from walk_subquestions(child)


def single_answer(answer: Any) -> str | None:
    """The answer as one string, or None for lists/dicts/numbers-with-structure."""
    if isinstance(answer, str):
        return answer.strip() or None
    if isinstance(answer, list) and len(answer) == 1 and isinstance(answer[0], str):
        return answer[0].strip() or None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return str(answer)
    return None


def occurs_as_phrase(answer: str, text: str) -> bool:
    """`answer` occurs verbatim in `text` and is not part of a longer word or number
    ("4" inside "1945" does not count)."""
    pattern = r"(?<![0-9A-Za-z])" + re.escape(answer) + r"(?![0-9A-Za-z])"
    return re.search(pattern, text) is not None


def grounded_records(questions: list[Mapping[str, Any]], leads: Mapping[str, str],
                     split: str = "dev") -> list[QARecord]:
    """Sub-questions whose evidence title is a key of `leads` and whose single answer occurs
    verbatim (as a whole phrase) in that lead. Sub-questions shared by several trees (same
    id) are kept once. Pure: `leads` maps corpus title -> lead text."""
    out: list[QARecord] = []
    seen: set[str] = set()
    for q in questions:
        for sub in walk_subquestions(q):
            title = (sub.get("evidence") or {}).get("title")
            answer = single_answer(sub.get("answer"))
            if not title or title not in leads or answer is None or not occurs_as_phrase(answer, leads[title]):
                continue
            qid = f"fanout-{sub['id']}"
            if qid in seen:
                continue
            seen.add(qid)
            out.append(QARecord(qid=qid, question=str(sub["question"]), answers=[answer],
                                gold_titles=[title], task="qa", hops=1, split=split,
                                meta={"source": "fanoutqa", "parent_id": q.get("id"),
                                      "parent_question": q.get("question"),
                                      "license": FANOUT_LICENSE}))
    return out


def load_fanout_grounded(split: str = "dev") -> list[QARecord]:
    """FanOutQA sub-questions grounded in the wiki-vital corpus. split: dev (only split with
    answers) or all (= dev)."""
    if split not in ("dev", "all", "test"):
        raise ConfigError(f"fanout-grounded split={split!r}; use dev (FanOutQA's test split "
                          f"has no public answers).")
    if split == "test":
        raise ConfigError("FanOutQA's test split ships without answers, so fanout-grounded "
                          "has only split=dev. Use dataset.split=dev.")
    leads = {p.title: p.text for p in corpus_passages()}
    records = grounded_records(read_json(fanoutqa_file("dev")), leads, split="dev")
    log.info("fanout-grounded: %d sub-questions grounded in wiki-vital leads", len(records))
    return records


def fanout_grounded(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
                    hops: int | None = None) -> list[QARecord]:
    """Loader of conf/dataset/fanout-grounded.yaml (split dev; `all` is dev too)."""
    records = load_fanout_grounded("dev" if split in ("dev", "all") else split)
    return finish_qa(records, name, split, limit, hops)
