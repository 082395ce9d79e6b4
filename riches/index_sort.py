"""The suffix sort of a RICHES index text `SEP k1 SEP k2 ... SEP`, in bounded memory, written
straight into an int32 suffix array (a memory-mapped file for a real shard).

What is sorted: the *key-truncated* suffixes. A suffix is compared up to and including the
first separator after its first token (a suffix that starts at a separator keeps that one and
stops at the next), and ties are broken by position. Every query of riches/index.py stays
inside one key (a match never crosses a separator, `[SEP] + prefix` is a key start, SEP as a
next token means "a key may end here"), so it reads the same spans and the same sorted
next-token columns as under the full suffix order; only the order of identical truncated
suffixes differs (here: by position, which makes the array a pure function of the text).

Why not pydivsufsort (the previous builder): it sorts bytes, so a uint16 text is re-encoded
big-endian (2 bytes a token), sorted as 2n bytes and filtered back to the even positions:
about 22 bytes a token in int32, and its 64-bit build (about 38 bytes a token) from 2^31
*bytes*, i.e. 2^30 tokens, so a 2^31-token int32 shard is out of its reach (measured against
this sorter in benchmarks/riches_libraries.py; docs/performance.md).

How (an MSD radix sort that keys stay short makes cheap):
1. a counting sort of all positions by their first token, chunk by chunk, straight into the
   suffix array (the buckets are ranges of the output);
2. every bucket of at most `block` rows is finished in memory: its rows are sorted by the next
   `per_word` tokens packed into one uint64 (4 tokens of a 16-bit vocabulary), and only the
   groups still tied and not yet past their key's end are refined by the next word, ...;
3. a bucket above `block` rows is counting-sorted by its next token the same way (through a
   scratch array of the bucket's size) and its sub-buckets go to 2 or 3.
Memory: the text and the suffix array (both memory-mapped: 2 + 4 bytes a token of a uint16
text) plus about 100 bytes per row of one block (the budget: 2 bytes a token, at most 2 GiB) and 4
per row of the largest bucket that is counting-sorted.
"""
from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)

CHUNK = 1 << 22            # positions per counting-sort chunk (bounded scratch memory)
BYTES_PER_BLOCK_ROW = 100  # working arrays of the in-memory refinement per row (about 100
                           # measured at 1e7 tokens: positions, keys, orders, gathers)
MIN_BLOCK = 1 << 16


def block_rows(budget_bytes: int) -> int:
    """Rows finished in memory at once for a scratch budget (at least MIN_BLOCK)."""
    return max(MIN_BLOCK, int(budget_bytes) // BYTES_PER_BLOCK_ROW)


def _symbol_bits(sep: int) -> int:
    """Bits of one packed symbol: token id + 1 (0 = past the end of the text)."""
    return int(sep + 1).bit_length()


def _column(text: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """Token at `pos` + 1 (int64), 0 past the end of the text."""
    if not len(pos) or int(pos.max()) < n:  # the usual case: no mask, one gather
        return text[pos].astype(np.int64) + 1
    out = np.zeros(pos.shape, dtype=np.int64)
    ok = pos < n
    out[ok] = text[pos[ok]].astype(np.int64) + 1
    return out


def _small(values: np.ndarray, bound: int) -> np.ndarray:
    """`values` (all below `bound`) in uint16 when they fit: numpy's stable sort of 16-bit
    integers is a linear radix sort, of wider ones a merge sort."""
    return values.astype(np.uint16) if bound <= 1 << 16 else values


def _sort_within(key: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Stable order by (group, key): np.lexsort, with the group pass as a radix sort."""
    first = np.argsort(key, kind="stable")
    return first[np.argsort(_small(group[first], n_groups), kind="stable")]


def _pack(text: np.ndarray, pos: np.ndarray, depth: int, per_word: int, bits: int,
          sep: int) -> tuple[np.ndarray, np.ndarray]:
    """The next `per_word` symbols of each suffix at `pos` from offset `depth`, packed
    big-end-first into uint64, with every symbol after the key's closing separator zeroed (so
    suffixes that are equal up to it tie, and keep their position order); and whether the
    suffix ended inside this word (its separator at an offset >= 1, or the text's end)."""
    n = len(text)
    key = np.zeros(pos.shape, dtype=np.uint64)
    ended = np.zeros(pos.shape, dtype=bool)
    for j in range(per_word):
        off = depth + j
        sym = _column(text, pos + off, n)
        sym[ended] = 0
        key |= sym.astype(np.uint64) << np.uint64(bits * (per_word - 1 - j))
        ended |= sym == 0
        if off >= 1:
            ended |= sym == sep + 1
    return key, ended


def _ranges(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Concatenated [start, start + size) index ranges (int64)."""
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    step = np.ones(total, dtype=np.int64)
    heads = np.cumsum(sizes)[:-1]
    step[0] = starts[0]
    step[heads] = starts[1:] - (starts[:-1] + sizes[:-1] - 1)
    return np.cumsum(step)


def refine(text: np.ndarray, pos: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
           depth: int, sep: int) -> None:
    """Sort `pos` in place within each group pos[starts[i]:starts[i] + sizes[i]] (rows that
    share their first `depth` tokens, none of them past its key's end; in position order), by
    the rest of the truncated suffix, ties by position."""
    bits = _symbol_bits(sep)
    per_word = max(1, 64 // bits)
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    live = sizes > 1
    while live.any():
        starts, sizes = starts[live], sizes[live]
        idx = _ranges(starts, sizes)
        group = np.repeat(np.arange(len(starts), dtype=np.int64), sizes)
        p = pos[idx].astype(np.int64)
        key, ended = _pack(text, p, depth, per_word, bits, sep)
        order = _sort_within(key, group, len(starts))  # stable: ties keep position order
        p, key, ended = p[order], key[order], ended[order]
        pos[idx] = p
        cut = np.flatnonzero((group[1:] != group[:-1]) | (key[1:] != key[:-1])) + 1
        first = np.concatenate([[0], cut])
        sizes = np.diff(np.concatenate([first, [len(idx)]]))
        starts = idx[first]
        live = (sizes > 1) & ~ended[first]
        depth += per_word


def _counting_sort(text: np.ndarray, src: np.ndarray | None, lo: int, hi: int, depth: int,
                   dest: np.ndarray, n_symbols: int) -> np.ndarray:
    """Stable counting sort of the positions src[lo:hi] (or lo..hi-1 when src is None) by
    their symbol at offset `depth`, into dest[0:hi-lo]; returns the bucket bounds (length
    n_symbols + 1, relative to dest)."""
    n = len(text)

    def positions(a: int, b: int) -> np.ndarray:
        return np.arange(a, b, dtype=np.int64) if src is None else src[a:b].astype(np.int64)

    counts = np.zeros(n_symbols, dtype=np.int64)
    for a in range(lo, hi, CHUNK):
        b = min(a + CHUNK, hi)
        counts += np.bincount(_column(text, positions(a, b) + depth, n), minlength=n_symbols)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    cursor = bounds[:-1].copy()
    for a in range(lo, hi, CHUNK):
        b = min(a + CHUNK, hi)
        p = positions(a, b)
        sym = _column(text, p + depth, n)
        order = np.argsort(_small(sym, n_symbols), kind="stable")
        sym, p = sym[order], p[order]
        run = np.flatnonzero(np.concatenate([[True], sym[1:] != sym[:-1]]))
        rank = np.arange(len(sym), dtype=np.int64) - np.repeat(run, np.diff(np.append(run, len(sym))))
        dest[cursor[sym] + rank] = p
        cursor += np.bincount(sym, minlength=n_symbols)
    return bounds


def sort_suffixes(text: np.ndarray, sep: int, out: np.ndarray | None = None,
                  block: int | None = None) -> np.ndarray:
    """The int32 suffix array of `text` (SEP k1 SEP ... SEP, ids below sep) in key-truncated
    order; written into `out` (e.g. a writable np.memmap of len(text) int32) when given."""
    n = len(text)
    if n - 1 > np.iinfo(np.int32).max:
        raise ValueError(f"a shard of {n} tokens does not fit an int32 suffix array; "
                         f"split the text into shards of at most 2^31 - 1 tokens.")
    sa = out if out is not None else np.empty(n, dtype=np.int32)
    if n == 0:
        return sa
    block = block or block_rows(min(2 << 30, 2 * n))  # scratch: 2 bytes a token, <= 2 GiB
    n_symbols = int(sep) + 2
    bounds = _counting_sort(text, None, 0, n, 0, sa, n_symbols)
    # (lo, hi, depth): rows [lo, hi) share their first `depth` tokens, none past its key's
    # end; pushed in reverse so that they pop in row order and small neighbours batch up
    stack = [(int(bounds[v]), int(bounds[v + 1]), 1)
             for v in np.flatnonzero(np.diff(bounds) > 1)[::-1]]
    # buckets of one depth in row order, refined together; between them lie only rows that
    # are already in place (single rows, keys that ended)
    batch: list[tuple[int, int]] = []
    batch_depth = 1

    def flush() -> None:
        if batch:
            lo, hi = batch[0][0], batch[-1][1]
            rows = np.asarray(sa[lo:hi], dtype=np.int64)
            edges = np.array(batch, dtype=np.int64) - lo
            refine(text, rows, edges[:, 0], edges[:, 1] - edges[:, 0], batch_depth, sep)
            sa[lo:hi] = rows
            batch.clear()

    while stack:
        lo, hi, depth = stack.pop()
        if hi - lo <= block:
            if batch and (batch_depth != depth or hi - batch[0][0] > block):
                flush()
            batch.append((lo, hi))
            batch_depth = depth
            continue
        flush()
        scratch = np.empty(hi - lo, dtype=np.int32)
        sub = _counting_sort(text, sa, lo, hi, depth, scratch, n_symbols)
        sa[lo:hi] = scratch
        del scratch
        for v in np.flatnonzero(np.diff(sub) > 1)[::-1]:
            if v != 0 and not (v == sep + 1 and depth >= 1):  # else: the key ended here
                stack.append((lo + int(sub[v]), lo + int(sub[v + 1]), depth + 1))
    flush()
    return sa
