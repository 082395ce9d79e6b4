"""RICHES preprocessing split across launcher jobs: the mini-scale proposition rewrite
(experiment=riches/propositions_shards) and the suffix-array shards of the key index
(experiment=riches/index_shards). Both follow experiment=core/encode_shards: jobs `shard=i/n`
(any launcher), a rerun skips finished parts and, inside a part, finished units, and the
result is what one process computes.

Propositions: the distinct sentences of the sampled articles, in article order, cut into
batches of `BATCH` (the batches one process generates: riches/propositions.py). Part i/n
rewrites a contiguous block of batches into its own file `<model>.part-<i>-of-<n>.jsonl` beside
the proposition cache; `shard=merge` appends the parts' lines to the cache in the order one
process writes them, so the RICHES run that follows generates nothing.

Index: job i/n tokenises and plans the index folder if no job has yet (one at a time, on a
lock), then sorts its contiguous block of the plan's int32 shards (riches/index_build.py) from
the memory-mapped token file. The job that finds every shard built writes meta.json, and the
index is then queried as one (`open_index`) by the RICHES run with the same settings.
`shard=plan` only tokenises and plans (it reports how many shards there are), `shard=merge`
checks every shard, finishes the index and reports it.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.cache import cache_path
from ragrepro.errors import ConfigError
from ragrepro.io import locked
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval import Corpus
from ragrepro.retrieval.sharding import parse_shard, part_files
from ragrepro.tracking import Run

from . import index_build as ib
from .constraint import key_token_ids, vocab_size_of
from .inputs import QA_PROMPTS
from .key_index import build_key_corpus, proposition_docs
from .keys import KeyCorpus
from .propositions import (
    Item,
    cache_line,
    n_batches,
    open_for_append,
    read_cache,
    rewrite_batches,
    rewrite_key,
    sentence_items,
)
from .settings import KeySettings, RichesSettings

log = logging.getLogger(__name__)
BATCH = 8  # sentences per generate call: lm_propositions' default, which RICHES runs use
_PART = re.compile(r"\.part-(\d+)-of-(\d+)\.jsonl$")


# -- propositions ---------------------------------------------------------------------------
def proposition_cache(lm: LM) -> Path:
    """The cache file a RICHES run reads its rewrites from (riches/key_index.py)."""
    return cache_path("riches", "propositions", f"{lm.name}.jsonl")


def part_path(cache: Path, part: int, parts: int) -> Path:
    return cache.with_name(f"{cache.stem}.part-{part}-of-{parts}.jsonl")


def part_paths(cache: Path) -> list[Path]:
    return sorted(p for p in cache.parent.glob(f"{cache.stem}.part-*-of-*.jsonl")
                  if _PART.search(p.name))


def parts_done(cache: Path, key: str) -> dict[str, str]:
    """sentence hash -> rewrite over every part file of this cache (any n)."""
    out: dict[str, str] = {}
    for path in part_paths(cache):
        for h, r in read_cache(path, key).items():
            out.setdefault(h, r)
    return out


def rewrite_part(lm: LM, items: Sequence[Item], prompt_cfg: dict, cache: Path, part: int,
                 parts: int, max_new_tokens: int, batch_size: int = BATCH) -> dict[str, int]:
    """Rewrite part `part` of `parts` (a contiguous block of batches) into its part file,
    skipping batches whose sentences the cache or any part file already holds."""
    key = rewrite_key(lm, prompt_cfg, max_new_tokens)
    done = {**parts_done(cache, key), **read_cache(cache, key)}
    total = n_batches(items, batch_size)
    mine = part_files(total, part, parts)
    todo = [b for b in mine if any(h not in done for h, _, _ in
                                   items[b * batch_size:(b + 1) * batch_size])]
    log.info("Part %d/%d: sentence batches %s of %d (%d sentences each), %d to rewrite, "
             "%d already done", part, parts,
             f"{mine.start}-{mine.stop - 1}" if len(mine) else "none", total, batch_size,
             len(todo), len(mine) - len(todo))
    written = rewrite_batches(lm, items, todo, prompt_cfg, part_path(cache, part, parts), done,
                              key, max_new_tokens, batch_size)
    return {"batches": len(mine), "rewritten_batches": len(todo), "sentences": written}


def merge_rewrites(cache: Path, items: Sequence[Item], key: str,
                   batch_size: int = BATCH) -> dict[str, int]:
    """Append to the cache, in the order one process writes them, the rewrites of `items` it
    lacks, taken from the part files; a ConfigError names the missing batches."""
    with locked(cache):
        done = read_cache(cache, key)
        parts = parts_done(cache, key)
        missing = sorted({i // batch_size for i, (h, _, _) in enumerate(items)
                          if h not in done and h not in parts})
        if missing:
            raise ConfigError(
                f"Cannot merge the propositions: sentence batches {missing} of "
                f"{n_batches(items, batch_size)} are in no part file next to {cache}. Rerun "
                f"the part jobs with the same settings (shard=0/N,...,N-1/N; finished runs are "
                f"skipped, so add overwrite=true for a part whose run finished before its "
                f"file was lost).")
        lines = [cache_line(key, item, parts[item[0]]) for item in items if item[0] not in done]
        if lines:
            with open_for_append(cache) as f:  # an append, as RICHES runs write the cache
                f.write("".join(line + "\n" for line in lines))
                f.flush()
        log.info("Merged %d rewrites from %d part file(s) into %s (%d were there)", len(lines),
                 len(part_paths(cache)), cache, len(items) - len(lines))
    return {"sentences": len(items), "merged": len(lines)}


def propositions(run: Run, *, lm: LM, corpus: Corpus, settings: RichesSettings,
                 shard: str) -> Result:
    """Part `shard` (i/n) of the proposition rewrite of a RICHES run with these settings
    (riches.key: source=lm), or `shard=merge`."""
    kc = _lm_keys(settings.key)
    subset = proposition_docs(kc, list(corpus.passages))
    items = sentence_items(subset)
    cache, prompt = proposition_cache(lm), dict(settings.prompts["propositions"])
    key = rewrite_key(lm, prompt, kc.generation_max_new_tokens)
    row = {"shard": str(shard), "corpus": corpus.name, "key_type": kc.name,
           "keys_n_sampled": len(subset), "keys_seed": kc.seed, "batch_size": BATCH,
           "cache": str(Path(*cache.parts[-3:]))}  # relative: riches/propositions/<model>.jsonl
    if str(shard) == "merge":
        return Result(metrics=merge_rewrites(cache, items, key), settings=row)
    part, parts = parse_shard(str(shard))
    with run.timed("propositions"):
        counts = rewrite_part(lm, items, prompt, cache, part, parts,
                              kc.generation_max_new_tokens)
    return Result(metrics=counts, settings=row)


def _lm_keys(kc: KeySettings) -> KeySettings:
    if kc.unit != "proposition" or kc.source != "lm":
        raise ConfigError(f"experiment=riches/propositions_shards rewrites sentences with the "
                          f"LM: it needs riches/keys@riches.key=proposition with "
                          f"riches.key.source=lm (now unit={kc.unit!r}, source={kc.source!r}).")
    return kc


# -- the index --------------------------------------------------------------------------------
def fingerprint_extra(lm: LM, corpus_name: str, kc: KeySettings) -> dict[str, Any]:
    """What riches/key_index.py `build_index` hashes beside the keys (the same folder)."""
    return {"corpus": corpus_name, "key_type": kc.name, "tokenizer": lm.name,
            "tokenizer_revision": lm.revision, "leading": " "}


def index_part(folder: Path, kcorp: KeyCorpus, tokenize: ib.Tokenize, vocab_size: int,
               shard_tokens: int, meta: Mapping[str, Any], shard: str) -> dict[str, Any]:
    """One job of a sharded index build: prepare the folder if no job has, then build this
    job's block of the plan's shards (`shard=i/n`), or only plan (`plan`), or finish and check
    (`merge`). The job that finds every shard built writes meta.json."""
    if (folder / ib.META).exists():
        if not ib.missing_shards(folder):
            if str(shard) != "merge":
                meta_now = json.loads((folder / ib.META).read_text())
                log.info("RICHES index %s is finished already (%d shards)", folder,
                         len(meta_now["shards"]))
                return {"shards": len(meta_now["shards"]), "built": 0,
                        "n_tokens": meta_now["n_tokens"]}
        else:  # a shard was deleted after the index was finished: unfinish it, rebuild that
            log.warning("RICHES index %s lost shards %s: rebuilding them", folder,
                        ib.missing_shards(folder))
            (folder / ib.META).unlink(missing_ok=True)
    plan = ib.prepare_folder(folder, kcorp.keys, kcorp.key_doc, tokenize, vocab_size,
                             shard_tokens, dict(meta))
    total = len(plan["shards"])
    out: dict[str, Any] = {"shards": total, "built": 0, "n_tokens": plan["n_tokens"]}
    if str(shard) == "plan":
        log.info("Planned %s: %d tokens in %d shard(s); build them with shard=0/N,...,N-1/N "
                 "(N <= %d)", folder, plan["n_tokens"], total, total)
        return out
    if str(shard) == "merge":
        left = ib.missing_shards(folder)
        if left:
            raise ConfigError(f"Cannot finish the RICHES index {folder}: shards {left} of "
                              f"{total} are not built. Rerun the shard jobs with the same "
                              f"settings (shard=0/N,...,N-1/N; add overwrite=true for a job "
                              f"whose run finished before its shard was lost).")
        meta_now = ib.finish(folder)
        index = ib.open_index(folder)
        return {**out, "n_keys": meta_now["n_keys"], "index_tokens": int(index.n),
                "bytes_per_token": meta_now["bytes_per_token"]}
    part, parts = parse_shard(str(shard))
    mine = part_files(total, part, parts)
    missing = set(ib.missing_shards(folder))
    todo = [i for i in mine if i in missing]
    log.info("Part %d/%d of %s: index shards %s of %d, %d to build, %d already built", part,
             parts, folder.name, f"{mine.start}-{mine.stop - 1}" if len(mine) else "none",
             total, len(todo), len(mine) - len(todo))
    tokens = ib.token_file(folder, np.dtype(plan["dtype"]))
    for i in todo:
        ib.build_shard(tokens, i, folder)
    out["built"] = len(todo)
    if not ib.missing_shards(folder):
        ib.finish(folder)
        log.info("Every shard of %s is built: the index is finished", folder)
    return out


def run_keys(lm: LM, corpus: Corpus, settings: RichesSettings) -> KeyCorpus:
    """The keys a RICHES run with these settings indexes (riches/decoding.py build_decoder).
    LM propositions must be complete: index jobs never generate (run
    experiment=riches/propositions_shards first)."""
    kc, docs = settings.key, list(corpus.passages)
    if kc.unit == "proposition" and kc.source == "lm":
        subset = proposition_docs(kc, docs)
        items = sentence_items(subset)
        prompt = dict(settings.prompts["propositions"])
        key = rewrite_key(lm, prompt, kc.generation_max_new_tokens)
        done = read_cache(proposition_cache(lm), key)
        lacking = sum(h not in done for h, _, _ in items)
        if lacking:
            raise ConfigError(f"{lacking} of the {len(items)} sentences of the proposition "
                              f"keys have no rewrite in {proposition_cache(lm)}: rewrite them "
                              f"first with experiment=riches/propositions_shards (shard=i/n, "
                              f"then shard=merge) and the same settings.")
    # the shipped prompts' hand-written propositions (a named custom prompt's last), as the
    # run adds them: the same keys whichever prompt the run uses
    prompts: list[Mapping[str, Any]] = [settings.prompts[n] for n in QA_PROMPTS]
    if settings.prompt not in ("auto", *QA_PROMPTS):
        prompts.append(settings.prompts[settings.prompt])
    kcorp, _ = build_key_corpus(kc, docs, lm, prompts, settings.prompts["propositions"])
    return kcorp


def index(run: Run, *, lm: LM, corpus: Corpus, settings: RichesSettings, shard: str) -> Result:
    """Job `shard` (i/n, plan or merge) of the sharded key index of a RICHES run with these
    settings (riches.key, riches.index_shard_tokens, the model's tokenizer, the corpus)."""
    kcorp = run_keys(lm, corpus, settings)
    vocab = vocab_size_of(lm.tokenizer)
    extra = fingerprint_extra(lm, corpus.name, settings.key)
    folder, fp = ib.index_folder(kcorp.keys, kcorp.key_doc, vocab, extra)
    with run.timed("index"):
        counts = index_part(folder, kcorp, lambda texts: key_token_ids(lm.tokenizer, texts),
                            vocab, settings.index_shard_tokens, {**extra, "fingerprint": fp},
                            shard)
    row = {"shard": str(shard), "corpus": corpus.name, "key_type": settings.key.name,
           "index_shard_tokens": settings.index_shard_tokens, "n_index_keys": len(kcorp.keys),
           "index": str(Path(*folder.parts[-3:]))}  # relative: riches/index/<fingerprint>
    return Result(metrics=counts, settings=row)
