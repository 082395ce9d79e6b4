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

from ragrepro.methods import (
    GB,
    TOKENS_PER_WORD,
    Decoding,
    IndexPlan,
    PlanExtras,
    Sizing,
    eval_examples,
)
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
# Decoding sizes. The few-shot prefix is sized from its prompt file's words (at 1.3 tokens a
# word: the demonstrations' keys, markers and punctuation make it denser than running text);
# a question adds QUESTION_TOKENS. The beam reorders its KV cache every step
# (riches/beam.py HFStepModel.step: reorder_cache gathers every layer's keys and values),
# which reads and writes the cache once more besides attention's read: 3 passes.
PROMPT_TOKENS_PER_WORD = 1.3
QUESTION_TOKENS = 32
BEAM_KV_PASSES = 3
PASSAGE_TOKENS = 160
DEMO_KEY_WORDS = 21  # a sentence key (Dense X Retrieval, Table 1: 21 words per sentence)


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


def key_tokens(cfg: DictConfig) -> tuple[int, int, str] | None:
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
    found = key_tokens(cfg)
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


def prompt_tokens(cfg: DictConfig) -> int:
    """The few-shot prefix of the cell's prompt (riches.prompt; auto: multi_hop for a
    multi-hop dataset), sized from the words of its prompt file."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    name = str(sel("riches.prompt", "auto"))
    if name == "auto":
        hops = sel("dataset.hops")
        name = "multi_hop" if (hops and int(hops) > 1) or \
            sel("dataset.name") in ("hotpotqa", "musique") else "single_hop"
    # the composed prompt (riches.prompts.<name>); one the config lacks: the single-hop size
    node = sel(f"riches.prompts.{name}")
    if node is None:
        node = sel("riches.prompts.single_hop")
    cfg = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    # each demonstration step copies a key from the corpus, which the file does not hold
    steps = sum(len(ex.get("steps") or []) for ex in cfg.get("examples") or [])
    return int((prompt_words(cfg) + steps * DEMO_KEY_WORDS) * PROMPT_TOKENS_PER_WORD)


def prompt_words(node: Any) -> int:
    """Words in every string of a prompt file's values (its comments are not prompt text)."""
    if isinstance(node, str):
        return len(node.split())
    if isinstance(node, dict):
        return sum(prompt_words(v) for v in node.values())
    if isinstance(node, list):
        return sum(prompt_words(v) for v in node)
    return 0


def decode_budget(cfg: DictConfig) -> int:
    """RICHES's max new tokens: riches.max_new_tokens, else the key type's."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    return int(sel("riches.max_new_tokens") or sel("riches.key.max_new_tokens") or 160)


def decoding_of(cfg: DictConfig) -> tuple[Sizing, Decoding] | None:
    """How much a RICHES-package cell computes: RICHES decodes one question at a time with up
    to `beam_size` live hypotheses for the whole budget (an upper bound: a question stops at
    its answer line), its no-retrieval ablation with one (the adaptive beam widens only inside
    keys); the dense reader and the iterative
    baseline decode greedily after their passages. The shared prefix is prefilled once."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    method = sel("method")
    n, prefix = eval_examples(cfg), prompt_tokens(cfg)
    if method in ("riches", "no_retrieval"):
        # the adaptive beam (riches/beam.py width_for) widens only inside a key: without the
        # constraint every hypothesis is free text and proposes one token, so one stays live
        free = method == "no_retrieval" and bool(sel("riches.adaptive", True))
        steps, passes = decode_budget(cfg), BEAM_KV_PASSES
        beam = 1 if free else int(sel("riches.beam_size", 1))
        context = prefix + QUESTION_TOKENS
    elif method == "dense_reader":
        k = sel("riches.dense.k", "auto")
        docs = int(sel("riches.dense.k_default", 1)) if k == "auto" else int(k)
        steps, beam, passes = int(sel("riches.reader_max_new_tokens", 32)), 1, 1
        context = prefix + QUESTION_TOKENS + docs * PASSAGE_TOKENS
    elif method == "iterative":
        steps = int(sel("riches.iterative.max_steps", 4)) * \
            int(sel("riches.iterative.max_new_tokens", 64))
        beam, passes = 1, 1
        context = prefix + QUESTION_TOKENS + int(sel("riches.iterative.max_steps", 4)) \
            * PASSAGE_TOKENS
    else:
        return None
    decoding = Decoding(n, steps, context, batch=1, beam=beam, kv_passes=passes)
    # prefill: the shared prefix once, then each question's own tokens (and passages)
    tokens = prefix + n * (context - prefix) + decoding.generated_tokens
    return Sizing(tokens, context + steps, beam), decoding


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
    sized = decoding_of(cfg)
    if sized is not None:
        out.sizing, out.decoding = sized
    return out
