"""Propositions: atomic, decontextualised facts used as retrieval keys (§3.4, §5.1).

Paper scale reads Factoid-Wiki (Chen et al. 2023) from local JSONL files. Mini scale derives
one proposition per sentence of a wiki-vital lead with the embedded LM and the prompt in
conf/riches/prompts/propositions.yaml (a decontextualising rewrite: pronouns replaced by
names), cached per sentence. A rewrite is kept only when most of its words occur in the
source passage (a hallucination filter); otherwise the sentence itself is the proposition.
These are NOT the paper's propositions.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from ragrepro.data.records import Passage
from ragrepro.errors import DataError
from ragrepro.hashing import hash_obj
from ragrepro.io import iter_jsonl

from .keys import split_sentences

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+", re.UNICODE)


def build_prompt(cfg: dict, title: str, sentence: str) -> str:
    parts = [cfg["instruction"].strip(), ""]
    for ex in cfg["examples"]:
        parts.append(cfg["item"].format(title=ex["title"], sentence=ex["sentence"])
                     + f" {ex['rewrite']}\n")
    parts.append(cfg["item"].format(title=title, sentence=sentence))
    return "\n".join(parts)


def parse_rewrite(generated: str) -> str:
    """The first line of the generation, whitespace-normalised."""
    return " ".join(generated.strip().split("\n")[0].split())


def supported(fact: str, passage: Passage, min_overlap: float = 0.7, min_words: int = 4) -> bool:
    """Most of the fact's words occur in the passage (title included)."""
    words = [w.lower() for w in _WORD.findall(fact)]
    if len(words) < min_words:
        return False
    source = {w.lower() for w in _WORD.findall(f"{passage.title} {passage.text}")}
    return sum(w in source for w in words) / len(words) >= min_overlap


def choose(rewrite: str, sentence: str, passage: Passage, min_overlap: float) -> tuple[str, str]:
    """(proposition, how): the rewrite when the passage supports it, else the sentence."""
    if rewrite and supported(rewrite, passage, min_overlap):
        return rewrite, "rewrite"
    return sentence, "sentence"


def lm_propositions(lm: LM, passages: Sequence[Passage], prompt_cfg: dict, cache_path: Path,
                    max_new_tokens: int = 48, batch_size: int = 8,
                    min_overlap: float = 0.7) -> dict[str, list[tuple[str, str]]]:
    """{pid: [(proposition, how)]}: one stand-alone rewrite per sentence, generated only for
    sentences not in the cache (one JSONL line per sentence)."""
    key = hash_obj({"model": lm.name, "revision": lm.revision, "prompt": prompt_cfg,
                    "max_new_tokens": max_new_tokens})
    done: dict[str, str] = {}
    if cache_path.exists():
        for r in iter_jsonl(cache_path):
            if r.get("key") == key:
                done[r["sentence_hash"]] = r["rewrite"]
    items = [(p, s) for p in passages for s in split_sentences(p.text)]
    todo = list({hash_obj([p.title, s]): (p, s) for p, s in items
                 if hash_obj([p.title, s]) not in done}.items())
    if todo:
        log.info("Rewriting %d sentences into propositions with %s (cached in %s)", len(todo),
                 lm.name, cache_path)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        with open(cache_path, "a", encoding="utf-8") as f:
            for b in tqdm(range(0, len(todo), batch_size), desc="propositions", unit="batch"):
                chunk = todo[b:b + batch_size]
                prompts = [lm.encode(build_prompt(prompt_cfg, p.title, s)) for _, (p, s) in chunk]
                outs = lm.generate(prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                   stop_strings=["\n"], tokenizer=lm.tokenizer)
                for (h, (p, s)), ids in zip(chunk, outs):
                    rewrite = parse_rewrite(lm.decode(ids, skip_special_tokens=True))
                    f.write(json.dumps({"key": key, "sentence_hash": h, "pid": p.pid,
                                        "sentence": s, "rewrite": rewrite},
                                       ensure_ascii=False) + "\n")
                    f.flush()
                    done[h] = rewrite
    out: dict[str, list[tuple[str, str]]] = {}
    for p, s in items:
        out.setdefault(p.pid, []).append(choose(done[hash_obj([p.title, s])], s, p, min_overlap))
    return out


def read_factoid_wiki(paths: Iterable[str | Path], docs: Sequence[Passage]) -> list[tuple[str, int]]:
    """(proposition, document index) pairs from Factoid-Wiki-style JSONL. Each line holds
    `title` (or `doc_id`/`pid` matching a corpus passage) and `propositions` (a list) or
    `proposition` (one string). Lines whose document is not in the corpus are dropped."""
    by_pid = {p.pid: i for i, p in enumerate(docs)}
    by_title: dict[str, int] = {}
    for i, p in enumerate(docs):
        by_title.setdefault(p.title, i)
    out: list[tuple[str, int]] = []
    missing = 0
    for path in paths:
        p = Path(path)
        if not p.exists():
            raise DataError(f"Factoid-Wiki file {p} does not exist: download Factoid-Wiki and "
                            f"set riches.key.paths to its JSONL files.")
        for r in iter_jsonl(p):
            doc = by_pid.get(str(r.get("doc_id", r.get("pid", ""))))
            if doc is None:
                doc = by_title.get(str(r.get("title", "")))
            if doc is None:
                missing += 1
                continue
            props = r.get("propositions") or ([r["proposition"]] if r.get("proposition") else [])
            out.extend((str(x), doc) for x in props)
    if missing:
        log.warning("%d Factoid-Wiki lines point to no corpus document and were dropped", missing)
    return out
