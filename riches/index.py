"""A corpus index over token ids: which tokens continue a prefix somewhere in the corpus.

The paper uses an FM-index (§3.2). This is the same query surface over an uncompressed
suffix array, which costs 6 bytes per token (uint16 text + int32 suffix array) and needs no
C++ build:

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
- The suffix array is sorted by riches/index_sort.py (key-truncated suffixes, int32, bounded
  memory). A corpus above `riches.index_shard_tokens` tokens is split at separators into
  shards of int32 suffix arrays, built one job per shard (riches/index_build.py) and queried
  as one index (riches/index_sharded.py, `ShardedIndex`: the same methods).
- Arrays are memory-mapped, so an index larger than RAM is searchable;
  `riches.index_build.build_or_load` caches them under cache_dir()/riches/index/<hash>/.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragrepro.errors import DataError
from ragrepro.io import private_tmp, publish_dir

from .index_sort import sort_suffixes

log = logging.getLogger(__name__)

# Below this many rows a span is scanned directly (one vectorised gather): constant work,
# and faster than bisection for small spans.
SCAN_ROWS = 2048
# Spans of at least this many rows are memoised apart (WIDE_CACHE entries, never pushed out by
# narrow ones): there are few of them (at most n / WIDE_ROWS per prefix length), every question
# meets the same ones near a key's start, and listing one costs milliseconds.
WIDE_ROWS = 65536
WIDE_CACHE = 4096
FORMAT_VERSION = 2  # 2: key-truncated int32 sort, cached as raw token file + shards


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


def suffix_array(text: np.ndarray, sep: int) -> np.ndarray:
    """The int32 suffix array of an in-memory text (riches/index_sort.py)."""
    if len(text) - 1 > INT32_MAX:
        raise DataError(f"a text of {len(text)} tokens does not fit one int32 suffix array: "
                        f"build it in shards (riches.index_build, riches.index_shard_tokens).")
    return sort_suffixes(np.ascontiguousarray(text), sep)


class CorpusIndex(Protocol):
    """What riches/constraint.py and riches/decoding.py ask of an index: a `SuffixIndex` or a
    `ShardedIndex` (riches/index_sharded.py); spans are opaque per-beam states."""

    sep: int
    n: int

    def root(self) -> Any: ...
    def key_start(self) -> Any: ...
    def children(self, span: Any) -> Any: ...
    def narrow(self, span: Any, token: int) -> Any: ...
    def find(self, prefix: Iterable[int], at_key_start: bool = False) -> Any: ...
    def allowed_next(self, prefix: Sequence[int], at_key_start: bool = False) -> dict[int, int]: ...
    def count(self, prefix: Sequence[int], at_key_start: bool = False) -> int: ...
    def is_full_key(self, tokens: Sequence[int]) -> bool: ...
    def locate(self, span: Any, max_hits: int = 100) -> list[tuple[int, int, int]]: ...
    def documents(self, tokens: Sequence[int], at_key_start: bool = False,
                  max_hits: int = 100) -> list[int]: ...
    def key_tokens(self, key: int) -> np.ndarray: ...
    def bytes_per_token(self) -> float: ...


class PrefixQueries:
    """The queries every index answers the same way from root/key_start/narrow/children/
    locate (shared by SuffixIndex and ShardedIndex)."""

    sep: int

    def find(self, prefix: Iterable[int], at_key_start: bool = False) -> Any:
        """The span of `prefix` (from a key start when at_key_start), or None."""
        span = self.key_start() if at_key_start else self.root()  # type: ignore[attr-defined]
        for t in prefix:
            if span is None:
                return None
            span = self.narrow(span, int(t))  # type: ignore[attr-defined]
        return span

    def allowed_next(self, prefix: Sequence[int], at_key_start: bool = False) -> dict[int, int]:
        """{token: count} of every token that continues `prefix` in the corpus. The separator
        (= vocab size) among them means a key may end after `prefix`."""
        span = self.find(prefix, at_key_start)
        return {} if span is None else self.children(span).as_dict()  # type: ignore[attr-defined]

    def count(self, prefix: Sequence[int], at_key_start: bool = False) -> int:
        span = self.find(prefix, at_key_start)
        return 0 if span is None else span.count

    def is_full_key(self, tokens: Sequence[int]) -> bool:
        """True when `tokens` is an entire key (SEP tokens SEP)."""
        return self.count([*tokens, self.sep], at_key_start=True) > 0

    def documents(self, tokens: Sequence[int], at_key_start: bool = False,
                  max_hits: int = 100) -> list[int]:
        """Distinct documents whose keys contain `tokens` (in first-hit order)."""
        span = self.find(tokens, at_key_start)
        if span is None or span.count == 0:
            return []
        seen: dict[int, None] = {}
        for _, doc, _ in self.locate(span, max_hits):  # type: ignore[attr-defined]
            seen.setdefault(doc, None)
        return list(seen)


class SuffixIndex(PrefixQueries):
    """Prefix -> allowed next tokens (with counts) over a corpus of token-id keys.

    A shard of a larger text: `text` is its slice, `key_starts` its keys' offsets in the
    whole text (a memory-mapped slice, not a copy) and `text_base` the slice's offset there.
    """

    def __init__(self, text: np.ndarray, sa: np.ndarray, key_starts: np.ndarray,
                 key_doc: np.ndarray, sep: int, meta: dict | None = None,
                 cache_size: int = 65536, text_base: int = 0) -> None:
        if len(text) != len(sa):
            raise DataError(f"index text has {len(text)} tokens but its suffix array "
                            f"{len(sa)} rows: the cache is corrupt; delete it to rebuild.")
        # a memory-mapped array stays mapped as a plain ndarray view: np.memmap's own
        # indexing costs ~10 us a call, a third of a decoding step's lookups
        self.mapped = isinstance(sa, np.memmap)
        plain = lambda a: a.view(np.ndarray) if isinstance(a, np.memmap) else a
        self.text, self.sa = plain(text), plain(sa)
        self.key_starts, self.key_doc = plain(key_starts), plain(key_doc)
        self.text_base = int(text_base)
        self.sep = int(sep)
        self.n = len(text)
        self.meta = meta or {}
        self._cache: OrderedDict[tuple[int, int, int], Children] = OrderedDict()
        self._cache_size = cache_size
        self._wide: OrderedDict[tuple[int, int, int], Children] = OrderedDict()

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
        return cls(text, suffix_array(text, sep), starts, docs, sep, meta)

    def save(self, folder: Path) -> None:
        """Write atomically: a half-written folder is never mistaken for an index."""
        folder = Path(folder)
        tmp = private_tmp(folder)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self.text_base:
            raise ValueError("save() writes a whole index; a shard lives in its build folder.")
        for name in ("text", "sa", "key_starts", "key_doc"):
            np.save(tmp / f"{name}.npy", np.asarray(getattr(self, name)))
        meta = {**self.meta, "sep": self.sep, "n_tokens": self.n, "n_keys": len(self.key_starts),
                "format": FORMAT_VERSION, "bytes_per_token": self.bytes_per_token()}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        publish_dir(tmp, folder)

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

    def _next_at(self, rows: np.ndarray | slice, depth: int) -> np.ndarray:
        """Token at offset `depth` of the suffixes at suffix-array `rows` (an index array or a
        slice; -1 past the end)."""
        pos = np.asarray(self.sa[rows], dtype=np.int64) + depth
        if not pos.size or int(pos.max()) < self.n:  # the usual case: one gather, no mask
            return self.text[pos].astype(np.int64)
        out = np.full(pos.shape, -1, dtype=np.int64)
        ok = pos < self.n
        out[ok] = self.text[pos[ok]]
        return out

    def children(self, span: Span) -> Children:
        """Distinct next tokens of the span's prefix, with sub-spans (memoised)."""
        key = (span.lo, span.hi, span.depth)
        memo, size = (self._wide, WIDE_CACHE) if span.hi - span.lo >= WIDE_ROWS \
            else (self._cache, self._cache_size)
        hit = memo.get(key)
        if hit is not None:
            memo.move_to_end(key)
            return hit
        out = self._children(span)
        memo[key] = out
        if len(memo) > size:
            memo.popitem(last=False)
        return out

    def _children(self, span: Span) -> Children:
        lo, hi, d = span.lo, span.hi, span.depth
        if hi <= lo:
            empty = np.zeros(0, dtype=np.int64)
            return Children(empty, empty, empty)
        if hi - lo <= SCAN_ROWS:
            vals = self._next_at(slice(lo, hi), d)  # a slice: no index array to build
            heads = np.flatnonzero(np.concatenate(([True], vals[1:] != vals[:-1])))
            toks = vals[heads]
            starts = heads + lo
            ends = np.append(heads[1:], hi - lo) + lo
        else:
            toks, starts, ends = self._bisect_distinct(lo, hi, d)
        if len(toks) and toks[0] < 0:  # the past-the-end marker sorts first: drop it
            toks, starts, ends = toks[1:], starts[1:], ends[1:]
        return Children(toks, starts.astype(np.int64), ends.astype(np.int64))

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

    def locate(self, span: Span, max_hits: int = 100) -> list[tuple[int, int, int]]:
        """Up to max_hits (key index, document index, token offset in the key) of a span's
        matches. Which hits are returned among more than max_hits is the suffix-array order."""
        rows = np.arange(span.lo, min(span.hi, span.lo + max_hits))
        pos = np.asarray(self.sa[rows], dtype=np.int64) + (1 if self._starts_with_sep(span) else 0)
        pos += self.text_base
        keys = np.searchsorted(self.key_starts, pos, side="right") - 1
        return [(int(k), int(self.key_doc[k]), int(p - self.key_starts[k]))
                for k, p in zip(keys, pos) if k >= 0]

    def _starts_with_sep(self, span: Span) -> bool:
        return span.depth > 0 and span.count > 0 and int(self.text[int(self.sa[span.lo])]) == self.sep

    def key_tokens(self, key: int) -> np.ndarray:
        start = int(self.key_starts[key]) - self.text_base
        end = int(self.key_starts[key + 1]) - 1 - self.text_base \
            if key + 1 < len(self.key_starts) else self.n - 1
        return np.asarray(self.text[start:end], dtype=np.int64)


# -- the cache key ----------------------------------------------------------------------
def keys_fingerprint(key_texts: Iterable[str], key_doc: Iterable[int], extra: dict) -> str:
    """Content hash of the keys, their documents and how they are tokenised."""
    h = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for text, doc in zip(key_texts, key_doc):
        h.update(f"{doc}\x1f{text}\x1e".encode())
    return h.hexdigest()[:16]
