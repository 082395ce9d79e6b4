"""Suffix-array widths of riches/index.py as pure functions of the token count (no 2^31-token
text needed), checked against pydivsufsort's own re-encoding, and the sizes `ragrepro plan`
reports for RICHES's index (riches/plan.py), by hand."""
import numpy as np
import pytest
from pydivsufsort import divsufsort as _divsufsort
from pydivsufsort.divsufsort import _minimize_dtype

from riches import index as ri
from riches import plan as rp


@pytest.mark.parametrize("n, width", [
    (10, 4), (2**31, 4),            # positions 0 .. 2^31 - 1 still fit int32
    (2**31 + 1, 8),                 # a text above 2^31 tokens needs 64-bit positions
    (3_709_419_444, 8)])            # Factoid-Wiki's propositions (riches/plan.py)
def test_stored_suffix_array_width(n, width):
    assert ri.suffix_array_dtype(n).itemsize == width


@pytest.mark.parametrize("vocab, nbytes", [(200, 1), (255, 1), (256, 2), (32_000, 2),
                                           (65_535, 2), (65_536, 4), (128_256, 4)])
def test_sorted_symbol_bytes_match_pydivsufsort(vocab, nbytes):
    assert ri.sorted_symbol_bytes(vocab) == nbytes
    text = np.array([vocab, 0, 1, vocab], dtype=ri.token_dtype(vocab))  # separator = vocab
    assert _minimize_dtype(text).dtype.itemsize == nbytes


def test_pydivsufsort_goes_64_bit_at_2_31_bytes_not_tokens():
    # uint16 text (2 bytes a token): 2^30 - 1 tokens = 2^31 - 2 bytes sort in 32 bits
    assert ri.build_suffix_dtype(2**30 - 1, 32_000) == np.int32
    assert ri.build_suffix_dtype(2**30, 32_000) == np.int64
    assert ri.suffix_array_dtype(2**30) == np.int32   # ... while int32 still holds the result
    assert ri.build_suffix_dtype(2**29, 128_256) == np.int64  # 4 bytes a token


def test_a_wide_library_result_is_stored_narrow(monkeypatch):
    text = np.array([3, 1, 2, 3, 1, 0, 3], dtype=np.uint16)
    expected = _divsufsort(text)
    monkeypatch.setattr(ri, "divsufsort", lambda t: _divsufsort(t).astype(np.int64))
    sa = ri.suffix_array(text)
    assert sa.dtype == np.int32 and np.array_equal(sa, expected)
    assert ri.SuffixIndex.build([[1, 2], [1, 0]], vocab_size=3).sa.dtype == np.int32


def test_index_sizes_by_hand():
    # 1000 tokens x (2 text + 4 suffix array) + 10 keys x 16 (int64 start and document)
    assert rp.index_bytes(1_000, 10, 32_000) == 6_160
    assert rp.index_bytes(3_000_000_000, 1, 32_000) == 30_000_000_016  # 2 + 8 bytes a token
    # sort peak per token: text 2 + bytes 2 + byte SA 2x4 + mask 2 + max(2x4, 2x4) = 22
    assert rp.build_peak_bytes(1_000, 32_000) == 22_000
    # int64 while sorting: 2 + 2 + 16 + 2 + max(16, 16) = 38 bytes a token
    assert rp.build_peak_bytes(2**31, 32_000) == 38 * 2**31


def test_factoid_wiki_needs_the_64_bit_array():
    tokens, keys = rp.factoid_wiki_tokens(tokens_per_word=1.2)
    assert keys == 256_885_003
    assert tokens == int(256_885_003 * (11.2 * 1.2 + 1)) + 1 == 3_709_419_444
    assert ri.suffix_array_dtype(tokens) == np.int64
