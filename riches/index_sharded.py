"""Several shard indexes (riches/index.py, `SuffixIndex`) queried as one.

The text `SEP k1 SEP ... SEP` is cut at separators into shards of at most
`riches.index_shard_tokens` tokens (riches/index_build.py), each with its own int32 suffix
array; consecutive shards share the separator at their boundary (it closes one shard and
opens the next), so no key crosses a shard and a shard is a valid index on its own.

- A span is a `ShardSpan`: one `Span` per shard (empty where the prefix does not occur), so
  narrowing stays one step per shard, never a search from scratch.
- `children` merges the shards' distinct next tokens and sums their counts.
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
        self.n = int(n_tokens)
        self.meta = meta or {}
        # global index of each shard's first key
        self.key_base = np.cumsum([0] + [len(s.key_starts) for s in self.shards[:-1]])
        self._cache: OrderedDict[tuple, MergedChildren] = OrderedDict()
        self._cache_size = cache_size
        self._wide: OrderedDict[tuple, MergedChildren] = OrderedDict()  # as SuffixIndex's

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
        key = span.key()
        memo, size = (self._wide, WIDE_CACHE) if span.count >= WIDE_ROWS \
            else (self._cache, self._cache_size)
        hit = memo.get(key)
        if hit is not None:
            memo.move_to_end(key)
            return hit
        out = self._merge([sh.children(sp) for sh, sp in zip(self.shards, span.spans)
                           if sp.count > 0], span)
        memo[key] = out
        if len(memo) > size:
            memo.popitem(last=False)
        return out

    def _merge(self, parts: list[Children], span: ShardSpan) -> MergedChildren:
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return MergedChildren(empty, empty)
        if len(parts) == 1:
            tokens, totals = parts[0].tokens, parts[0].counts()
        elif sum(len(p.tokens) for p in parts) > DENSE_MERGE:
            # many tokens: one dense count over the vocabulary beats sorting them
            dense = np.bincount(np.concatenate([p.tokens for p in parts]),
                                weights=np.concatenate([p.counts() for p in parts]),
                                minlength=self.sep + 1)
            tokens = np.flatnonzero(dense)
            totals = dense[tokens].astype(np.int64)
        else:
            tokens, inverse = np.unique(np.concatenate([p.tokens for p in parts]),
                                        return_inverse=True)
            totals = np.bincount(inverse, weights=np.concatenate([p.counts() for p in parts]),
                                 minlength=len(tokens)).astype(np.int64)
        if span.shared and len(tokens) and tokens[-1] == self.sep:
            totals = totals.copy()
            totals[-1] -= span.shared  # the boundary separators, seen from both sides
        return MergedChildren(tokens, totals)

    def narrow(self, span: ShardSpan, token: int) -> ShardSpan | None:
        """The spans of prefix + [token], or None when no shard holds that prefix."""
        depth = span.depth + 1
        out: list[Span] = []
        for sh, sp in zip(self.shards, span.spans):
            nxt = sh.narrow(sp, token) if sp.count > 0 else None
            out.append(nxt if nxt is not None else self._empty(depth))
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
