"""benchmarks/device.py (`make bench-device`) at its tiny CPU size: the FLOP formula against
hand counts and torch's own FLOP counter, % of peak arithmetic, the low-precision copies
holding the float32 weights, a whole tiny run (9 cells, finite drift, % of peak in (0, 105]),
and cells that cannot run becoming rows that say why."""
import importlib
import math
import sys

import pytest
import torch

from ragrepro.paths import REPO_ROOT

if str(REPO_ROOT) not in sys.path:  # benchmarks/ is run as `python -m benchmarks` from the root
    sys.path.insert(0, str(REPO_ROOT))
dev = importlib.import_module("benchmarks.device")

# tiny shapes: d = 64, 2 layers; feed-forward 4 d = 256 (GPT-2, OPT) and
# round(11008 / 4096 x 64) = 172 (LLaMA)
HAND_MATMUL = {
    # per layer: QKV 3 d^2 + output d^2 + MLP d x 4d + 4d x d = 12 d^2
    "gpt2-xl": 2 * 12 * 64**2,
    # per layer: q, k, v, out_proj 4 d^2 + fc1 d x 256 + fc2 256 x d
    "opt-6.7b": 2 * (4 * 64**2 + 2 * 64 * 256),
    # per layer: q, k, v, o 4 d^2 + gate, up, down 3 x d x 172
    "llama-7b": 2 * (4 * 64**2 + 3 * 64 * 172),
}
FAST = {"step_budget_s": 0.01, "min_steps": 2, "max_steps": 2, "gemm_sizes": (128, 256)}


def _tiny(label):
    [(_, source, cls)] = [m for m in dev.MODELS if m[0] == label]
    return dev.Arch.of(label, source, cls, dev.TINY_PLAN)


@pytest.mark.parametrize("label", list(HAND_MATMUL))
def test_matmul_weights_hand_count_and_the_real_shapes(label):
    arch = _tiny(label)
    assert arch.model_class == type(dev.build_model(arch.model_class, arch.config, "float32",
                                                    "cpu", 0, "eager")).__name__
    assert arch.n_matmul == HAND_MATMUL[label] == {"gpt2-xl": 98304, "opt-6.7b": 98304,
                                                   "llama-7b": 98816}[label]
    assert dev.dims(arch.config) == (64, 2, 512)
    full = dev.model_config(arch.source, "full", 1024)
    assert dev.dims(full) == {"gpt2-xl": (1600, 48, 50257), "opt-6.7b": (4096, 32, 50272),
                              "llama-7b": (4096, 32, 32000)}[label]


def test_model_flops_hand_count():
    # 2 windows of 128 tokens, the last 4 scored, GPT-2 tiny (98,304 matmul weights):
    body = 128 * 2 * 98304  # 25,165,824: a multiply and an add per weight per token
    attention = 2 * 2 * 64 * 128 * 129  # 4,227,072: layers x 2 d L (L+1)
    head = 4 * 2 * 64 * 512  # 262,144: 2 d V at each scored position
    assert body + attention + head == 29_655_040
    assert dev.model_flops(98304, 64, 2, 512, 128, 4, 2) == 2 * 29_655_040


@pytest.mark.parametrize("label", list(HAND_MATMUL))
def test_flops_agree_with_torch_flop_counter(label):
    """torch counts the kernels: every matmul weight twice per token, plus attention over
    the full L x L square (4 d L^2 per layer), twice the causal model count, less 4 d L."""
    from torch.utils.flop_counter import FlopCounterMode

    arch = _tiny(label)
    model = dev.build_model(arch.model_class, arch.config, "float32", "cpu", 0, "eager")
    d, layers, vocab = dev.dims(arch.config)
    length = 32
    x = torch.randint(1, vocab, (1, length))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model.base_model(input_ids=x)
    counted = counter.get_total_flops()
    assert counted == length * 2 * arch.n_matmul + layers * 4 * d * length**2
    causal = dev.model_flops(arch.n_matmul, d, layers, vocab, length, 0, 1)
    assert counted - causal == layers * 2 * d * length * (length - 1)


def test_percent_of_peak_arithmetic():
    assert dev.percent_of_peak(3e12, 2.0, 6e12) == 25.0
    assert dev.percent_of_peak(1e9, 1e-3, 1e12) == pytest.approx(100.0)


def test_low_precision_copy_holds_the_float32_weights_rounded():
    arch = _tiny("llama-7b")
    ref = dev.build_model(arch.model_class, arch.config, "float32", "cpu", 0, "sdpa")
    low = dev.build_model(arch.model_class, arch.config, "bfloat16", "cpu", 1, "sdpa")
    dev.copy_weights(ref, low)
    got = dict(low.named_parameters())
    for name, p in ref.named_parameters():
        assert got[name].dtype == torch.bfloat16
        assert torch.equal(got[name], p.to(torch.bfloat16)), name


@pytest.mark.exclusive  # pct_peak: a step time over a GEMM peak timed earlier
def test_tiny_run_gives_every_cell_with_consistent_arithmetic(tmp_path):
    rows, info = dev.run_device("cpu", "tiny", **FAST)
    assert [(r["arch"], r["dtype"]) for r in rows] == [
        (m[0], t) for m in dev.MODELS for t in dev.DTYPES]
    plan = info["plan"]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["window_tok_per_s"] == pytest.approx(plan.batch * plan.seq_len / r["step_s"])
        assert r["scored_tok_per_s"] == pytest.approx(r["window_tok_per_s"] * 4 / 128)
        flops = dev.model_flops(r["matmul_weights"], r["hidden"], r["layers"], r["vocab"],
                                128, 4, plan.batch)
        assert r["model_gflop_per_step"] == pytest.approx(flops / 1e9)
        assert r["pct_peak"] == pytest.approx(100 * flops / r["step_s"] / 1e12
                                              / r["peak_tflops"])
        assert 0 < r["pct_peak"] <= 105
        # random weights: every token is close to uniform over the 512-token vocabulary
        assert abs(r["mean_nll"] - math.log(512)) < 0.5
        if r["dtype"] != "float32":
            assert math.isfinite(r["drift_nll_vs_fp32"]) and abs(r["drift_nll_vs_fp32"]) < 0.05
    assert all(met for _, met, _ in dev.checks(rows, info))
    path = dev.write_outputs(rows, info, tmp_path)
    assert path.name == f"device_{info['slug']}_tiny.md" and info["slug"].startswith("cpu")
    text = path.read_text()
    assert "CPU tiny" in text and text.count("| ok |") == 9
    assert (tmp_path / path.name.replace(".md", ".csv")).exists()


def test_cells_that_cannot_run_are_rows_that_say_why(monkeypatch):
    monkeypatch.setattr(dev, "free_bytes", lambda device: 10**6)  # 1 MB: float32 + copy too big
    rows, _ = dev.run_device("cpu", "tiny", models=["gpt2-xl"], **FAST)
    status = {r["dtype"]: r["status"] for r in rows}
    assert status["float32"].startswith("skipped: float32 weights and a low-precision copy need")
    assert status["float16"] == status["bfloat16"] == (
        "ok; drift skipped: no float32 reference (float32 skipped)")
    assert all(r.get("drift_nll_vs_fp32") is None for r in rows)
    rows, _ = dev.run_device("cpu", "tiny", models=["opt-6.7b"], budget_s=0.0, **FAST)
    assert [r["status"].split(" (")[0] for r in rows] == ["skipped: time budget of 0 s spent"] * 3


def test_out_of_memory_is_a_skipped_row_and_the_next_cell_runs(monkeypatch):
    real = dev.build_model

    def build(model_class, config, dtype, *args):
        if dtype == "float16":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(model_class, config, dtype, *args)

    monkeypatch.setattr(dev, "build_model", build)
    rows, _ = dev.run_device("cpu", "tiny", models=["llama-7b"], **FAST)
    status = {r["dtype"]: r["status"] for r in rows}
    assert status == {"float32": "ok", "bfloat16": "ok", "float16": (
        "skipped: out of memory (CUDA out of memory. Tried to allocate 2.00 GiB)")}
    assert math.isfinite(rows[2]["drift_nll_vs_fp32"])  # bfloat16 still has its reference
