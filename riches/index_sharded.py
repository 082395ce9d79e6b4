"""Several shard indexes (riches/index.py, `SuffixIndex`) queried as one.

The text `SEP k1 SEP ... SEP` is cut at separators into shards of at most
`riches.index_shard_tokens` tokens (riches/index_build.py), each with its own int32 suffix
array; consecutive shards share the separator at their boundary (it closes one shard and
opens the next), so no key crosses a shard and a shard is a valid index on its own.

- A span is a `ShardSpan`: one `Span` per shard (empty where the prefix does not occur), so
  narrowing stays one step per shard, never a search from scratch.
- `children` merges the shards' distinct next tokens and sums their counts. Both it and
  `narrow` read one memo entry per span, `ShardChildren`: every shard's (token, rows) stacked,
  with the spans of up to STACK_SCAN_ROWS rows scanned in one run-length pass over all shards
  and only wider ones bisected shard by shard. A beam step makes one such entry per
  hypothesis, not one children call per shard (10 views of a 3e8-token shard, old and new
  code interleaved at one load: 25-35% less time a hypothesis, the median beam step 3.1 ms ->
  1.9 ms; results/bench/riches_shards.md). Wide spans (>= WIDE_ROWS rows in all) are
  memoised apart, as in SuffixIndex; an entry costs 16 bytes per (token, shard) pair.
- The shared boundary separators are the only tokens stored twice. Only the empty prefix and
  the bare key start `[SEP]` see both copies: `root()` subtracts them from its count and from
  its separator child, and narrowing the root by SEP drops each non-last shard's closing
  separator (the first row of its `[SEP]` span: a bare separator sorts first). Every other
  count, child and located key is that of the unsharded index.
- `locate` returns (global key index, document, offset), shard by shard.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragrepro.errors import DataError

from .index import WIDE_CACHE, WIDE_ROWS, Children, PrefixQueries, Span, SuffixIndex

DENSE_MERGE = 2048  # merged children above this many (token, shard) pairs: a dense count
# A shard's span of at most this many rows is scanned (one contiguous read of its suffix-array
# rows and one gather of their next tokens), a wider one bisected (riches/index.py). Scanning
# wins far above SuffixIndex's SCAN_ROWS here: the scans of all shards share one run-length
# pass, while each bisection pays ~20 rounds of numpy calls. Measured on 10 views of a 3e8-token
# shard (benchmarks/riches_shards.py), ms per hypothesis per beam step at 2,048 / 32,768 /
# 131,072 / 524,288 rows: 1.13-1.64 / 0.93-1.04 / 0.86-1.01 / 0.91-0.96.
STACK_SCAN_ROWS = 131072


@dataclass(frozen=True)
class ShardSpan:
    """Per-shard spans of one prefix; `shared` boundary separators counted twice in them."""

    spans: tuple[Span, ...]
    depth: int
    shared: int = 0

    @property
    def count(self) -> int:
        return sum(s.count for s in self.spans) - self.shared

    def key(self) -> tuple:
        return (self.depth, self.shared, *((s.lo, s.hi) for s in self.spans))


@dataclass(frozen=True)
class MergedChildren:
    """Distinct next tokens of a prefix over all shards (sorted) and their summed counts."""

    tokens: np.ndarray
    totals: np.ndarray

    def counts(self) -> np.ndarray:
        return self.totals

    def as_dict(self) -> dict[int, int]:
        return {int(t): int(c) for t, c in zip(self.tokens, self.totals)}

    def find(self, token: int) -> int:
        """Position of `token` in self.tokens, or -1."""
        i = int(np.searchsorted(self.tokens, token))
        return i if i < len(self.tokens) and self.tokens[i] == token else -1


@dataclass
class ShardChildren:
    """Every shard's distinct next tokens of one prefix, stacked: entry j is token `tokens[j]`
    at rows [starts[j], ends[j]) of shard `shard[j]`'s suffix array. One memo entry answers
    both `children` (merged lazily, once) and `narrow` (one vectorised match of the token), so
    a beam step touches no per-shard memo. Neither needs the shards in order."""

    shard: np.ndarray   # int32 shard number; each shard's entries are contiguous
    tokens: np.ndarray  # int32, ascending within a shard
    starts: np.ndarray  # int32 (a shard has < 2^31 rows)
    ends: np.ndarray
    merged: MergedChildren | None = None

    @classmethod
    def compact(cls, shard: np.ndarray, tokens: np.ndarray, starts: np.ndarray,
                ends: np.ndarray) -> ShardChildren:
        """Stored in int32 (16 bytes an entry, not 32): the wide memo keeps the key start's
        children, every token in every shard."""
        i32 = lambda a: a.astype(np.int32, copy=False)
        return cls(i32(shard), i32(tokens), i32(starts), i32(ends))


class ShardedIndex(PrefixQueries):
    """The SuffixIndex query surface over shards (riches/constraint.py, riches/decoding.py)."""

    def __init__(self, shards: Sequence[SuffixIndex], n_tokens: int, meta: dict | None = None,
                 cache_size: int = 65536) -> None:
        if not shards:
            raise DataError("a sharded RICHES index needs at least one shard; delete the "
                            "index folder to rebuild it.")
        seps = {s.sep for s in shards}
        if len(seps) != 1:
            raise DataError(f"shards disagree on the separator ({sorted(seps)}): the index "
                            f"folder mixes builds; delete it to rebuild.")
        self.shards = list(shards)
        self.sep = seps.pop()
        if self.sep > np.iinfo(np.int32).max:  # ShardChildren stores tokens in int32
            raise DataError(f"a separator of {self.sep} does not fit int32: a vocabulary this "
                            f"large needs one unsharded index (raise riches.index_shard_tokens).")
        self.n = int(n_tokens)
        self.meta = meta or {}
        # global index of each shard's first key
        self.key_base = np.cumsum([0] + [len(s.key_starts) for s in self.shards[:-1]])
        self._cache: OrderedDict[tuple, ShardChildren] = OrderedDict()
        self._cache_size = cache_size
        self._wide: OrderedDict[tuple, ShardChildren] = OrderedDict()  # as SuffixIndex's

    def bytes_per_token(self) -> float:
        return self.shards[0].bytes_per_token()

    def _empty(self, depth: int) -> Span:
        return Span(0, 0, depth)

    def root(self) -> ShardSpan:
        return ShardSpan(tuple(s.root() for s in self.shards), 0, len(self.shards) - 1)

    def key_start(self) -> ShardSpan:
        span = self.narrow(self.root(), self.sep)
        assert span is not None
        return span

    def children(self, span: ShardSpan) -> MergedChildren:
        """Distinct next tokens over all shards with summed counts (memoised)."""
        parts = self._parts(span)
        if parts.merged is None:
            parts.merged = self._merge(parts, span)
        return parts.merged

    def _parts(self, span: ShardSpan) -> ShardChildren:
        """The per-shard children of a span, memoised by the whole span (wide spans apart, by
        their total count, as SuffixIndex does per shard)."""
        key = span.key()
        memo, size = (self._wide, WIDE_CACHE) if span.count >= WIDE_ROWS \
            else (self._cache, self._cache_size)
        hit = memo.get(key)
        if hit is not None:
            memo.move_to_end(key)
            return hit
        out = self._stack(span)
        memo[key] = out
        if len(memo) > size:
            memo.popitem(last=False)
        return out

    def _stack(self, span: ShardSpan) -> ShardChildren:
        """Spans of at most STACK_SCAN_ROWS rows are scanned together (one gather per shard,
        then one run-length pass over all of them: the per-call overhead of a shard, not its
        rows, dominated the beam step); wider ones are bisected by their shard."""
        scan_rows = STACK_SCAN_ROWS
        vals: list[np.ndarray] = []    # next token of every row of the scanned spans
        scanned: list[int] = []        # their shard numbers
        pieces: list[tuple[int, Children | ShardChildren]] = []  # (shard or -1: scanned)
        for i, (sh, sp) in enumerate(zip(self.shards, span.spans)):
            if sp.count <= 0:
                continue
            if sp.count <= scan_rows:
                vals.append(self._column(sh, sp))
                scanned.append(i)
            else:
                pieces.append((i, sh._children(sp)))
        if vals:
            pieces.append((-1, self._runs(vals, scanned, span)))
        if not pieces:
            empty = np.zeros(0, dtype=np.int32)
            return ShardChildren(empty, empty, empty, empty)
        shard = np.concatenate([p.shard if isinstance(p, ShardChildren)
                                else np.full(len(p.tokens), i, dtype=np.int32) for i, p in pieces])
        tokens = np.concatenate([p.tokens for _, p in pieces])
        starts = np.concatenate([p.starts for _, p in pieces])
        ends = np.concatenate([p.ends for _, p in pieces])
        return ShardChildren.compact(shard, tokens, starts, ends)

    @staticmethod
    def _column(sh: SuffixIndex, sp: Span) -> np.ndarray:
        """The next token of every row of a span, in the text's own dtype (half the bytes of
        SuffixIndex._next_at's int64 through the run-length pass); int64 with -1 for a suffix
        that ends there, which only the [SEP] span's last row (a shard's closing separator)
        does."""
        pos = sh.sa[sp.lo:sp.hi] + np.int32(sp.depth)  # int32: a shard has < 2^31 tokens
        if int(pos.max()) < sh.n:
            return sh.text[pos]
        return sh._next_at(slice(sp.lo, sp.hi), sp.depth)

    @staticmethod
    def _runs(vals: list[np.ndarray], scanned: list[int], span: ShardSpan) -> ShardChildren:
        """Run-length encoding of the concatenated sorted columns of the scanned spans: a run
        starts where the value changes or a shard's span begins."""
        lens = np.fromiter((len(v) for v in vals), dtype=np.int64, count=len(vals))
        offs = np.zeros(len(vals), dtype=np.int64)
        np.cumsum(lens[:-1], out=offs[1:])
        col = np.concatenate(vals) if len(vals) > 1 else vals[0]
        head = np.empty(len(col), dtype=bool)
        head[0] = True
        np.not_equal(col[1:], col[:-1], out=head[1:])
        head[offs] = True
        heads = np.flatnonzero(head)
        seg = np.searchsorted(offs, heads, side="right") - 1
        lo = np.fromiter((span.spans[i].lo for i in scanned), dtype=np.int64,
                         count=len(scanned))
        shift = lo[seg] - offs[seg]
        starts = heads + shift
        ends = np.append(heads[1:], len(col)) + shift
        tokens = col[heads].astype(np.int64)
        shard = np.asarray(scanned, dtype=np.int32)[seg]
        keep = tokens >= 0  # -1: the suffix ended (past the end of its shard)
        if not keep.all():
            shard, tokens, starts, ends = shard[keep], tokens[keep], starts[keep], ends[keep]
        return ShardChildren(shard, tokens, starts, ends)

    def _merge(self, parts: ShardChildren, span: ShardSpan) -> MergedChildren:
        if not len(parts.tokens):
            empty = np.zeros(0, dtype=np.int64)
            return MergedChildren(empty, empty)
        counts = (parts.ends - parts.starts).astype(np.int64)
        if parts.shard[0] == parts.shard[-1]:  # one shard (contiguous): distinct and sorted
            tokens, totals = parts.tokens.astype(np.int64), counts
        elif len(parts.tokens) > DENSE_MERGE:
            # many tokens: one dense count over the vocabulary beats sorting them
            dense = np.bincount(parts.tokens, weights=counts, minlength=self.sep + 1)
            tokens = np.flatnonzero(dense)
            totals = dense[tokens].astype(np.int64)
        else:
            tokens, inverse = np.unique(parts.tokens.astype(np.int64), return_inverse=True)
            totals = np.bincount(inverse, weights=counts, minlength=len(tokens)).astype(np.int64)
        if span.shared and len(tokens) and tokens[-1] == self.sep:
            totals = totals.copy()
            totals[-1] -= span.shared  # the boundary separators, seen from both sides
        return MergedChildren(tokens, totals)

    def narrow(self, span: ShardSpan, token: int) -> ShardSpan | None:
        """The spans of prefix + [token], or None when no shard holds that prefix."""
        depth = span.depth + 1
        parts = self._parts(span)
        hit = np.flatnonzero(parts.tokens == token)
        if not len(hit):
            return None
        empty = self._empty(depth)
        out = [empty] * len(self.shards)
        for i, lo, hi in zip(parts.shard[hit].tolist(), parts.starts[hit].tolist(),
                             parts.ends[hit].tolist()):
            out[i] = Span(lo, hi, depth)
        if span.depth == 0 and token == self.sep:
            # a non-last shard ends in the next shard's opening separator: its bare [SEP]
            # suffix (the first row of its [SEP] span) belongs to the next shard
            out = [Span(s.lo + 1, s.hi, depth) if i < len(out) - 1 and s.count > 0 else s
                   for i, s in enumerate(out)]
        if not any(s.count > 0 for s in out):
            return None
        return ShardSpan(tuple(out), depth)

    def locate(self, span: ShardSpan, max_hits: int = 100) -> list[tuple[int, int, int]]:
        """Up to max_hits (global key index, document, token offset in the key), shard by
        shard, each in its suffix-array order."""
        hits: list[tuple[int, int, int]] = []
        for base, sh, sp in zip(self.key_base, self.shards, span.spans):
            if len(hits) >= max_hits:
                break
            if sp.count > 0:
                hits += [(int(base) + k, d, o) for k, d, o in sh.locate(sp, max_hits - len(hits))]
        return hits

    def key_tokens(self, key: int) -> np.ndarray:
        i = int(np.searchsorted(self.key_base, key, side="right")) - 1
        return self.shards[i].key_tokens(key - int(self.key_base[i]))
