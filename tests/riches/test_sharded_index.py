"""The RICHES index in shards (riches/index_sort.py, index_build.py, index_sharded.py): the
bounded-memory sort against a brute-force sort, a corpus cut into 2, 3 and 7 shards against
the one-shard index, streaming tokenisation, resumable shard jobs, and the constrained beam
with 1 and 3 shards."""
from __future__ import annotations

import json

import numpy as np
import pytest
from riches_fakes import ID, SPEC, WORDS, BigramModel, V, decode, ids

from ragrepro.errors import ConfigError, DataError
from riches import index_build as ib
from riches import index_sharded as ish
from riches import index_sort
from riches.beam import BeamConfig, beam_search
from riches.constraint import KeyConstraint, marker_lookalike_ids, word_start_ids
from riches.index import SuffixIndex, concat_keys
from riches.index_sharded import ShardedIndex


def truncated(text: np.ndarray, sep: int, p: int) -> list[int]:
    """Suffix p up to and including the first separator after its first token."""
    out = []
    for q in range(p, len(text)):
        out.append(int(text[q]))
        if q > p and text[q] == sep:
            break
    return out


def brute_sort(text: np.ndarray, sep: int) -> list[int]:
    # a shorter truncated suffix that is a prefix of another sorts first (list order)
    return sorted(range(len(text)), key=lambda p: (truncated(text, sep, p), p))


def random_keys(rng: np.random.Generator, n: int, vocab: int, max_len: int) -> list[list[int]]:
    p = 1.0 / np.arange(1, vocab + 1)  # skewed: long shared prefixes, wide spans
    keys = [[int(t) for t in rng.choice(vocab, size=int(rng.integers(0, max_len)), p=p / p.sum())]
            for _ in range(n)]
    return keys + [keys[int(i)] for i in rng.integers(0, n, size=n // 3)]  # repeats, far apart


@pytest.mark.parametrize("vocab", [3, 9, 70_000])  # 70k: uint32 text, 3 symbols a packed word
@pytest.mark.parametrize("block", [None, 1, 4])    # 1 and 4: counting-sort every bucket deeper
def test_sort_is_the_key_truncated_suffix_order(vocab: int, block: int | None) -> None:
    rng = np.random.default_rng(vocab)
    for _ in range(25):
        keys = random_keys(rng, int(rng.integers(0, 10)), min(vocab, 4), 16)  # ties past a word
        if vocab == 70_000:
            keys = [[t * 11_000 for t in k] for k in keys]
        text, _ = concat_keys(keys, vocab, np.dtype(np.uint32 if vocab > 65_000 else np.uint16))
        sa = index_sort.sort_suffixes(text, vocab, block=block)
        assert sa.dtype == np.int32 and sa.tolist() == brute_sort(text, vocab)


def test_sort_by_hand() -> None:
    # SEP=3: text 3 1 2 3 1 3 ; truncated suffixes: 0:[3 1 2 3] 1:[1 2 3] 2:[2 3] 3:[3 1 3]
    # 4:[1 3] 5:[3]; sorted: [1 2 3] < [1 3] < [2 3] < [3] < [3 1 2 3] < [3 1 3]
    text = np.array([3, 1, 2, 3, 1, 3], dtype=np.uint16)
    assert index_sort.sort_suffixes(text, 3).tolist() == [1, 4, 2, 5, 0, 3]


def test_a_shard_above_int32_is_refused() -> None:
    class Huge:
        def __len__(self) -> int:
            return 2**31 + 1

    with pytest.raises(ValueError, match="2\\^31 - 1"):
        index_sort.sort_suffixes(Huge(), 10)  # type: ignore[arg-type]


# -- shards against one index ------------------------------------------------------------------
def as_texts(keys: list[list[int]]) -> list[str]:
    return [" ".join(map(str, k)) for k in keys]


def tokenize(texts: list[str]) -> list[list[int]]:
    return [[int(t) for t in s.split()] for s in texts]


def sharded(tmp_path, keys: list[list[int]], vocab: int, n: int) -> ShardedIndex:
    """The keys built into exactly n shards (the smallest shard size that gives n)."""
    folder = tmp_path / f"ix{n}"
    folder.mkdir()
    record = ib.write_tokens(folder, as_texts(keys), range(len(keys)), tokenize, vocab)
    _, starts, _ = ib.open_arrays(folder, record)
    size = next(s for s in range(record["n_tokens"], 2, -1)
                if len(ib.plan_shards(starts, record["n_tokens"], s)) == n)
    ib.build_folder(folder, [], [], tokenize, vocab, shard_tokens=size)
    index = ib.open_index(folder)
    assert isinstance(index, ShardedIndex) and len(index.shards) == n
    assert all(len(s.text) <= size for s in index.shards)
    return index


def prefixes(rng: np.random.Generator, keys: list[list[int]], vocab: int) -> list[list[int]]:
    out: list[list[int]] = [[]]
    for _ in range(250):
        k = keys[int(rng.integers(len(keys)))]
        s = int(rng.integers(0, len(k) + 1))
        out.append(k[s:s + int(rng.integers(1, 6))])
        out.append([int(x) for x in rng.integers(0, vocab, size=int(rng.integers(1, 3)))])
    return out


@pytest.mark.parametrize("n_shards", [2, 3, 7])
@pytest.mark.parametrize("vocab,dense", [(6, False), (40, False), (40, True)])
def test_shards_answer_exactly_like_one_index(tmp_path, monkeypatch, n_shards: int, vocab: int,
                                              dense: bool) -> None:
    if dense:  # the vocabulary-wide merge of many children, on a small corpus
        monkeypatch.setattr(ish, "DENSE_MERGE", 0)
    rng = np.random.default_rng(n_shards * 100 + vocab)
    keys = random_keys(rng, 70, vocab, 12)
    one = SuffixIndex.build(keys, vocab)
    many = sharded(tmp_path, keys, vocab, n_shards)
    assert many.n == one.n and many.sep == one.sep == vocab
    for prefix in prefixes(rng, keys, vocab):
        for at_start in (False, True):
            a, b = one.find(prefix, at_start), many.find(prefix, at_start)
            assert (a is None) == (b is None), prefix
            assert one.count(prefix, at_start) == many.count(prefix, at_start), prefix
            if a is None:
                continue
            ca, cb = one.children(a), many.children(b)
            assert ca.tokens.tolist() == cb.tokens.tolist(), prefix
            assert ca.counts().tolist() == cb.counts().tolist(), prefix
            assert sorted(one.locate(a, 10**6)) == sorted(many.locate(b, 10**6)), prefix
            assert sorted(one.documents(prefix, at_start, 10**6)) == \
                sorted(many.documents(prefix, at_start, 10**6))
    for i, k in enumerate(keys):
        assert many.is_full_key(k) and one.is_full_key(k)
        assert many.key_tokens(i).tolist() == one.key_tokens(i).tolist() == k
        assert not many.is_full_key([*k, vocab - 1]) or one.is_full_key([*k, vocab - 1])


def test_the_shared_boundary_separator_is_counted_once(tmp_path) -> None:
    keys = [[1, 2], [2], [1], [2, 1]]  # text 4 1 2 4 2 4 1 4 2 1 4: 11 tokens, 5 separators
    one = SuffixIndex.build(keys, 4)
    many = sharded(tmp_path, keys, 4, 3)
    # shards of at most 5 tokens: 4 1 2 4 | 4 2 4 1 4 | 4 2 1 4
    assert [s.text.tolist() for s in many.shards] == [[4, 1, 2, 4], [4, 2, 4, 1, 4], [4, 2, 1, 4]]
    assert many.root().count == one.root().count == 11
    assert many.allowed_next([]) == one.allowed_next([]) == {1: 3, 2: 3, 4: 5}
    assert many.key_start().count == one.key_start().count == 5  # 4 keys + the final SEP
    assert many.allowed_next([], at_key_start=True) == {1: 2, 2: 2}


def test_build_or_load_shards_above_the_shard_size_and_caches(tmp_path) -> None:
    rng = np.random.default_rng(5)
    keys = random_keys(rng, 60, 20, 10)
    calls: list[int] = []

    def tok(texts: list[str]) -> list[list[int]]:
        calls.append(len(texts))
        return tokenize(texts)

    small = ib.build_or_load(as_texts(keys), list(range(len(keys))), tok, 20, {"t": 1},
                             tmp_path, shard_tokens=60)
    assert isinstance(small, ShardedIndex) and len(small.shards) >= 5
    again = ib.build_or_load(as_texts(keys), list(range(len(keys))), tok, 20, {"t": 1},
                             tmp_path, shard_tokens=60)
    assert len(calls) == 1 and isinstance(again, ShardedIndex)  # loaded, not tokenised again
    whole = ib.build_or_load(as_texts(keys), list(range(len(keys))), tok, 20, {"t": 2},
                             tmp_path)
    assert isinstance(whole, SuffixIndex) and whole.mapped
    assert whole.allowed_next(keys[0][:2], True) == small.allowed_next(keys[0][:2], True)


def test_tokenisation_streams_in_batches_into_the_token_file(tmp_path) -> None:
    calls: list[list[str]] = []

    def tok(texts: list[str]) -> list[list[int]]:
        calls.append(list(texts))
        return tokenize(texts)

    keys = [[1, 2, 3], [], [4], [5, 6], [7]]
    record = ib.write_tokens(tmp_path, as_texts(keys), [10, 11, 12, 13, 14], tok, 100, batch=2)
    assert [len(c) for c in calls] == [2, 2, 1]
    text, starts, docs = ib.open_arrays(tmp_path, record)
    want, want_starts = concat_keys(keys, 100, np.dtype(np.uint16))
    assert text.tolist() == want.tolist() == [100, 1, 2, 3, 100, 100, 4, 100, 5, 6, 100, 7, 100]
    assert starts.tolist() == want_starts.tolist() and docs.tolist() == [10, 11, 12, 13, 14]
    assert (tmp_path / "tokens.u16").stat().st_size == 2 * 13
    (tmp_path / "bad").mkdir()
    with pytest.raises(DataError, match="below the separator"):
        ib.write_tokens(tmp_path / "bad", ["1 100"], [0], tokenize, 100)


def test_shard_plan_by_hand_and_a_key_too_long_for_a_shard() -> None:
    # keys of 3, 1, 2 tokens: text S a a a S b S c c S (10 tokens), key starts 1, 5, 7
    starts = np.array([1, 5, 7])
    assert ib.plan_shards(starts, 10, 10) == [[0, 9, 0, 3]]
    assert ib.plan_shards(starts, 10, 7) == [[0, 6, 0, 2], [6, 9, 2, 3]]
    assert ib.plan_shards(starts, 10, 5) == [[0, 4, 0, 1], [4, 6, 1, 2], [6, 9, 2, 3]]
    with pytest.raises(ConfigError, match="key 0 has 3 tokens.*raise riches.index_shard_tokens"):
        ib.plan_shards(starts, 10, 4)
    with pytest.raises(ConfigError, match="2147483647"):
        ib.plan_shards(starts, 10, 2**31)


def test_shard_jobs_resume_and_run_from_the_command_line(tmp_path, monkeypatch) -> None:
    rng = np.random.default_rng(9)
    keys = random_keys(rng, 40, 10, 8)
    ib.write_tokens(tmp_path, as_texts(keys), range(len(keys)), tokenize, 10)
    record = json.loads((tmp_path / ib.TOKENS_MARK).read_text())
    plan = ib.write_plan(tmp_path, record, 50, {})
    n = len(plan["shards"])
    assert n >= 4
    assert ib.main([str(tmp_path), "--shard", f"1/{n}"]) == 0
    assert ib.missing_shards(tmp_path) == [i for i in range(n) if i != 1]
    with pytest.raises(SystemExit, match=f"has {n} shards"):
        ib.main([str(tmp_path), "--shard", f"0/{n + 1}"])
    sorted_shards: list[int] = []
    real = ib.sort_suffixes
    monkeypatch.setattr(ib, "sort_suffixes", lambda text, sep, out: sorted_shards.append(
        len(text)) or real(text, sep, out=out))
    ib.build_folder(tmp_path, [], [], tokenize, 10, shard_tokens=50)
    assert len(sorted_shards) == n - 1  # the finished shard was skipped
    index = ib.open_index(tmp_path)
    one = SuffixIndex.build(keys, 10)
    for k in keys[:10]:
        assert index.allowed_next(k[:2], True) == one.allowed_next(k[:2], True)


def test_an_unfinished_folder_is_not_an_index(tmp_path) -> None:
    ib.write_tokens(tmp_path, ["1 2"], [0], tokenize, 10)
    with pytest.raises(DataError, match="not a finished RICHES index"):
        ib.open_index(tmp_path)


# -- constrained decoding: 1 shard and 3 shards ------------------------------------------------
def toy_keys(rng: np.random.Generator) -> list[list[int]]:
    words = [w for w in WORDS if w.startswith(" ") and w not in (" <<", " >>", " <<<")]
    keys = [[" Joker", " is", " played", " by", " Joaquin", " Phoenix", "."],
            [" Heath", " Ledger", " played", " Joker", " in", " the", " film", " Batman", "."],
            [" Joker", " is", " played", " by", " Heath", " Ledger", "."]]
    keys += [list(rng.choice(words, size=int(rng.integers(2, 7)))) + ["."] for _ in range(30)]
    keys += keys[:3]  # the Figure 3 keys again, in the last shard
    return [ids(k) for k in keys]


def constraint(index, **kw) -> KeyConstraint:
    return KeyConstraint(index=index, spec=SPEC, vocab_size=V, word_starts=word_start_ids(WORDS),
                         free_banned=marker_lookalike_ids(WORDS, SPEC), **kw)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("start,end", [("key", "key"), ("anywhere", "anywhere")])
def test_constrained_beam_is_the_same_with_1_and_3_shards(tmp_path, seed: int, start: str,
                                                          end: str) -> None:
    rng = np.random.default_rng(seed)
    keys = toy_keys(rng)
    one = SuffixIndex.build(keys, V)
    three = sharded(tmp_path, keys, V, 3)
    table = rng.normal(0, 3, size=(V, V))
    table[:, ID[" <<"]] += 4
    table[:, ID[" >>"]] += 4
    table[ID[" answer"], ID[" <<"]] = 20
    table[ID[" >>"], ID[" <<"]] = 20
    outs = []
    for index in (one, three):
        c = constraint(index, start=start, end=end, min_key_tokens=2)
        hyps = beam_search(BigramModel(table), ids([" answer"]), c,
                           BeamConfig(beam_size=4, max_new_tokens=30), decode, [ID["<eos>"]])
        outs.append([(h.tokens, round(h.score, 9)) for h in hyps])
    assert outs[0] == outs[1]
    assert any(ID[" >>"] in t for t, _ in outs[0])  # keys were decoded and closed


def test_wide_spans_are_memoised_apart_from_narrow_ones(tmp_path, monkeypatch) -> None:
    from riches import index as ri

    monkeypatch.setattr(ri, "WIDE_ROWS", 10)
    rng = np.random.default_rng(2)
    keys = random_keys(rng, 50, 8, 10)
    one = SuffixIndex.build(keys, 8)
    want = {tuple(k[:2]): SuffixIndex.build(keys, 8).allowed_next(k[:2], True) for k in keys}
    for k in keys:
        assert one.allowed_next(k[:2], True) == want[tuple(k[:2])]
    assert one._wide and all(hi - lo >= 10 for lo, hi, _ in one._wide)
    assert all(hi - lo < 10 for lo, hi, _ in one._cache)
    one._cache.clear()  # what the benchmarks clear between walks: the answers stay the same
    assert all(one.allowed_next(k[:2], True) == want[tuple(k[:2])] for k in keys)


# -- the stacked per-shard children against each shard asked alone ---------------------------
def per_shard_reference(index: ShardedIndex, span: ish.ShardSpan) -> tuple[dict[int, int],
                                                                           dict[int, list]]:
    """What the shards say one by one (SuffixIndex.children / narrow on each shard): the merged
    {token: count} and, per token, every shard's (lo, hi) after narrowing by it."""
    merged: dict[int, int] = {}
    spans: dict[int, list] = {}
    for i, (sh, sp) in enumerate(zip(index.shards, span.spans)):
        if sp.count <= 0:
            continue
        for t, c in sh.children(sp).as_dict().items():
            merged[t] = merged.get(t, 0) + c
            nxt = sh.narrow(sp, t)
            spans.setdefault(t, [(0, 0)] * len(index.shards))[i] = (nxt.lo, nxt.hi)
    if span.shared and index.sep in merged:
        merged[index.sep] -= span.shared
    return merged, spans


@pytest.mark.parametrize("scan_rows", [1, 3, 2048])  # 1 and 3: scanned and bisected shards mixed
@pytest.mark.parametrize("n_shards", [2, 5])
def test_stacked_children_and_narrowing_equal_each_shard_alone(tmp_path, monkeypatch,
                                                              scan_rows: int,
                                                              n_shards: int) -> None:
    from riches import index as ri

    monkeypatch.setattr(ri, "SCAN_ROWS", scan_rows)  # each shard bisects above it
    monkeypatch.setattr(ish, "STACK_SCAN_ROWS", scan_rows)
    monkeypatch.setattr(ish, "WIDE_ROWS", 12)  # both memos in use
    vocab = 7
    rng = np.random.default_rng(scan_rows * 10 + n_shards)
    keys = random_keys(rng, 60, vocab, 9)
    many = sharded(tmp_path, keys, vocab, n_shards)
    checked = 0
    # [SEP] (from the root, and at a key start): its last row, each shard's closing separator,
    # runs past the shard's end and is dropped (a prefix through a separator is no query: the
    # key-truncated suffix order does not sort past it)
    for prefix in prefixes(rng, keys, vocab) + [[vocab]]:
        for at_start in (False, True) if prefix != [vocab] else (False,):
            span = many.find(prefix, at_start)
            if span is None:
                continue
            want, want_spans = per_shard_reference(many, span)
            got = many.children(span)
            assert got.as_dict() == want, prefix
            assert got.tokens.tolist() == sorted(want)
            for t in want:
                nxt = many.narrow(span, t)
                if span.depth == 0 and t == vocab:
                    continue  # the boundary separators: test_..._counted_once
                assert [(s.lo, s.hi) for s in nxt.spans] == want_spans[t], (prefix, t)
                assert all(s.depth == span.depth + 1 for s in nxt.spans)
            assert many.narrow(span, vocab + 1) is None  # no such token
            checked += 1
    assert checked > 300
    assert many._wide and all(ish.ShardSpan(tuple(ish.Span(lo, hi, k[0]) for lo, hi in k[2:]),
                                            k[0], k[1]).count >= 12 for k in many._wide)
    assert all(ish.ShardSpan(tuple(ish.Span(lo, hi, k[0]) for lo, hi in k[2:]), k[0],
                             k[1]).count < 12 for k in many._cache)
