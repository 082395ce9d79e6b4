"""RICHES's part of `ragrepro plan` (the `plan` hook of riches/profile.py):
the TRUE T5 judge's weights, the Factoid-Wiki files, and the suffix-array index that
constrains decoding, sized from the token count without building it.

Sizes (riches/index_build.py): the text is stored once as uint16 (uint32 past 65,535 ids) and
cut at separators into shards of at most `riches.index_shard_tokens` tokens (2^31 - 1), each
with an int32 suffix array: 6 bytes per token of a SmolLM2 index at any size. Each shard is
sorted by its own job (riches/index_sort.py) whose peak memory is the measured bytes per token
of one shard job (benchmarks/riches_shards.py) times the shard's tokens; the shards can be
built one after another (peak = one shard) or all at once (peak = the sum).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragrepro.methods import GB, TOKENS_PER_WORD, IndexPlan, PlanExtras
from ragrepro.plan import corpus_size, hub_model_plan

from .index import token_dtype
from .index_build import MAX_SHARD_TOKENS

# Factoid-Wiki (Chen et al. 2023, "Dense X Retrieval", Table 1): 256,885,003 propositions of
# 11.2 words on average (RICHES §4 indexes the propositions without titles). These are the
# published figures, not counted from the files here.
FACTOID_WIKI_PROPOSITIONS = 256_885_003
FACTOID_WIKI_WORDS = 11.2
# One shard job measured on 3e8 synthetic tokens (results/bench/riches_shards.md, one core,
# 2026-12-02): peak RSS 2.36 GB = 7.86 bytes a token (6 of them the memory-mapped text and
# int32 suffix array, the rest the sorter's scratch, capped at 2 GiB for larger shards) and
# 282 s of sorting at load average 4 (757 s at load 8), taken as linear in the shard's tokens.
SHARD_BUILD_BYTES_PER_TOKEN = 7.9
SORT_TOKENS_PER_S = 1.0e6
SA_BYTES = 4  # int32 suffix array entries


def index_bytes(n_tokens: int, n_keys: int, vocab_size: int) -> int:
    """What riches/index_build.py writes (and a search memory-maps): the text, one int32
    suffix-array entry per token, and the int64 key start and key document of every key."""
    return n_tokens * (token_dtype(vocab_size).itemsize + SA_BYTES) + 16 * n_keys


def n_shards(n_tokens: int, shard_tokens: int = MAX_SHARD_TOKENS) -> int:
    """Shards of at most shard_tokens tokens (at least this many: a shard ends at the last
    separator that fits, so a real plan can need one more)."""
    return max(1, math.ceil(n_tokens / shard_tokens))


def shard_build_peak_bytes(n_tokens: int, shard_tokens: int = MAX_SHARD_TOKENS) -> int:
    """Peak memory of the largest shard job (the measured bytes per shard token)."""
    return int(min(n_tokens, shard_tokens) * SHARD_BUILD_BYTES_PER_TOKEN)


def factoid_wiki_tokens(tokens_per_word: float = TOKENS_PER_WORD) -> tuple[int, int]:
    """(tokens including one separator per key, keys) of the Factoid-Wiki propositions."""
    keys = FACTOID_WIKI_PROPOSITIONS
    return int(keys * (FACTOID_WIKI_WORDS * tokens_per_word + 1)) + 1, keys


def _key_tokens(cfg: DictConfig) -> tuple[int, int, str] | None:
    """(tokens, keys, what) of the cell's key index, when its size is known."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    if sel("riches.key.source") == "factoid-wiki" and sel("riches.key.unit") == "proposition":
        tokens, keys = factoid_wiki_tokens()
        return tokens, keys, "Factoid-Wiki propositions (published counts)"
    size = corpus_size(cfg)
    if size is None or sel("riches.key.unit") not in ("paragraph", "sentence"):
        return None  # titles: the distinct titles are not counted without the corpus
    n, words = size
    # one key per passage; sentences: the same words, ~5 keys per 100-word passage (21 words
    # per sentence in Dense X Retrieval's Table 1)
    keys = n * (5 if sel("riches.key.unit") == "sentence" else 1)
    return int(n * words * TOKENS_PER_WORD + keys) + 1, keys, \
        f"{sel('corpus.name')} {sel('riches.key.unit')}s"


def index_plan(cfg: DictConfig) -> IndexPlan | None:
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    found = _key_tokens(cfg)
    lm = hub_model_plan("lm", sel("model.source"), "float32")
    if sel("method") != "riches" or found is None or lm is None:
        return None
    tokens, keys, what = found
    shard_tokens = int(sel("riches.index_shard_tokens", MAX_SHARD_TOKENS))
    shards = n_shards(tokens, shard_tokens)
    size = index_bytes(tokens, keys, lm.vocab) / GB
    peak = shard_build_peak_bytes(tokens, shard_tokens)
    note = (f"{token_dtype(lm.vocab).name} text + {shards} int32 suffix-array shard(s) of "
            f"<= {shard_tokens:,} tokens (riches.index_shard_tokens), memory-mapped; build "
            f"one job per shard (riches/index_build.py): {peak / GB:.1f} GB peak per shard job "
            f"({SHARD_BUILD_BYTES_PER_TOKEN:g} B/token measured), {shards * peak / GB:.1f} GB "
            f"for all {shards} at once; build hours are one job after another")
    return IndexPlan(f"RICHES suffix array: {what}", f"{tokens / 1e9:.2f}B tokens, {keys:,} keys",
                     size, size, peak / GB, tokens / SORT_TOKENS_PER_S / 3600, note)


def plan_extras(cfg: DictConfig, tflops: float) -> PlanExtras:
    """The ragrepro plan hook: RICHES's judge model, Factoid-Wiki files and key index."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    out = PlanExtras()
    if sel("riches.autoais.backend") == "t5":
        judge = hub_model_plan("autoais", sel("riches.autoais.model"),
                               str(sel("riches.autoais.dtype") or "float32"))
        out.models += [judge] if judge else []
    paths: list[Any] = list(sel("riches.key.paths") or [])
    out.files += [("Factoid-Wiki", str(p), Path(str(p)).expanduser().exists()) for p in paths]
    if sel("riches.key.source") == "factoid-wiki" and not paths:
        out.files.append(("Factoid-Wiki", "riches.key.paths is empty", False))
    index = index_plan(cfg)
    out.indexes += [index] if index else []
    # RICHES itself and the no-retrieval baseline never search the cell's retriever
    out.uses_retriever = sel("method") not in ("riches", "no_retrieval")
    return out
