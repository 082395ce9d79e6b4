"""The keys a RICHES run decodes and their suffix index: corpus units (cached), mini-scale
LM propositions over a seeded article sample, or Factoid-Wiki files, with the provenance
every row records (riches/provenance.py)."""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragrepro.cache import cache_path, cached_json
from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.models.lm import LM

from .constraint import key_token_ids, vocab_size_of
from .index import CorpusIndex
from .index_build import MAX_SHARD_TOKENS, build_or_load
from .keys import KeyCorpus, build_keys
from .prompts import RichesPrompt, example_propositions
from .propositions import lm_propositions, read_factoid_wiki
from .provenance import provenance, sample_articles
from .settings import KeySettings

log = logging.getLogger(__name__)


def proposition_docs(kc: KeySettings, docs: list[Passage]) -> list[Passage]:
    """Mini scale: the articles whose propositions the LM generates, a seeded random sample
    of `n_articles` corpus articles chosen without looking at any question (see
    riches/provenance.py; generation is the slow part on a CPU)."""
    if kc.articles != "sample":
        raise ConfigError(f"riches.key.articles={kc.articles!r}; mini-scale propositions "
                          f"support 'sample' (a seeded random sample of n_articles articles).")
    chosen = sample_articles([p.title for p in docs], kc.n_articles, kc.seed)
    return [docs[i] for i in chosen]


def build_key_corpus(kc: KeySettings, docs: list[Passage], lm: LM,
                     prompt_cfgs: Sequence[Mapping[str, Any]],
                     generation_prompt: Mapping[str, Any]) -> tuple[KeyCorpus, dict[str, Any]]:
    """The keys of the index and their provenance (row columns). `prompt_cfgs`: the few-shot
    prompts whose hand-written propositions join an LM-derived index; `generation_prompt`:
    the prompt that rewrites sentences into propositions
    (riches/conf/riches/prompts/propositions)."""
    if kc.unit != "proposition":
        kcorp = cached_keys(kc.unit, docs)
        return kcorp, provenance(kcorp, "corpus", "all", None)
    if kc.source == "factoid-wiki":
        kcorp = build_keys("proposition", docs, propositions=read_factoid_wiki(kc.paths, docs))
        return kcorp, provenance(kcorp, "factoid-wiki", "file", None)
    if kc.source != "lm":
        raise ConfigError(f"riches.key.source={kc.source!r}; use 'lm' (mini) or "
                          f"'factoid-wiki' (paper, with riches.key.paths).")
    subset = proposition_docs(kc, docs)
    facts = lm_propositions(lm, subset, generation_prompt,
                            cache_path("riches", "propositions", f"{lm.name}.jsonl"),
                            max_new_tokens=kc.generation_max_new_tokens,
                            min_overlap=kc.min_overlap)
    pos = {p.pid: i for i, p in enumerate(docs)}
    by_title = {p.title: i for i, p in enumerate(docs)}
    pairs = [(f, pos[p.pid]) for p in subset for f, _ in facts.get(p.pid, [])]
    n_rewritten = sum(how == "rewrite" for p in subset for _, how in facts.get(p.pid, []))
    demo = list(dict.fromkeys((text, by_title[t]) for pcfg in prompt_cfgs  # hand-written
                              for text, t in example_propositions(pcfg) if t in by_title))
    pairs = list(dict.fromkeys(pairs + demo))
    log.info("Proposition keys: %d over %d sampled articles (seed %s; LM-derived, %d rewritten, "
             "the rest kept as sentences; mini scale) + the demonstrations' hand-written ones",
             len(pairs), len(subset), kc.seed, n_rewritten)
    kcorp = build_keys("proposition", docs, propositions=pairs)
    return kcorp, {**provenance(kcorp, "lm", "sample", kc.seed),
                   "keys_n_sampled": len(subset), "keys_n_demo": len(demo)}


def cached_keys(unit: str, docs: list[Passage]) -> KeyCorpus:
    """Key texts of a corpus unit, cached (sentence splitting the corpus takes a minute)."""
    h = hashlib.sha256(unit.encode())
    for p in docs:
        h.update(f"{p.pid}\x1f{p.title}\x1f{p.text}\x1e".encode())

    def compute() -> dict[str, list]:
        kcorp = build_keys(unit, docs)
        return {"keys": kcorp.keys, "key_doc": kcorp.key_doc}

    data = cached_json(cache_path("riches", "keys", f"{unit}-{h.hexdigest()[:16]}.json"), compute)
    return KeyCorpus(unit, data["keys"], data["key_doc"], docs)


def build_index(kcorp: KeyCorpus, lm: LM, corpus_name: str, kc: KeySettings,
                shard_tokens: int = MAX_SHARD_TOKENS) -> CorpusIndex:
    tok = lm.tokenizer
    return build_or_load(kcorp.keys, kcorp.key_doc, lambda texts: key_token_ids(tok, texts),
                         vocab_size_of(tok),
                         {"corpus": corpus_name, "key_type": kc.name, "tokenizer": lm.name,
                          "tokenizer_revision": lm.revision, "leading": " "},
                         shard_tokens=shard_tokens)


def check_demo_keys(prompt: RichesPrompt, index: CorpusIndex, at_start: bool, full: bool) -> None:
    """Every demonstration key must be decodable under the constraint."""
    for key in prompt.demo_keys():
        ids = prompt.key_ids(key)
        ok = index.is_full_key(ids) if full else index.count(ids, at_start) > 0
        if not ok:
            raise ConfigError(f"few-shot key {key!r} is not a {'whole ' if full else ''}key of "
                              f"the index: demonstrations must be verbatim corpus keys.")
