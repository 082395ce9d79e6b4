"""ragrepro.models.passes: the zero-shot and oracle cells of one sweep process share their
full-window passes, and the oracle numbers stay the same floats as without the memo."""
import numpy as np
import pytest
import torch

from benchmarks.ralm_throughput import FixedDocs
from ragrepro.errors import ConfigError
from ragrepro.models import passes
from ragrepro.models.lm import LM
from ralm.documents import doc_encoder
from ralm.engine import StreamEval
from ralm.settings import settings_from_defaults
from ralm.windows import make_windows

L, DOC_MAX, RANK, STRIDE = 48, 12, 8, 8


class CharTokenizer:
    pad_token_id = 0
    bos_token_id = None
    eos_token_id = 1

    def __call__(self, text, add_special_tokens=True, truncation=False, max_length=None):
        ids = [5 + ord(c) % 90 for c in text]
        return {"input_ids": ids[:max_length] if truncation and max_length else ids}

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(chr(i - 5 + 32) for i in ids)


def tiny_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def weights():
    return tiny_model().state_dict()


def lm_from(weights, key="tiny|file|r1|float32|cpu|sdpa"):
    """A fresh load of the same weights, as each cell of a sweep loads its model."""
    model = tiny_model()
    model.load_state_dict(weights)
    return LM(name="tiny", model=model, tokenizer=CharTokenizer(), load_key=key)


@pytest.fixture
def memo_env(monkeypatch):
    monkeypatch.setenv(passes.ENV, "64")
    passes.reset_shared_memo()
    yield
    passes.reset_shared_memo()


DOCS = [{"id": "a", "title": "Nile", "text": "The Nile flows north into the sea."},
        {"id": "b", "title": "Amazon", "text": "The Amazon is the largest river."},
        {"id": "c", "title": "", "text": "Manaus lies on the Rio Negro."}]
STREAM = [int(x) for x in np.random.default_rng(1).integers(5, 95, size=120)]


def evaluate(lm, rerank):
    s = settings_from_defaults(
        {"max_length": L, "stride": STRIDE, "retrieval_stride": STRIDE, "query_len": 16,
         "doc_max_tokens": DOC_MAX, "k": 3, "rerank": rerank, "rerank_tokens": RANK,
         "window_bos": False, "batch_windows": 4}, seed=0, batch_size=3, model_adds_bos=False)
    windows = make_windows(len(STREAM), L, STRIDE)
    docs = {w.index: [DOCS[(w.index + j) % 3] for j in range(3)] for w in windows[1:]}
    ev = StreamEval(lm, s, FixedDocs(docs), doc_encoder(lm, DOC_MAX, False), bos_id=None)
    return ev.run(STREAM)


def test_oracle_after_zeroshot_replays_its_passes_to_the_same_floats(weights, memo_env):
    plain = evaluate(lm_from(weights), "oracle")  # never attached: no memo
    zs = lm_from(weights)
    assert zs.share_passes()
    evaluate(zs, "zeroshot")
    memo = passes.shared_memo()
    stored, ran = len(memo.entries), memo.misses
    assert memo.hits == 0 and stored == ran > 0
    oracle = lm_from(weights)  # the next cell loads the model again
    assert oracle.share_passes()
    replayed = evaluate(oracle, "oracle")
    # N=120, L=48, s=8: 10 windows; windows 1-9 retrieve, 3 candidates each, batches of 3
    # rows, blocks of 4 windows: block 0 ranks windows 1-3 (9 rows, 3 batches) and scores
    # window 0 (no document) in 1 batch; block 1 ranks 4-7 (4 batches); block 2 ranks 8-9 (2).
    # The oracle cell replays all 10 batches of the zero-shot cell and runs none itself.
    assert len(make_windows(len(STREAM), L, STRIDE)) == 10
    assert ran == 3 + 1 + 4 + 2
    assert memo.hits == ran and memo.misses == ran
    assert [r["nll_sum"] for r in replayed] == [r["nll_sum"] for r in plain]
    assert [r.get("doc_rank") for r in replayed] == [r.get("doc_rank") for r in plain]


def test_changed_weights_or_threads_never_hit(weights, memo_env):
    a = lm_from(weights)
    a.share_passes()
    evaluate(a, "zeroshot")
    memo = passes.shared_memo()
    n = memo.misses
    b = lm_from(weights)
    with torch.no_grad():
        b.model.model.layers[0].mlp.up_proj.weight[0, 0] += 1e-3  # as after a training step
    b.share_passes()
    evaluate(b, "zeroshot")
    assert memo.hits == 0 and memo.misses == 2 * n
    c = lm_from(weights, key="tiny|file|r1|float32|cpu|eager")  # another kernel: another key
    c.share_passes()
    evaluate(c, "zeroshot")
    assert memo.hits == 0
    threads = torch.get_num_threads()
    d = lm_from(weights)
    d.share_passes()
    try:
        torch.set_num_threads(threads + 1)  # another thread count may round differently
        evaluate(d, "zeroshot")
    finally:
        torch.set_num_threads(threads)
    assert memo.hits == 0


def test_training_mode_bypasses_the_memo(weights, memo_env):
    lm = lm_from(weights)
    lm.share_passes()
    lm.model.train()
    evaluate(lm, "zeroshot")
    memo = passes.shared_memo()
    assert memo.hits == memo.misses == 0 and not memo.entries


def test_memo_off_and_bad_bound(weights, monkeypatch):
    monkeypatch.setenv(passes.ENV, "0")
    passes.reset_shared_memo()
    assert not lm_from(weights).share_passes()
    assert not LM(name="x", model=tiny_model(), tokenizer=CharTokenizer()).share_passes()
    monkeypatch.setenv(passes.ENV, "lots")
    passes.reset_shared_memo()
    with pytest.raises(ConfigError, match=f"{passes.ENV}='lots'.*0 to turn"):
        passes.shared_memo()
    passes.reset_shared_memo()


def test_lru_keeps_the_byte_bound():
    t = torch.zeros(4, 8)  # 128 bytes
    m = passes.PassMemo(max_bytes=300)
    calls = []

    def make(i):
        return lambda: calls.append(i) or t.clone()

    for i in (1, 2):
        m.get_or_run((i,), make(i))
    m.get_or_run((1,), make(1))  # a hit makes 1 the most recent
    m.get_or_run((3,), make(3))  # 384 > 300: the least recent (2) goes
    assert list(m.entries) == [(1,), (3,)] and m.used == 256
    assert calls == [1, 2, 3] and (m.hits, m.misses) == (1, 3)
    big = torch.zeros(100)  # 400 bytes: larger than the bound, returned but not kept
    assert m.get_or_run(("big",), lambda: big) is big and ("big",) not in m.entries


def test_batch_key_and_checksum():
    ids = torch.tensor([[5, 6, 7], [8, 9, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    assert passes.batch_key(ids, mask) == passes.batch_key(ids.clone(), mask.clone())
    assert passes.batch_key(ids, mask) != passes.batch_key(ids, torch.ones_like(mask))
    other = ids.clone()
    other[1, 2] = 1
    assert passes.batch_key(ids, mask) != passes.batch_key(other, mask)
    m1, m2 = tiny_model(), tiny_model()  # same seed: same weights
    assert passes.weights_checksum(m1) == passes.weights_checksum(m2)
    with torch.no_grad():
        m2.lm_head.weight[3, 3] *= 2
    assert passes.weights_checksum(m1) != passes.weights_checksum(m2)


def test_checksum_reads_scalar_and_empty_tensors():
    """Gemma registers a 0-dim buffer (its embedding scale): viewing that as bytes failed and
    stopped every zero-shot and oracle cell of Gemma (found in the two-lane cold run)."""
    m = tiny_model()
    m.register_buffer("scale", torch.tensor(24.0))
    m.register_buffer("nothing", torch.zeros(0))
    first = passes.weights_checksum(m)
    m.scale.fill_(25.0)
    assert passes.weights_checksum(m) != first


@pytest.mark.slow
def test_both_embedded_models_can_share_passes(smollm, gemma):
    for lm in (smollm, gemma):
        assert len(passes.weights_checksum(lm.model)) == 16


def test_a_model_that_cannot_be_checksummed_runs_without_the_memo(monkeypatch, caplog):
    from ragrepro.models import lm as lm_mod

    def broken(model):
        raise RuntimeError("odd tensor")

    monkeypatch.setattr(lm_mod, "weights_checksum", broken)
    monkeypatch.setattr(lm_mod, "shared_memo", lambda: passes.PassMemo(1 << 20))
    fake = lm_mod.LM.__new__(lm_mod.LM)
    fake.name, fake.load_key, fake.device, fake.model = "m", "k", "cpu", None
    fake.pass_memo = fake.memo_identity = None
    assert fake.share_passes() is False and fake.pass_memo is None
    assert "Pass memo off for m" in caplog.text


def evaluate_blocks_of(lm, rerank, batch_windows):
    s = settings_from_defaults(
        {"max_length": L, "stride": STRIDE, "retrieval_stride": STRIDE, "query_len": 16,
         "doc_max_tokens": DOC_MAX, "k": 3, "rerank": rerank, "rerank_tokens": RANK,
         "window_bos": False, "batch_windows": batch_windows}, seed=0, batch_size=3,
        model_adds_bos=False)
    windows = make_windows(len(STREAM), L, STRIDE)
    docs = {w.index: [DOCS[(w.index + j) % 3] for j in range(3)] for w in windows[1:]}
    ev = StreamEval(lm, s, FixedDocs(docs), doc_encoder(lm, DOC_MAX, False), bos_id=None)
    return ev.run(STREAM)


def test_first_document_cell_replays_rows_of_same_shape_batches_to_the_same_floats(
        weights, memo_env):
    plain = evaluate_blocks_of(lm_from(weights), "first", 3)  # never attached: no memo
    zs = lm_from(weights)
    zs.share_passes()
    evaluate_blocks_of(zs, "zeroshot", 3)
    memo = passes.shared_memo()
    ran = memo.misses
    # 10 windows, blocks of 3, 3 candidates, batches of 3 rows: blocks rank windows 1-2, 3-5,
    # 6-8 and 9 (2 + 3 + 3 + 1 batches of shape [3, 48]); window 0 is scored alone ([1, 48])
    assert ran == 2 + 3 + 3 + 1 + 1 and memo.row_hits == 0
    first = lm_from(weights)
    first.share_passes()
    replayed = evaluate_blocks_of(first, "first", 3)
    # the first-document cell's batches: [w0, w1, w2] (window 0 has no document: not a stored
    # row), [w3, w4, w5] and [w6, w7, w8] (every row stored from the zero-shot cell's [3, 48]
    # batches: replayed), [w9] (shape [1, 48]: its row was stored from a [3, 48] batch, so it
    # runs)
    assert memo.row_hits == 2 and memo.hits == 2 and memo.misses == ran + 2
    assert [r["nll_sum"] for r in replayed] == [r["nll_sum"] for r in plain]
    assert [r.get("doc_rank") for r in replayed] == [None] + [0] * 9  # window 0: no document


def test_rows_are_keyed_by_the_batch_shape():
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    mask = torch.ones_like(ids)
    other = torch.tensor([[5, 6, 7], [11, 12, 13]])  # same first row, another neighbour
    assert passes.row_keys(ids, mask)[0] == passes.row_keys(other, mask)[0]
    assert passes.row_keys(ids, mask)[1] != passes.row_keys(other, mask)[1]
    alone = passes.row_keys(ids[:1], mask[:1])[0]  # the same row in a batch of one
    assert alone != passes.row_keys(ids, mask)[0]


def test_row_index_follows_eviction_and_the_switch(monkeypatch):
    m = passes.PassMemo(max_bytes=300)
    t = torch.arange(64, dtype=torch.float32).reshape(2, 8, 4)  # 256 bytes, rows of 128
    m.get_or_run(("b1",), lambda: t, [("r0",), ("r1",)])
    got = m.get_or_run(("b2",), lambda: pytest.fail("must replay"), [("r1",), ("r0",)])
    assert torch.equal(got, t[[1, 0]]) and (m.hits, m.row_hits, m.misses) == (1, 1, 1)
    # a partial hit runs the whole batch (its other rows would be computed in another shape)
    m.get_or_run(("b3",), lambda: torch.zeros(2, 2, 4), [("r0",), ("new",)])
    assert m.misses == 2
    # b3 (64 bytes) pushes b1 out (256 + 64 > 300): b1's row r1 goes, r0 now names b3's row
    assert list(m.entries) == [("b3",)] and m.rows[("r0",)] == (("b3",), 0)
    assert ("r1",) not in m.rows
    m.get_or_run(("b4",), lambda: t.clone(), [("x",), ("y",)])  # 256 bytes: b3 goes
    assert ("r0",) not in m.rows and ("new",) not in m.rows and set(m.rows) == {("x",), ("y",)}
    monkeypatch.setenv(passes.ROWS_ENV, "0")
    assert not passes.rows_enabled()
    monkeypatch.setenv(passes.ROWS_ENV, "yes")
    with pytest.raises(ConfigError, match=f"{passes.ROWS_ENV}='yes' must be 1"):
        passes.rows_enabled()


def test_with_rows_off_only_whole_batches_replay(weights, memo_env, monkeypatch):
    monkeypatch.setenv(passes.ROWS_ENV, "0")
    zs = lm_from(weights)
    zs.share_passes()
    evaluate_blocks_of(zs, "zeroshot", 3)
    first = lm_from(weights)
    first.share_passes()
    evaluate_blocks_of(first, "first", 3)
    assert passes.shared_memo().row_hits == 0 and passes.shared_memo().hits == 0
