"""The suffix-array index against brute-force search on random corpora."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from riches import index as index_mod
from riches import index_build
from riches.index import SuffixIndex, concat_keys, token_dtype


def brute_next(keys: list[list[int]], prefix: list[int], at_start: bool, sep: int) -> dict[int, int]:
    """Every occurrence of prefix inside a key (or at its start), and what follows it."""
    out: Counter[int] = Counter()
    m = len(prefix)
    for k in keys:
        starts = [0] if at_start else range(len(k) + 1)
        for s in starts:
            if s + m <= len(k) and k[s:s + m] == prefix:
                out[k[s + m] if s + m < len(k) else sep] += 1
    return dict(out)


def random_keys(rng: np.random.Generator, n_keys: int, vocab: int, max_len: int) -> list[list[int]]:
    # A skewed distribution makes repeated prefixes (large spans) common.
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    return [list(rng.choice(vocab, size=rng.integers(1, max_len), p=p)) for _ in range(n_keys)]


@pytest.mark.parametrize("scan_rows", [2048, 1])  # 1 forces the bisection path everywhere
@pytest.mark.parametrize("seed,vocab", [(0, 5), (1, 40), (2, 70000)])
def test_allowed_next_matches_brute_force(seed: int, vocab: int, scan_rows: int, monkeypatch) -> None:
    monkeypatch.setattr(index_mod, "SCAN_ROWS", scan_rows)
    rng = np.random.default_rng(seed)
    keys = [[int(t) for t in k] for k in random_keys(rng, 60, vocab, 25)]
    idx = SuffixIndex.build(keys, vocab)
    assert idx.text.dtype == token_dtype(vocab)
    prefixes: list[list[int]] = [[]]
    for _ in range(300):  # substrings of keys (present) and random sequences (mostly absent)
        k = keys[rng.integers(len(keys))]
        s = int(rng.integers(0, len(k)))
        prefixes.append(k[s:s + int(rng.integers(1, 6))])
        prefixes.append([int(x) for x in rng.integers(0, vocab, size=int(rng.integers(1, 4)))])
    for prefix in prefixes:
        for at_start in (False, True):
            got = idx.allowed_next(prefix, at_start)
            want = brute_next(keys, prefix, at_start, vocab)
            if not prefix and not at_start:  # "an empty key ends here" is meaningless
                got.pop(vocab), want.pop(vocab)
            assert got == want, prefix


def test_incremental_narrowing_equals_fresh_search() -> None:
    rng = np.random.default_rng(3)
    keys = [[int(t) for t in k] for k in random_keys(rng, 100, 30, 30)]
    idx = SuffixIndex.build(keys, 30)
    for k in keys[:20]:
        span = idx.root()
        for i, t in enumerate(k):
            span = idx.narrow(span, t)
            assert span is not None
            assert span == idx.find(k[:i + 1])
            assert span.count == sum(
                1 for kk in keys for s in range(len(kk)) if kk[s:s + i + 1] == k[:i + 1])


def test_separator_blocks_cross_key_matches_and_locates_documents() -> None:
    keys = [[1, 2, 3], [3, 4], [2, 3, 4]]
    idx = SuffixIndex.build(keys, vocab_size=10, key_doc=[7, 8, 9])
    text, starts = concat_keys(keys, 10, np.dtype(np.uint16))
    assert text.tolist() == [10, 1, 2, 3, 10, 3, 4, 10, 2, 3, 4, 10]
    assert starts.tolist() == [1, 5, 8]
    assert idx.count([3, 3]) == 0  # "3 | 3" spans keys 0 and 1
    assert idx.count([2, 3, 4]) == 1
    assert idx.allowed_next([2, 3]) == {10: 1, 4: 1}  # key 0 ends after 2 3; key 2 goes on
    assert sorted(idx.documents([3])) == [7, 8, 9]
    assert idx.documents([3, 4], at_key_start=True) == [8]
    assert sorted(idx.locate(idx.find([3, 4]))) == [(1, 8, 0), (2, 9, 1)]
    assert idx.is_full_key([3, 4]) and not idx.is_full_key([3]) and not idx.is_full_key([2, 3])
    assert idx.key_tokens(2).tolist() == [2, 3, 4]


def test_save_load_mmap_roundtrip(tmp_path) -> None:
    keys = [[5, 6, 7], [6, 7, 8, 9]]
    idx = SuffixIndex.build(keys, vocab_size=100)
    idx.save(tmp_path / "ix")
    loaded = SuffixIndex.load(tmp_path / "ix")
    assert loaded.mapped and not loaded.sa.flags.owndata  # searched where it lies on disk
    assert loaded.allowed_next([6, 7]) == {8: 1, 100: 1}
    assert loaded.bytes_per_token() == 6  # uint16 text + int32 suffix array
    assert SuffixIndex.build([[70000]], vocab_size=70001).bytes_per_token() == 8


def test_build_or_load_caches_by_content(tmp_path) -> None:
    calls = []

    def tok(texts):
        calls.append(len(texts))
        return [[ord(c) for c in t] for t in texts]

    a = index_build.build_or_load(["ab", "bc"], [0, 1], tok, 256, {"t": "chars"}, tmp_path)
    b = index_build.build_or_load(["ab", "bc"], [0, 1], tok, 256, {"t": "chars"}, tmp_path)
    c = index_build.build_or_load(["ab", "bd"], [0, 1], tok, 256, {"t": "chars"}, tmp_path)
    assert calls == [2, 2]  # the second call loaded from the cache
    assert a.meta["fingerprint"] == b.meta["fingerprint"] != c.meta["fingerprint"]
    assert b.allowed_next([ord("b")]) == {ord("c"): 1, 256: 1}
