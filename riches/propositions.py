"""Propositions: atomic, decontextualised facts used as retrieval keys (§3.4, §5.1).

Paper scale reads Factoid-Wiki (Chen et al. 2023) from local JSONL files. Mini scale derives
one proposition per sentence of a wiki-vital lead with the embedded LM and the prompt in
riches/conf/riches/prompts/propositions.yaml (a decontextualising rewrite: pronouns replaced by
names), cached per sentence. A rewrite is kept only when most of its words occur in the
source passage (a hallucination filter); otherwise the sentence itself is the proposition.
These are NOT the paper's propositions.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

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


Item = tuple[str, Passage, str]  # (sentence hash, its passage, the sentence)


def rewrite_key(lm: LM, prompt_cfg: dict, max_new_tokens: int) -> str:
    """What a cached rewrite depends on besides its sentence (each cache line carries it)."""
    return hash_obj({"model": lm.name, "revision": lm.revision, "prompt": prompt_cfg,
                     "max_new_tokens": max_new_tokens})


def sentence_items(passages: Sequence[Passage]) -> list[Item]:
    """Every distinct (title, sentence) of the passages, in passage and sentence order: the
    order one process rewrites them in."""
    out: dict[str, Item] = {}
    for p in passages:
        for s in split_sentences(p.text):
            out.setdefault(hash_obj([p.title, s]), (hash_obj([p.title, s]), p, s))
    return list(out.values())


def read_cache(path: Path, key: str) -> dict[str, str]:
    """sentence hash -> rewrite of the cache lines made under `key`. A line that does not
    parse (torn by a job killed mid-write) is skipped with a warning: its sentence is simply
    rewritten again. Nothing is cut off the file, since another job may be appending to it."""
    if not path.exists():
        return {}
    out: dict[str, str] = {}
    bad = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            bad += line.strip() != ""
            continue
        if isinstance(r, dict) and r.get("key") == key and "sentence_hash" in r:
            out[r["sentence_hash"]] = r["rewrite"]
    if bad:
        log.warning("%s: skipped %d torn line(s) left by a killed job; their sentences are "
                    "rewritten again", path, bad)
    return out


def open_for_append(path: Path) -> TextIO:
    """`path` opened for appending on a line of its own (after a torn last line, if any)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ends_open = False
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            ends_open = f.read(1) != b"\n"
    f = open(path, "a", encoding="utf-8")  # noqa: SIM115 (the caller closes it)
    if ends_open:
        f.write("\n")
    return f


def cache_line(key: str, item: Item, rewrite: str) -> str:
    h, p, s = item
    return json.dumps({"key": key, "sentence_hash": h, "pid": p.pid, "sentence": s,
                       "rewrite": rewrite}, ensure_ascii=False)


def n_batches(items: Sequence[Item], batch_size: int) -> int:
    return -(-len(items) // batch_size)


def rewrite_batches(lm: LM, items: Sequence[Item], batches: Iterable[int], prompt_cfg: dict,
                    out_path: Path, done: dict[str, str], key: str, max_new_tokens: int = 48,
                    batch_size: int = 8) -> int:
    """Rewrite the batches `batches` of `items` (batch b: items[b*batch_size:(b+1)*batch_size])
    that hold a sentence not in `done`, appending one line per new rewrite to `out_path`
    (flushed: a kill loses at most a batch). A batch is always generated whole, so each
    sentence is decoded in the same padded batch wherever and whenever it runs: one process,
    a shard job, or a resumed one give the same rewrites. Returns the lines written."""
    todo = [b for b in batches
            if any(h not in done for h, _, _ in items[b * batch_size:(b + 1) * batch_size])]
    if not todo:
        return 0
    log.info("Rewriting %d batches of %d sentences into propositions with %s (cached in %s)",
             len(todo), batch_size, lm.name, out_path)
    written = 0
    with open_for_append(out_path) as f:
        for b in tqdm(todo, desc="propositions", unit="batch"):
            chunk = items[b * batch_size:(b + 1) * batch_size]
            prompts = [lm.encode(build_prompt(prompt_cfg, p.title, s)) for _, p, s in chunk]
            outs = lm.generate(prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                               stop_strings=["\n"], tokenizer=lm.tokenizer)
            for item, ids in zip(chunk, outs):
                if item[0] in done:  # decoded again only to keep the batch whole
                    continue
                rewrite = parse_rewrite(lm.decode(ids, skip_special_tokens=True))
                f.write(cache_line(key, item, rewrite) + "\n")
                f.flush()
                done[item[0]] = rewrite
                written += 1
    return written


def choose_all(items_of: Sequence[Passage], done: dict[str, str],
               min_overlap: float) -> dict[str, list[tuple[str, str]]]:
    """{pid: [(proposition, how)]} from the rewrites of every sentence of the passages."""
    out: dict[str, list[tuple[str, str]]] = {}
    for p in items_of:
        for s in split_sentences(p.text):
            out.setdefault(p.pid, []).append(choose(done[hash_obj([p.title, s])], s, p,
                                                    min_overlap))
    return out


def lm_propositions(lm: LM, passages: Sequence[Passage], prompt_cfg: dict, cache_path: Path,
                    max_new_tokens: int = 48, batch_size: int = 8,
                    min_overlap: float = 0.7) -> dict[str, list[tuple[str, str]]]:
    """{pid: [(proposition, how)]}: one stand-alone rewrite per sentence, generated only for
    the batches holding a sentence not in the cache (one JSONL line per sentence). Sharded
    runs (riches/shard_jobs.py) write the same lines through `rewrite_batches`."""
    key = rewrite_key(lm, prompt_cfg, max_new_tokens)
    done = read_cache(cache_path, key)
    items = sentence_items(passages)
    rewrite_batches(lm, items, range(n_batches(items, batch_size)), prompt_cfg, cache_path,
                    done, key, max_new_tokens, batch_size)
    return choose_all(passages, done, min_overlap)


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
