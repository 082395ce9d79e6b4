"""`make bench-device`: RALM scoring throughput of the paper architectures on this machine's
device, against the device's own matmul peak, and the low-precision drift of each.

For GPT-2 XL, OPT-6.7B and LLaMA-7B (shapes from ragrepro/models/archs.py, randomly
initialised: weights are not needed to time a model), in float32, float16 and bfloat16:

- tokens/s of the production scorer (`ragrepro.models.lm.LM.score_targets`, what the RALM
  engine calls) on batches of random-token windows of `seq_len` tokens, each scoring its last
  `stride` tokens (paper: L=1024, s=4): window tokens/s and scored tokens/s;
- % of peak: model FLOP/s over the FLOP/s of a timed large GEMM in the same dtype
  (`model_flops`: 2 x matmul weights + causal attention per window token, 2 d V per scored
  token for the vocabulary head);
- drift: mean NLL of the same random tokens in float16/bfloat16 minus float32, same weights
  (the low-precision model gets the float32 model's weights, rounded).

    python -m benchmarks.device                 # full shapes on a GPU, tiny ones on a CPU
    python -m benchmarks.device --size tiny     # 2 layers, width 64, vocabulary 512 (a test)
    python -m benchmarks.device --models llama-7b --dtypes bfloat16,float32 --budget-s 120

Writes results/bench/device_<device>_<size>.{csv,md}. A cell that cannot run (float32 weights
that do not fit, out of memory, the time budget spent) is a row with the reason.
"""
from __future__ import annotations

import argparse
import logging
import math
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ragrepro.models.archs import ARCHS
from ragrepro.paths import results_dir
from ragrepro.report.readable import check_columns

from .common import (
    BenchResult,
    cpu_model,
    load_average,
    markdown_table,
    read_rows,
    replace_first_table,
)

log = logging.getLogger(__name__)

DTYPES = ("float32", "float16", "bfloat16")
# (label, hub id in archs.ARCHS, model class): the paper models' shapes
MODELS = (("gpt2-xl", "gpt2-xl", "GPT2LMHeadModel"),
          ("opt-6.7b", "facebook/opt-6.7b", "OPTForCausalLM"),
          ("llama-7b", "huggyllama/llama-7b", "LlamaForCausalLM"))
# config keys of (width, layers, heads, feed-forward width) per config class
DIM_KEYS = {"GPT2Config": ("n_embd", "n_layer", "n_head", "n_inner"),
            "OPTConfig": ("hidden_size", "num_hidden_layers", "num_attention_heads", "ffn_dim"),
            "LlamaConfig": ("hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size")}
TINY = {"hidden": 64, "layers": 2, "heads": 4, "vocab": 512}


@dataclass(frozen=True)
class Plan:
    """What one invocation measures; `full` and `tiny` below are the two presets."""
    size: str
    seq_len: int
    stride: int
    batch: int
    drift_rows: int
    step_budget_s: float  # timed seconds per cell (after one warm-up step)
    min_steps: int
    max_steps: int
    gemm_sizes: tuple[int, ...]
    budget_s: float  # the whole run; cells that would start after it are skipped


FULL = Plan("full", seq_len=1024, stride=4, batch=8, drift_rows=2, step_budget_s=8.0,
            min_steps=2, max_steps=20, gemm_sizes=(4096, 8192), budget_s=360.0)
TINY_PLAN = Plan("tiny", seq_len=128, stride=4, batch=2, drift_rows=2, step_budget_s=0.5,
                 min_steps=2, max_steps=5, gemm_sizes=(128, 256, 512, 1024), budget_s=300.0)


# -- shapes and FLOPs (pure) ------------------------------------------------------------------
def model_config(source: str, size: str, seq_len: int) -> Any:
    """The transformers config of `source`'s real shape, or, for `tiny`, of the same class
    with width, layers, heads and vocabulary scaled down (feed-forward ratio kept)."""
    import transformers as tf

    cls, kw = ARCHS[source]
    kw = dict(kw)
    if size == "tiny":
        width, layers, heads, ffn = DIM_KEYS[cls]
        ratio = (kw.get(ffn) or 4 * kw[width]) / kw[width]  # GPT-2's n_inner None means 4 d
        kw.update({width: TINY["hidden"], layers: TINY["layers"], heads: TINY["heads"],
                   ffn: round(ratio * TINY["hidden"]), "vocab_size": TINY["vocab"]})
        if "word_embed_proj_dim" in kw:
            kw["word_embed_proj_dim"] = TINY["hidden"]
        for key in ("n_positions", "max_position_embeddings"):
            if key in kw:
                kw[key] = max(seq_len, 128)
        # GPT-2's special ids (50256) would lie outside the small vocabulary
        kw.update(bos_token_id=TINY["vocab"] - 1, eos_token_id=TINY["vocab"] - 1)
    elif size != "full":
        raise ValueError(f"size {size!r}: choose full or tiny")
    return getattr(tf, cls)(**kw)


def dims(config: Any) -> tuple[int, int, int]:
    """(width d, layers, vocabulary V) of a GPT-2, OPT or LLaMA config."""
    width, layers, _, _ = DIM_KEYS[type(config).__name__]
    return int(getattr(config, width)), int(getattr(config, layers)), int(config.vocab_size)


def matmul_weights(model: Any) -> int:
    """Weights of the matrix multiplications in the transformer body: every Linear (and
    GPT-2's Conv1D) of `model.base_model`. Embeddings are lookups and the vocabulary head is
    counted per scored token; biases and norms are not multiplications."""
    from transformers.pytorch_utils import Conv1D

    return sum(m.weight.numel() for m in model.base_model.modules()
               if isinstance(m, (torch.nn.Linear, Conv1D)))


def model_flops(n_matmul: int, d: int, layers: int, vocab: int, seq_len: int, stride: int,
                rows: int) -> int:
    """FLOPs of scoring `rows` windows of seq_len tokens, the last `stride` scored:

        rows x [seq_len x 2 n_matmul            (each weight: a multiply and an add)
                + layers x 2 d seq_len (seq_len+1)  (causal attention: the token at position t
                                        attends to t positions, QK^T and AV 2 d t each)
                + stride x 2 d V]       (vocabulary head at the scored positions only)

    Kernels compute the full seq_len^2 score matrix and mask half of it; that executed extra
    is not counted (model FLOPs, as in MFU)."""
    body = seq_len * 2 * n_matmul
    attention = layers * 2 * d * seq_len * (seq_len + 1)
    head = stride * 2 * d * vocab
    return rows * (body + attention + head)


def percent_of_peak(flops: float, seconds: float, peak_flops_per_s: float) -> float:
    return 100.0 * flops / seconds / peak_flops_per_s


def device_slug(kind: str, name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{kind} {name}".lower()).strip("-")


# -- measuring --------------------------------------------------------------------------------
def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_steps(fn: Callable[[], Any], device: str, plan: Plan) -> tuple[float, int]:
    """(median seconds per step, steps timed): one warm-up step, then as many steps as fit
    in plan.step_budget_s (within min_steps..max_steps)."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    first = time.perf_counter() - t0
    n = max(plan.min_steps, min(plan.max_steps, int(plan.step_budget_s / max(first, 1e-9))))
    times = [first]
    for _ in range(n - 1):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n


def gemm_peak(dtype: str, device: str, sizes: Sequence[int], budget_s: float = 1.0) -> float:
    """FLOP/s of the device's matrix multiply in `dtype`: the best over `sizes` (n x n by
    n x n) of the best of 3 timed batches. Timed through F.linear, the kernel the models'
    Linear layers call: on some CPUs torch.mm has no float16 kernel and falls back to a loop
    about 10x slower, which would make a "peak" that the model itself exceeds."""
    return max(_gemm(getattr(torch, dtype), device, n, budget_s) for n in sizes)


def _gemm(dt: torch.dtype, device: str, n: int, budget_s: float) -> float:
    g = torch.Generator(device=device).manual_seed(0)  # drawn on the device: 8192^2 is slow on a CPU
    a = torch.randn(n, n, generator=g, device=device).to(dt)
    b = torch.randn(n, n, generator=g, device=device).to(dt)
    linear = torch.nn.functional.linear
    linear(a, b)
    sync(device)
    t0 = time.perf_counter()
    linear(a, b)
    sync(device)
    reps = max(2, min(50, int(budget_s / 3 / max(time.perf_counter() - t0, 1e-9))))
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            linear(a, b)
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 * reps / best


class _Pad:
    """The scorer reads only the tokenizer's pad id (random tokens need no tokenizer)."""
    pad_token_id = 0


def build_model(model_class: str, config: Any, dtype: str, device: str, seed: int,
                attn: str) -> Any:
    import transformers as tf

    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: a 7B model's init on a CPU is slow
        model = getattr(tf, model_class)._from_config(config, dtype=getattr(torch, dtype),
                                                      attn_implementation=attn)
    if next(model.parameters()).device != torch.device(device):
        model.to(device)
    return model.eval()


def copy_weights(src: Any, dst: Any) -> None:
    """dst gets src's parameters and buffers, cast to dst's dtypes (same weights, rounded)."""
    target = dict(dst.named_parameters())
    target.update(dict(dst.named_buffers()))
    with torch.no_grad():
        for name, t in [*src.named_parameters(), *src.named_buffers()]:
            target[name].copy_(t)


def scorer(model: Any, device: str, name: str) -> Any:
    from ragrepro.models.lm import LM

    return LM(name=name, model=model, tokenizer=_Pad(), device=device)


def free_bytes(device: str) -> int:
    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info()[0])
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def bytes_needed(params: int, dtypes: Sequence[str], d: int, vocab: int, plan: Plan) -> int:
    """Weights in every dtype alive at once, plus activations (hidden states of a batch, a
    few per layer in flight, and the float32 log-softmax of the drift rows), with 15% slack."""
    size = {"float32": 4, "float16": 2, "bfloat16": 2}
    weights = sum(params * size[t] for t in dtypes)
    acts = plan.batch * plan.seq_len * d * 4 * 16 + plan.drift_rows * plan.seq_len * vocab * 4 * 3
    return int(1.15 * (weights + acts))


def random_rows(n: int, seq_len: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(1, vocab, (n, seq_len), generator=g).tolist()


def mean_nll(lm: Any, rows: list[list[int]]) -> float:
    """Mean NLL (nats) of every token after the first, through the production scorer."""
    lps = lm.score_targets(rows, [1] * len(rows), batch_size=len(rows))
    return -float(sum(lp.sum() for lp in lps) / sum(len(lp) for lp in lps))


@dataclass
class Arch:
    """One model shape, with the counts its rows report."""
    label: str
    source: str
    model_class: str
    config: Any
    params: int
    n_matmul: int

    @classmethod
    def of(cls, label: str, source: str, model_class: str, plan: Plan) -> Arch:
        import transformers as tf

        config = model_config(source, plan.size, plan.seq_len)
        with torch.device("meta"):  # counted without memory
            meta = getattr(tf, model_class)(config)
        return cls(label, source, model_class, config,
                   sum(p.numel() for p in meta.parameters()), matmul_weights(meta))


def measure_cell(lm: Any, arch: Arch, dtype: str, device: str, plan: Plan, peak: float,
                 rows: list[list[int]]) -> dict[str, Any]:
    """Time the scorer on `rows` (each scores its last `stride` tokens)."""
    starts = [plan.seq_len - plan.stride] * len(rows)
    step_s, steps = timed_steps(lambda: lm.score_targets(rows, starts, batch_size=plan.batch),
                                device, plan)
    d, layers, vocab = dims(arch.config)
    flops = model_flops(arch.n_matmul, d, layers, vocab, plan.seq_len, plan.stride, len(rows))
    return {"steps": steps, "step_s": step_s,
            "window_tok_per_s": len(rows) * plan.seq_len / step_s,
            "scored_tok_per_s": len(rows) * plan.stride / step_s,
            "model_gflop_per_step": flops / 1e9, "achieved_tflops": flops / step_s / 1e12,
            "peak_tflops": peak / 1e12, "pct_peak": percent_of_peak(flops, step_s, peak)}


class Clock:
    """The run's time budget: a cell that would start after it is skipped, with the reason."""

    def __init__(self, budget_s: float):
        self.t0, self.budget_s = time.monotonic(), budget_s

    def spent(self) -> float:
        return time.monotonic() - self.t0

    def over(self) -> str | None:
        if self.spent() > self.budget_s:
            return f"time budget of {self.budget_s:.0f} s spent ({self.spent():.0f} s)"
        return None


def bench_arch(arch: Arch, device: str, plan: Plan, peaks: dict[str, float], clock: Clock,
               attn: str, dtypes: Sequence[str] = DTYPES, seed: int = 0) -> list[dict[str, Any]]:
    """One row per dtype. float32 comes first and stays loaded as the drift reference while
    each low-precision copy of its weights is measured; if float32 and one copy do not fit,
    float32 is skipped and the low-precision models are built from the seed alone."""
    d, layers, vocab = dims(arch.config)
    rows = random_rows(plan.batch, plan.seq_len, vocab, seed)
    drift_rows = random_rows(plan.drift_rows, plan.seq_len, vocab, seed + 1)
    low = [t for t in dtypes if t != "float32"]
    need = bytes_needed(arch.params, ["float32", *low[:1]], d, vocab, plan)
    free = free_bytes(device)
    base = {"arch": arch.label, "model_class": arch.model_class, "hidden": d, "layers": layers,
            "vocab": vocab, "params": arch.params, "matmul_weights": arch.n_matmul,
            "attn": attn, "batch": plan.batch, "seq_len": plan.seq_len, "stride": plan.stride}
    out: list[dict[str, Any]] = []
    ref, ref_nll = None, None
    if "float32" in dtypes:
        why = clock.over() or (None if need <= free else
                               f"float32 weights and a low-precision copy need {need / 1e9:.1f} "
                               f"GB, {free / 1e9:.1f} GB free")
        if why:
            out.append({**base, "dtype": "float32", "status": f"skipped: {why}"})
        else:
            row, ref, ref_nll = _cell(arch, "float32", device, plan, peaks, rows, drift_rows,
                                      attn, seed, None, None)
            out.append({**base, **row})
    for dtype in low:
        why = clock.over()
        if why:
            out.append({**base, "dtype": dtype, "status": f"skipped: {why}"})
            continue
        row, _, _ = _cell(arch, dtype, device, plan, peaks, rows, drift_rows, attn, seed, ref,
                          ref_nll)
        out.append({**base, **row})
    del ref
    _free(device)
    return out


def _cell(arch: Arch, dtype: str, device: str, plan: Plan, peaks: dict[str, float],
          rows: list[list[int]], drift_rows: list[list[int]], attn: str, seed: int,
          ref: Any, ref_nll: float | None) -> tuple[dict[str, Any], Any, float | None]:
    """(row, the model if float32 else None, its mean NLL). Out of memory is a skipped row."""
    model = lm = None
    try:
        model = build_model(arch.model_class, arch.config, dtype, device, seed, attn)
        if ref is not None:
            copy_weights(ref, model)
        lm = scorer(model, device, arch.label)
        nll = mean_nll(lm, drift_rows)
        row = {"dtype": dtype, "status": "ok",
               **measure_cell(lm, arch, dtype, device, plan, peaks[dtype], rows),
               "mean_nll": nll}
        if dtype != "float32":
            row["drift_nll_vs_fp32"] = None if ref_nll is None else nll - ref_nll
            if ref_nll is None:
                row["status"] = "ok; drift skipped: no float32 reference (float32 skipped)"
        log.info("device bench %s %s: %.0f window tok/s, %.1f%% of peak", arch.label, dtype,
                 row["window_tok_per_s"], row["pct_peak"])
        if dtype == "float32":
            return row, model, nll
        return row, None, nll
    except torch.cuda.OutOfMemoryError as e:
        model = lm = None  # the scorer holds the model too; both must go before the next cell
        why = str(e).splitlines()[0][:120]
    finally:
        if dtype != "float32":
            model = lm = None
            _free(device)
    _free(device)
    return {"dtype": dtype, "status": f"skipped: out of memory ({why})"}, None, None


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


# -- the run ----------------------------------------------------------------------------------
def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_model()


def resolve(device: str, size: str) -> tuple[str, Plan]:
    """`auto`: the GPU when there is one; full shapes on a GPU, tiny ones on a CPU."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cpu" and Path("/dev/nvidia0").exists():
            log.warning("an NVIDIA GPU is present but this torch (%s) cannot use it: the tiny CPU "
                        "version runs. Install a CUDA build of torch into .venv for the full "
                        "shapes.", torch.__version__)
    if size == "auto":
        size = "full" if device.startswith("cuda") else "tiny"
    return device, FULL if size == "full" else TINY_PLAN


def measure_peaks(device: str, plan: Plan, dtypes: Sequence[str]) -> dict[str, float]:
    return {t: gemm_peak(t, device, plan.gemm_sizes) for t in dtypes}


def run_device(device: str = "auto", size: str = "auto", dtypes: Sequence[str] = DTYPES,
               models: Sequence[str] | None = None, attn: str = "sdpa",
               **overrides: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows, run info). `overrides` replace fields of the size's Plan (batch, seq_len, ...)."""
    device, plan = resolve(device, size)
    plan = replace(plan, **overrides)
    if device.startswith("cuda"):  # float32 means IEEE float32 here, not TF32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    clock = Clock(plan.budget_s)
    before = measure_peaks(device, plan, dtypes)
    chosen = [m for m in MODELS if models is None or m[0] in models]
    rows: list[dict[str, Any]] = []
    for label, source, model_class in chosen:
        rows += bench_arch(Arch.of(label, source, model_class, plan), device, plan, before,
                           clock, attn, dtypes)
    # a shared machine only ever makes the peak look lower: keep the higher of two measurements
    peaks = {t: max(v, gemm_peak(t, device, plan.gemm_sizes)) for t, v in before.items()}
    for r in rows:
        if r.get("status", "").startswith("ok"):
            r["peak_tflops"] = peaks[r["dtype"]] / 1e12
            r["pct_peak"] = 100 * r["achieved_tflops"] / r["peak_tflops"]
    name = device_name(device)
    info = {"device": device, "device_name": name, "slug": device_slug(device.split(":")[0], name),
            "plan": plan, "peaks": peaks, "seconds": clock.spent(), "attn": attn,
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "load_avg": load_average()}
    for r in rows:
        r.update(device=device, device_name=name, size=plan.size)
    return rows, info


FORMULA = ("Model FLOPs per scored window = seq_len x 2 x (matmul weights of the body) + "
           "layers x 2 d seq_len (seq_len+1) (causal attention) + stride x 2 d V (vocabulary "
           "head at the scored positions); % of peak = those FLOP/s over those of a timed "
           "GEMM in the same dtype (F.linear, the best of n = {n})")


def summary_lines(rows: list[dict[str, Any]], info: dict[str, Any]) -> list[str]:
    plan: Plan = info["plan"]
    label = "CPU tiny" if info["device"] == "cpu" and plan.size == "tiny" else \
        f"{info['device']} {plan.size}"
    peaks = ", ".join(f"{t} {v / 1e12:.3g} TFLOP/s" for t, v in info["peaks"].items())
    head = [(f"Device benchmark, {label}: {info['device_name']} ({info['device']}), torch "
            f"{info['torch']}, torch threads {info['threads']}, attention {info['attn']}, load average "
             f"{info['load_avg']:.1f} at the end; "
            f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {info['seconds']:.0f} s in all."), "",
            (f"Random-token windows of {plan.seq_len} tokens, batch {plan.batch}, each scoring "
            f"its last {plan.stride} (LM.score_targets, the RALM engine's scorer); "
            f"randomly initialised weights; median of the timed steps after one warm-up."), "",
            "Matmul peak: " + peaks + ".", "",
            FORMULA.format(n=", ".join(map(str, plan.gemm_sizes))) + ".", "",
            ("Drift: mean NLL (nats) over the drift rows in this dtype minus float32, the "
            "float32 weights rounded to this dtype."), ""]
    return head + table_lines(rows)


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Ten readable columns (ragrepro.report.readable): the timed steps and the peak per dtype
    (stated above the table) are in the CSV."""
    view = [{"arch": r["arch"], "dtype": r["dtype"], "status": r["status"],
             "params (M)": r["params"] / 1e6,
             "window tok/s": r.get("window_tok_per_s"), "scored tok/s": r.get("scored_tok_per_s"),
             "TFLOP/s": r.get("achieved_tflops"), "% of peak": r.get("pct_peak"),
             "mean NLL": r.get("mean_nll"), "drift vs fp32": r.get("drift_nll_vs_fp32")}
            for r in rows]
    table = markdown_table(view)
    check_columns(table[0].strip("| ").split(" | "), "device benchmark table")
    return table


def rewrite_from_csv(md: Path) -> Path:
    """The committed page's table rewritten from its CSV (the lines around it, written when
    it was measured, are kept): `python -m benchmarks.device --from-csv PAGE.md`."""
    rows = read_rows(md.with_suffix(".csv"))
    md.write_text(replace_first_table(md.read_text(encoding="utf-8"), table_lines(rows)),
                  encoding="utf-8")
    return md


def write_outputs(rows: list[dict[str, Any]], info: dict[str, Any],
                  out_dir: Path | None = None) -> Path:
    from .common import write_csv

    out_dir = out_dir or results_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"device_{info['slug']}_{info['plan'].size}"
    write_csv(stem.with_suffix(".csv"), rows)
    title = ["# Device benchmark", "", ("Written by `python -m benchmarks.device` "
             "(`make bench-device`)."), ""]
    stem.with_suffix(".md").write_text("\n".join(title + summary_lines(rows, info)) + "\n")
    return stem.with_suffix(".md")


def checks(rows: list[dict[str, Any]], info: dict[str, Any]) -> list[tuple[str, bool, str]]:
    ok = [r for r in rows if r["status"].startswith("ok")]
    pct = [r["pct_peak"] for r in ok]
    drift = [r["drift_nll_vs_fp32"] for r in ok if r.get("drift_nll_vs_fp32") is not None]
    limit = 480 if info["plan"].size == "full" else info["plan"].budget_s
    return [(f"whole run within {limit:.0f} s", info["seconds"] <= limit,
             f"{info['seconds']:.0f} s"),
            ("% of peak within (0, 105]", bool(pct) and all(0 < p <= 105 for p in pct),
             f"{min(pct, default=0):.3g}-{max(pct, default=0):.3g}%"),
            ("drift finite", bool(drift) and all(math.isfinite(x) for x in drift),
             f"{len(drift)} cells")]


def run() -> BenchResult:
    """For `python -m benchmarks device` (benchmarks.suite)."""
    rows, info = run_device()
    write_outputs(rows, info)
    return BenchResult("device", rows, summary_lines(rows, info), checks(rows, info))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("auto", "full", "tiny"), default="auto")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--models", default=",".join(m[0] for m in MODELS))
    ap.add_argument("--attn", default="sdpa", help="attn_implementation: eager or sdpa")
    ap.add_argument("--budget-s", type=float, help="the whole run's time budget")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--threads", type=int, help="torch threads (a shared CPU: 1)")
    ap.add_argument("--from-csv", type=Path, metavar="PAGE.md",
                    help="rewrite a written page's table from the CSV beside it; measure nothing")
    args = ap.parse_args(argv)
    if args.from_csv:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
        log.info("wrote %s", rewrite_from_csv(args.from_csv))
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    overrides = {k: v for k, v in (("budget_s", args.budget_s), ("batch", args.batch),
                                   ("seq_len", args.seq_len)) if v is not None}
    rows, info = run_device(args.device, args.size, args.dtypes.split(","),
                            args.models.split(","), args.attn, **overrides)
    path = write_outputs(rows, info)
    for line in summary_lines(rows, info):
        log.info("%s", line)
    for target, met, detail in checks(rows, info):
        log.info("%s: %s (%s)", target, "met" if met else "MISSED", detail)
    log.info("wrote %s", path)


if __name__ == "__main__":
    main()
