"""The LM layer on the real embedded models (float32, CPU)."""
import json

import numpy as np
import pytest
import torch

from ragrepro.errors import ConfigError, OfflineError

SENTENCE = ("2001: A Space Odyssey is a 1968 epic science fiction film produced and directed by "
            "Stanley Kubrick. The screenplay was written by Kubrick and science fiction author "
            "Arthur C. Clarke.")

pytestmark = pytest.mark.slow


def _reference(lm, ids, start):
    full = lm.full_logprobs(ids)
    pos = torch.arange(start - 1, len(ids) - 1)
    return full[pos, torch.tensor(ids[start:])].double().numpy()


def test_batched_scoring_equals_full_logits(smollm):
    ids = smollm.encode(SENTENCE)
    rows = [ids, ids[:20], ids[5:40]]  # different lengths -> right padding inside the batch
    starts = [1, 10, 30]
    got = smollm.score_targets(rows, starts, batch_size=3)
    for row, start, lp in zip(rows, starts, got):
        assert lp.shape == (len(row) - start,)
        np.testing.assert_allclose(lp, _reference(smollm, row, start), rtol=1e-4, atol=1e-4)


def test_target_start_must_leave_context(smollm):
    with pytest.raises(ConfigError, match="target start 0"):
        smollm.score_targets([[1, 2, 3]], [0])


def test_bos_policy(smollm, gemma):
    assert smollm.encode("Hello")[0] != smollm.bos_id or smollm.bos_id is None
    g = gemma.encode("Hello")
    assert g[0] == gemma.bos_id and gemma.encode("Hello", add_bos=False) == g[1:]


def test_gemma_needs_bos(gemma):
    """environment.md: token perplexity 246 without BOS, 11.4 with it on this kind of text."""
    with_bos = gemma.encode(SENTENCE)
    without = gemma.encode(SENTENCE, add_bos=False)
    ppl_with = float(np.exp(-gemma.score_targets([with_bos], [2])[0].mean()))
    ppl_without = float(np.exp(-gemma.score_targets([without], [1])[0].mean()))
    assert ppl_with < 30 and ppl_without > 5 * ppl_with


def test_gemma_scored_positions_match_full_logits(gemma):
    ids = gemma.encode(SENTENCE)[:30]
    np.testing.assert_allclose(gemma.score_targets([ids], [15])[0], _reference(gemma, ids, 15),
                               rtol=1e-4, atol=1e-4)


def test_greedy_generation_is_deterministic(smollm):
    prompt = smollm.encode("The capital of France is")
    a = smollm.generate([prompt], max_new_tokens=5)
    b = smollm.generate([prompt, smollm.encode("One, two,")], max_new_tokens=5)
    assert a[0] == b[0] and len(a[0]) <= 5
    assert "Paris" in smollm.decode(a[0])


def test_gguf_conversion_is_cached():
    from ragrepro import assets
    from ragrepro.models.loading import converted_gguf_dir

    first = converted_gguf_dir(assets.smollm2_gguf())
    assert (first / "config.json").exists()
    assert converted_gguf_dir(assets.smollm2_gguf()) == first  # keyed by the file hash
    # plain dequantised weights: no GGUF quantizer may be attached when the folder loads
    assert "quantization_config" not in json.loads((first / "config.json").read_text())


# sha256 of the converted weights file (gguf 0.19.0, transformers 5.24.0, safetensors'
# own layout): converting with gguf_parsed_once must give the bytes the plain conversion gave
# (measured both ways, also for Gemma: cf4e5382...). A version bump that changes the weights
# changes every number, so this test names it.
SMOLLM2_WEIGHTS_SHA256 = "a672150fb4f99d7c8f4168cecdd464069c0ef3a37d8113f22ddb9d48031d03cd"


def test_gguf_conversion_gives_the_pinned_weights():
    import hashlib

    from ragrepro import assets
    from ragrepro.models.loading import converted_gguf_dir

    weights = converted_gguf_dir(assets.smollm2_gguf()) / "model.safetensors"
    h = hashlib.sha256()
    with open(weights, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    assert h.hexdigest() == SMOLLM2_WEIGHTS_SHA256


def test_gguf_parsed_once_shares_one_reader_and_restores_gguf():
    import gguf
    import gguf.gguf_reader
    import numpy

    from ragrepro import assets
    from ragrepro.models.loading import gguf_parsed_once

    path = assets.smollm2_gguf()
    plain_reader, plain_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with gguf_parsed_once():
        a, b = gguf.GGUFReader(path), gguf.GGUFReader(str(path))
        assert a is b  # parsed once, however the path is spelt
        m = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30)
        assert m is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 30)
        assert m.get_name("blk.3.attn_q") == plain_map(gguf.MODEL_ARCH.LLAMA, 30).get_name(
            "blk.3.attn_q")
    with pytest.raises(RuntimeError), gguf_parsed_once():
        raise RuntimeError("a failed conversion")
    assert gguf.GGUFReader is plain_reader and gguf.get_tensor_name_map is plain_map
    assert gguf.gguf_reader.np is numpy  # the in-memory reading stays inside the block
    assert not isinstance(a.data, numpy.memmap) and a.data.tobytes()[:64] == bytes(
        numpy.memmap(path, mode="r")[:64])
    fresh = gguf.GGUFReader(path)  # the shared reader saw the same fields a fresh one sees
    assert list(fresh.fields) == list(a.fields)
    assert [t.name for t in fresh.tensors] == [t.name for t in a.tensors]


def test_stale_gguf_quantization_config_is_stripped(tmp_path):
    from ragrepro.models.loading import strip_gguf_quant_config

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 8,
                               "quantization_config": {"quant_method": "gguf",
                                                       "dequantize": False}}))
    assert strip_gguf_quant_config(cfg) is True
    assert json.loads(cfg.read_text()) == {"model_type": "llama", "hidden_size": 8}
    assert strip_gguf_quant_config(cfg) is False  # idempotent
    other = {"model_type": "llama", "quantization_config": {"quant_method": "bitsandbytes"}}
    cfg.write_text(json.dumps(other))
    assert strip_gguf_quant_config(cfg) is False  # another method is the user's: kept
    assert json.loads(cfg.read_text()) == other


def test_hub_model_offline_gives_actionable_error(monkeypatch):
    from ragrepro.models import load_lm

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="model=smollm2-135m"):
        load_lm("nope", "some-org/definitely-not-cached-model")


def test_finish_reasons_from_a_real_model(smollm):
    """A 3-token budget on an open-ended prompt is cut by length; a budget long enough for a
    short list item ends at EOS or fills it; the batch mate's padding never counts as EOS."""
    prompt = smollm.encode("The capital of France is")
    (ids, why), = smollm.generate_with_finish([prompt], max_new_tokens=3)
    assert why == "length" and len(ids) == 3
    eos = smollm.eos_id
    forced = smollm.generate_with_finish([prompt, smollm.encode("One")], max_new_tokens=4,
                                         forced_eos_token_id=eos)
    # forced_eos puts EOS at the last step: every row ends by EOS with 3 kept tokens at most
    assert [w for _, w in forced] == ["eos", "eos"]
    assert all(len(i) <= 3 and eos not in i for i, _ in forced)


def test_one_and_two_threads_differ_by_float32_noise_at_most(smollm, gemma):
    """torch's thread count changes a forward pass at most by float32's own rounding error.
    Whether it changes it at all depends on the CPU: on the AMD EPYC that made the committed
    rows one and two threads gave the same bits; on an Intel Xeon with AVX-512 they differ
    (the kernels split their sums by thread). So each thread count's log-probabilities are
    held against a float64 pass of the same weights, each within float32's error of it
    (measured on that Xeon, SmolLM2: 6e-5 from float64, 5e-5 apart). Training is another
    matter (a weight gradient sums per-thread parts): the predictive reranker pins its own
    count, ralm.reranker.TRAIN_THREADS."""
    import copy

    g = torch.Generator().manual_seed(0)
    for lm in (smollm, gemma):
        ids = torch.randint(5, 20000, (1, 24), generator=g)
        before = torch.get_num_threads()
        outs = []
        try:
            for n in (1, 2):
                torch.set_num_threads(n)
                with torch.no_grad():
                    outs.append(torch.log_softmax(lm.model(input_ids=ids).logits, -1).double())
        finally:
            torch.set_num_threads(before)
        wide = copy.deepcopy(lm.model).double()
        with torch.no_grad():
            ref = torch.log_softmax(wide(input_ids=ids).logits, -1)
        del wide
        errors = [(o - ref).abs().max().item() for o in outs]
        assert max(errors) < 1e-3, (lm.name, errors)  # float32 through the layers: ~1e-4
