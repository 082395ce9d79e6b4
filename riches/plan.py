"""RICHES's part of `ragrepro plan` (the `plan` hook of riches/profile.py):
the TRUE T5 judge's weights, the Factoid-Wiki files, and the suffix-array index that
constrains decoding, sized from the token count without building it.

Sizes (riches/index.py): the text is stored as uint16 (uint32 past 65,535 ids) and the suffix
array as int32, or int64 for a text above 2^31 tokens (`suffix_array_dtype`), so a
Factoid-Wiki index costs 10 bytes per token, not 6. pydivsufsort sorts the text re-encoded as
bytes, and its 64-bit build takes over already at 2^31 *bytes* (`build_suffix_dtype`): the
build's peak memory is `build_peak_bytes`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragrepro.methods import GB, TOKENS_PER_WORD, IndexPlan, PlanExtras
from ragrepro.plan import corpus_size, hub_model_plan

from .index import build_suffix_dtype, sorted_symbol_bytes, suffix_array_dtype, token_dtype

# Factoid-Wiki (Chen et al. 2023, "Dense X Retrieval", Table 1): 256,885,003 propositions of
# 11.2 words on average (RICHES §4 indexes the propositions without titles). These are the
# published figures, not counted from the files here.
FACTOID_WIKI_PROPOSITIONS = 256_885_003
FACTOID_WIKI_WORDS = 11.2
# divsufsort sorted 51.7M wiki-vital tokens in 20 s on one core here (results/bench/riches.csv);
# it is O(n log n) at worst, taken as linear. CPython token lists: a list slot (8 bytes) and
# an int object (28 bytes) per token while `SuffixIndex.build` holds the tokenised keys.
SORT_TOKENS_PER_S = 2.5e6
PY_LIST_BYTES_PER_TOKEN = 36


def index_bytes(n_tokens: int, n_keys: int, vocab_size: int) -> int:
    """What `SuffixIndex.save` writes (and a search memory-maps): text, suffix array, and the
    int64 key start and key document of every key."""
    return n_tokens * (token_dtype(vocab_size).itemsize + suffix_array_dtype(n_tokens).itemsize) \
        + 16 * n_keys


def build_peak_bytes(n_tokens: int, vocab_size: int) -> int:
    """Peak memory of the suffix sort inside pydivsufsort, per its code: the text (t bytes per
    token), its byte re-encoding (s), the byte suffix array (s x w, w = build width) and at the
    end `out[out % s == 0] // s` (a mask of s bytes, two arrays of w): the larger of the
    modulo step (the mask and a temporary of s x w) and the final division."""
    t = token_dtype(vocab_size).itemsize
    s = sorted_symbol_bytes(vocab_size)
    w = build_suffix_dtype(n_tokens, vocab_size).itemsize
    return n_tokens * (t + s + s * w + s + max(s * w, 2 * w))


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
    size = index_bytes(tokens, keys, lm.vocab) / GB
    peak = build_peak_bytes(tokens, lm.vocab) + tokens * PY_LIST_BYTES_PER_TOKEN
    width = suffix_array_dtype(tokens)
    note = (f"{token_dtype(lm.vocab).name} text + {width.name} suffix array "
            f"({'above' if width.itemsize == 8 else 'below'} 2^31 tokens), memory-mapped; "
            f"build in one process (riches/index.py): tokenised keys as Python lists + "
            f"pydivsufsort ({build_suffix_dtype(tokens, lm.vocab).name} while sorting)")
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
