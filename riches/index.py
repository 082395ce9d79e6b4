"""A corpus index over token ids: which tokens continue a prefix somewhere in the corpus.

The paper uses an FM-index (§3.2). This is the same query surface over an uncompressed
suffix array (pydivsufsort), which costs about 6 bytes per token and needs no C++ build:

- `Span(lo, hi, depth)`: the suffix-array rows [lo, hi) whose suffixes start with a prefix
  of `depth` tokens. The span *is* the incremental per-beam state: extending the prefix by
  one token is one narrowing of the parent's span, never a search from scratch.
- `children(span)`: every distinct next token with its sub-span (count = hi - lo), found by
  bisection inside the span: O(d log r) probes for d distinct tokens in a span of r rows,
  vectorised over all open segments, so the cost does not grow with corpus size beyond the
  log factor. Results are memoised by (lo, hi, depth), which identifies the prefix.
- The text is `SEP k1 SEP k2 ... SEP kN SEP`: a separator before every key and at the end,
  so no match crosses a key boundary, `[SEP] + prefix` means "starts at a key start" and
  SEP among the children means "a key may end here".
- Arrays are .npy files opened with mmap_mode="r", so an index larger than RAM is
  searchable; `build_or_load` caches them under cache_dir()/riches/index/<hash>/.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydivsufsort import divsufsort

from ragrepro.errors import ConfigError, DataError
from ragrepro.paths import cache_dir

log = logging.getLogger(__name__)

# Below this many rows a span is scanned directly (one vectorised gather): constant work,
# and faster than bisection for small spans.
SCAN_ROWS = 2048
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Span:
    """Suffix-array rows [lo, hi) whose suffixes start with the current `depth`-token prefix."""

    lo: int
    hi: int
    depth: int

    @property
    def count(self) -> int:
        return self.hi - self.lo


@dataclass(frozen=True)
class Children:
    """Distinct next tokens of a span (sorted), their counts and sub-spans."""

    tokens: np.ndarray  # int64, sorted ascending; may contain the separator
    starts: np.ndarray  # int64, absolute suffix-array rows
    ends: np.ndarray

    def counts(self) -> np.ndarray:
        return self.ends - self.starts

    def as_dict(self) -> dict[int, int]:
        return {int(t): int(c) for t, c in zip(self.tokens, self.counts())}

    def find(self, token: int) -> int:
        """Position of `token` in self.tokens, or -1."""
        i = int(np.searchsorted(self.tokens, token))
        return i if i < len(self.tokens) and self.tokens[i] == token else -1


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id and the separator (= vocab_size) fit, else uint32."""
    return np.dtype(np.uint16) if vocab_size + 1 <= np.iinfo(np.uint16).max else np.dtype(np.uint32)


def concat_keys(keys: Sequence[Sequence[int]], sep: int, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """`SEP k1 SEP k2 ... SEP`, and the offset of each key's first token."""
    lengths = np.fromiter((len(k) for k in keys), dtype=np.int64, count=len(keys))
    starts = np.cumsum(np.concatenate([[1], lengths[:-1] + 1])) if len(keys) else np.zeros(0, np.int64)
    n = int(lengths.sum() + len(keys) + 1)
    text = np.full(n, sep, dtype=dtype)
    for s, k in zip(starts, keys):
        if len(k):
            arr = np.asarray(k, dtype=np.int64)
            if arr.min() < 0 or arr.max() >= sep:
                raise DataError(f"token id outside [0, {sep}) in a key: ids must be below the "
                                f"separator (vocab size).")
            text[s:s + len(k)] = arr
    return text, starts.astype(np.int64)


INT32_MAX = np.iinfo(np.int32).max


def suffix_array_dtype(n_tokens: int) -> np.dtype:
    """Width of the stored suffix array: int32 while every position (0 .. n-1) fits, int64
    for a text above 2^31 tokens (8 bytes per token instead of 4)."""
    return np.dtype(np.int32) if n_tokens - 1 <= INT32_MAX else np.dtype(np.int64)


def sorted_symbol_bytes(vocab_size: int) -> int:
    """Bytes per token in the byte string pydivsufsort actually sorts: it re-encodes token ids
    big-endian in the fewest power-of-two bytes that hold the largest id (here the separator,
    = vocab_size): 1, 2 or 4 (pydivsufsort/divsufsort.py, _minimize_dtype)."""
    n_bytes = (max(int(vocab_size), 1).bit_length() + 7) // 8
    return 1 << (n_bytes - 1).bit_length()


def build_suffix_dtype(n_tokens: int, vocab_size: int) -> np.dtype:
    """Width pydivsufsort sorts with: it switches to its 64-bit build when the *byte* string
    (n_tokens x sorted_symbol_bytes) passes 2^31 - 1, i.e. above ~1.07e9 tokens for a
    uint16 text, before the stored array (suffix_array_dtype) needs 64 bits."""
    return np.dtype(np.int32) if n_tokens * sorted_symbol_bytes(vocab_size) <= INT32_MAX \
        else np.dtype(np.int64)


def suffix_array(text: np.ndarray) -> np.ndarray:
    """The suffix array in the narrowest width that holds the text's positions (pydivsufsort
    may return int64 for texts that int32 holds; see build_suffix_dtype)."""
    if len(text) == 0:
        return np.zeros(0, dtype=np.int32)
    sa = divsufsort(np.ascontiguousarray(text))
    want = suffix_array_dtype(len(text))
    return sa if sa.dtype == want else sa.astype(want)


class SuffixIndex:
    """Prefix -> allowed next tokens (with counts) over a corpus of token-id keys."""

    def __init__(self, text: np.ndarray, sa: np.ndarray, key_starts: np.ndarray,
                 key_doc: np.ndarray, sep: int, meta: dict | None = None,
                 cache_size: int = 65536) -> None:
        if len(text) != len(sa):
            raise DataError(f"index text has {len(text)} tokens but its suffix array "
                            f"{len(sa)} rows: the cache is corrupt; delete it to rebuild.")
        self.text, self.sa, self.key_starts, self.key_doc = text, sa, key_starts, key_doc
        self.sep = int(sep)
        self.n = len(text)
        self.meta = meta or {}
        self._cache: OrderedDict[tuple[int, int, int], Children] = OrderedDict()
        self._cache_size = cache_size

    # -- construction -------------------------------------------------------------------
    @classmethod
    def build(cls, keys: Sequence[Sequence[int]], vocab_size: int,
              key_doc: Sequence[int] | None = None, meta: dict | None = None) -> SuffixIndex:
        """In-memory index; `key_doc[i]` is the document key i points to (default: i)."""
        sep = int(vocab_size)
        text, starts = concat_keys(keys, sep, token_dtype(vocab_size))
        docs = np.asarray(key_doc if key_doc is not None else np.arange(len(keys)), dtype=np.int64)
        if len(docs) != len(keys):
            raise DataError(f"{len(keys)} keys but {len(docs)} document ids.")
        return cls(text, suffix_array(text), starts, docs, sep, meta)

    def save(self, folder: Path) -> None:
        """Write atomically: a half-written folder is never mistaken for an index."""
        folder = Path(folder)
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in ("text", "sa", "key_starts", "key_doc"):
            np.save(tmp / f"{name}.npy", np.asarray(getattr(self, name)))
        meta = {**self.meta, "sep": self.sep, "n_tokens": self.n, "n_keys": len(self.key_starts),
                "format": FORMAT_VERSION, "bytes_per_token": self.bytes_per_token()}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)

    @classmethod
    def load(cls, folder: Path, mmap: bool = True) -> SuffixIndex:
        folder = Path(folder)
        meta_path = folder / "meta.json"
        if not meta_path.exists():
            raise DataError(f"{folder} is not a RICHES index (no meta.json); delete it to rebuild.")
        meta = json.loads(meta_path.read_text())
        mode = "r" if mmap else None
        arrays = {n: np.load(folder / f"{n}.npy", mmap_mode=mode)
                  for n in ("text", "sa", "key_starts", "key_doc")}
        return cls(arrays["text"], arrays["sa"], arrays["key_starts"], arrays["key_doc"],
                   meta["sep"], meta)

    def bytes_per_token(self) -> float:
        """Memory of the searched arrays (text + suffix array) per corpus token."""
        return (self.text.itemsize + self.sa.itemsize) if self.n else 0.0

    # -- queries ------------------------------------------------------------------------
    def root(self) -> Span:
        """The empty prefix: matches start anywhere inside a key."""
        return Span(0, self.n, 0)

    def key_start(self) -> Span:
        """The prefix [SEP]: matches start at the beginning of a key."""
        span = self.narrow(self.root(), self.sep)
        assert span is not None
        return span

    def _next_at(self, rows: np.ndarray, depth: int) -> np.ndarray:
        """Token at offset `depth` of the suffixes at suffix-array `rows` (-1 past the end)."""
        pos = np.asarray(self.sa[rows], dtype=np.int64) + depth
        out = np.full(pos.shape, -1, dtype=np.int64)
        ok = pos < self.n
        out[ok] = self.text[pos[ok]]
        return out

    def children(self, span: Span) -> Children:
        """Distinct next tokens of the span's prefix, with sub-spans (memoised)."""
        key = (span.lo, span.hi, span.depth)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        out = self._children(span)
        self._cache[key] = out
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return out

    def _children(self, span: Span) -> Children:
        lo, hi, d = span.lo, span.hi, span.depth
        if hi <= lo:
            empty = np.zeros(0, dtype=np.int64)
            return Children(empty, empty, empty)
        if hi - lo <= SCAN_ROWS:
            vals = self._next_at(np.arange(lo, hi), d)
            cut = np.flatnonzero(np.diff(vals)) + 1
            starts = np.concatenate([[0], cut]) + lo
            ends = np.concatenate([cut, [hi - lo]]) + lo
            toks = vals[starts - lo]
        else:
            toks, starts, ends = self._bisect_distinct(lo, hi, d)
        keep = toks >= 0  # drop the past-the-end marker
        return Children(toks[keep], starts[keep].astype(np.int64), ends[keep].astype(np.int64))

    def _bisect_distinct(self, lo: int, hi: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Change points of the sorted column text[SA[j] + d], j in [lo, hi), by splitting
        every segment whose two end values differ (all open segments per vectorised round):
        O(d log r) probes for d distinct values."""
        seg_lo = np.array([lo], dtype=np.int64)
        seg_hi = np.array([hi - 1], dtype=np.int64)  # inclusive
        v_lo = self._next_at(seg_lo, d)
        v_hi = self._next_at(seg_hi, d)
        cuts: list[np.ndarray] = []  # rows j where value(j) != value(j - 1)
        while len(seg_lo):
            differ = v_lo != v_hi
            seg_lo, seg_hi, v_lo, v_hi = seg_lo[differ], seg_hi[differ], v_lo[differ], v_hi[differ]
            adjacent = seg_hi - seg_lo == 1
            cuts.append(seg_hi[adjacent])
            seg_lo, seg_hi = seg_lo[~adjacent], seg_hi[~adjacent]
            v_lo, v_hi = v_lo[~adjacent], v_hi[~adjacent]
            if not len(seg_lo):
                break
            mid = (seg_lo + seg_hi) // 2
            v_mid = self._next_at(mid, d)
            seg_lo, seg_hi = np.concatenate([seg_lo, mid]), np.concatenate([mid, seg_hi])
            v_lo, v_hi = np.concatenate([v_lo, v_mid]), np.concatenate([v_mid, v_hi])
        cut = np.sort(np.concatenate(cuts)) if cuts else np.zeros(0, dtype=np.int64)
        starts = np.concatenate([[lo], cut])
        ends = np.concatenate([cut, [hi]])
        return self._next_at(starts, d), starts, ends

    def narrow(self, span: Span, token: int) -> Span | None:
        """The span of prefix + [token], or None when that prefix does not occur."""
        ch = self.children(span)
        i = ch.find(token)
        if i < 0:
            return None
        return Span(int(ch.starts[i]), int(ch.ends[i]), span.depth + 1)

    def find(self, prefix: Iterable[int], at_key_start: bool = False) -> Span | None:
        span: Span | None = self.key_start() if at_key_start else self.root()
        for t in prefix:
            if span is None:
                return None
            span = self.narrow(span, int(t))
        return span

    def allowed_next(self, prefix: Sequence[int], at_key_start: bool = False) -> dict[int, int]:
        """{token: count} of every token that continues `prefix` in the corpus. The separator
        (= vocab size) among them means a key may end after `prefix`."""
        span = self.find(prefix, at_key_start)
        return {} if span is None else self.children(span).as_dict()

    def count(self, prefix: Sequence[int], at_key_start: bool = False) -> int:
        span = self.find(prefix, at_key_start)
        return 0 if span is None else span.count

    def is_full_key(self, tokens: Sequence[int]) -> bool:
        """True when `tokens` is an entire key (SEP tokens SEP)."""
        return self.count([*tokens, self.sep], at_key_start=True) > 0

    def locate(self, span: Span, max_hits: int = 100) -> list[tuple[int, int, int]]:
        """Up to max_hits (key index, document index, token offset in the key) of a span's
        matches. Which hits are returned among more than max_hits is the suffix-array order."""
        rows = np.arange(span.lo, min(span.hi, span.lo + max_hits))
        pos = np.asarray(self.sa[rows], dtype=np.int64) + (1 if self._starts_with_sep(span) else 0)
        keys = np.searchsorted(self.key_starts, pos, side="right") - 1
        return [(int(k), int(self.key_doc[k]), int(p - self.key_starts[k]))
                for k, p in zip(keys, pos) if k >= 0]

    def _starts_with_sep(self, span: Span) -> bool:
        return span.depth > 0 and span.count > 0 and int(self.text[int(self.sa[span.lo])]) == self.sep

    def documents(self, tokens: Sequence[int], at_key_start: bool = False,
                  max_hits: int = 100) -> list[int]:
        """Distinct documents whose keys contain `tokens` (in first-hit order)."""
        span = self.find(tokens, at_key_start)
        if span is None or span.count == 0:
            return []
        seen: dict[int, None] = {}
        for _, doc, _ in self.locate(span, max_hits):
            seen.setdefault(doc, None)
        return list(seen)

    def key_tokens(self, key: int) -> np.ndarray:
        start = int(self.key_starts[key])
        end = int(self.key_starts[key + 1]) - 1 if key + 1 < len(self.key_starts) else self.n - 1
        return np.asarray(self.text[start:end], dtype=np.int64)


# -- cached construction ---------------------------------------------------------------
def keys_fingerprint(key_texts: Iterable[str], key_doc: Iterable[int], extra: dict) -> str:
    """Content hash of the keys, their documents and how they are tokenised."""
    h = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for text, doc in zip(key_texts, key_doc):
        h.update(f"{doc}\x1f{text}\x1e".encode())
    return h.hexdigest()[:16]


def build_or_load(key_texts: Sequence[str], key_doc: Sequence[int], tokenize, vocab_size: int,
                  fingerprint_extra: dict, cache_root: Path | None = None) -> SuffixIndex:
    """Load the cached index for these keys and this tokenizer, or build and cache it.
    `tokenize(list[str]) -> list[list[int]]` must be the decoding-time key tokenisation."""
    if len(key_texts) != len(key_doc):
        raise ConfigError(f"{len(key_texts)} keys but {len(key_doc)} document ids.")
    fp = keys_fingerprint(key_texts, key_doc, {**fingerprint_extra, "vocab": vocab_size,
                                                "format": FORMAT_VERSION})
    folder = Path(cache_root or cache_dir() / "riches" / "index") / fp
    if (folder / "meta.json").exists():
        log.info("Loading RICHES index %s", folder)
        return SuffixIndex.load(folder)
    log.info("Building RICHES index over %d keys (once; cached in %s)", len(key_texts), folder)
    ids = tokenize(list(key_texts))
    index = SuffixIndex.build(ids, vocab_size, key_doc, meta={**fingerprint_extra,
                                                            "fingerprint": fp})
    index.save(folder)
    log.info("Index: %d tokens, %d keys, %.1f bytes/token", index.n, len(key_texts),
             index.bytes_per_token())
    return SuffixIndex.load(folder)
