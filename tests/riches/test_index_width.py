"""Widths and sizes of the RICHES index as pure functions of the token count (no 2^31-token
text needed): int32 suffix arrays in shards of at most 2^31 - 1 tokens, and the sizes
`ragrepro plan` reports for it (riches/plan.py), by hand."""
import numpy as np
import pytest

from riches import index as ri
from riches import index_build as ib
from riches import plan as rp


@pytest.mark.parametrize("vocab, dtype", [(200, np.uint16), (49_152, np.uint16),
                                          (65_534, np.uint16), (65_535, np.uint32),
                                          (262_144, np.uint32)])
def test_text_width_holds_every_id_and_the_separator(vocab, dtype):
    assert ri.token_dtype(vocab) == dtype
    assert np.iinfo(ri.token_dtype(vocab)).max >= vocab  # the separator is id `vocab`


def test_suffix_arrays_are_int32_at_every_size():
    assert ri.SuffixIndex.build([[1, 2], [1, 0]], vocab_size=3).sa.dtype == np.int32
    assert ib.MAX_SHARD_TOKENS == 2**31 - 1  # positions 0 .. 2^31 - 2 of a full shard fit int32


def test_index_sizes_by_hand():
    # 1000 tokens x (2 text + 4 suffix array) + 10 keys x 16 (int64 start and document)
    assert rp.index_bytes(1_000, 10, 32_000) == 6_160
    assert rp.index_bytes(3_000_000_000, 1, 32_000) == 18_000_000_016  # int32 in shards
    assert rp.index_bytes(1_000, 0, 262_144) == 8_000  # uint32 text past 65,535 ids


def test_shards_and_the_build_peak_by_hand():
    assert rp.n_shards(10) == 1 and rp.n_shards(2**31 - 1) == 1 and rp.n_shards(2**31) == 2
    assert rp.n_shards(1_000, 300) == 4
    # the largest shard job: min(tokens, shard size) x the measured bytes per shard token
    assert rp.shard_build_peak_bytes(1_000) == int(1_000 * rp.SHARD_BUILD_BYTES_PER_TOKEN)
    assert rp.shard_build_peak_bytes(10**10, 10**6) == int(10**6 * rp.SHARD_BUILD_BYTES_PER_TOKEN)
    assert rp.SHARD_BUILD_BYTES_PER_TOKEN <= 12  # issue 29's target for one shard job


def test_factoid_wiki_is_two_int32_shards():
    tokens, keys = rp.factoid_wiki_tokens(tokens_per_word=1.2)
    assert keys == 256_885_003
    assert tokens == int(256_885_003 * (11.2 * 1.2 + 1)) + 1 == 3_709_419_444
    assert rp.n_shards(tokens) == 2  # 3.71e9 / (2^31 - 1) = 1.73
    # one shard job sorts at most 2^31 - 1 tokens: 17.0e9 bytes at 7.9 B/token, not 255.6 GB
    assert rp.shard_build_peak_bytes(tokens) == int((2**31 - 1) * rp.SHARD_BUILD_BYTES_PER_TOKEN)
