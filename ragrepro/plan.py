"""`ragrepro plan [-m] experiment=... [overrides]`: a preflight per cell, without loading
weights: parameters (counted on the meta device from the architecture's sizes), weight
memory in the configured dtype, an activation estimate, GPU memory (detected or --gpu-mem)
and how many GPUs the cell needs, disk, the files it needs and whether they are present,
forward tokens and a time estimate from a stated throughput, and every index the cell needs
(dense FAISS index: flat vs IVF-PQ vs HNSW; BM25; method indexes such as RICHES's suffix
array) with its memory, disk and build time. The runner refuses a cell that cannot fit with
the same table (`check_fits`).

Methods add what only they know (their models, files, indexes and how much a cell
computes) through the `plan` hook of their profile (ragrepro/methods.py): for a cell whose
`_target_`s name a registered method's packages, the hook returns a `PlanExtras`. The core
never imports a method package and reads none of their settings."""
from __future__ import annotations

import argparse
import csv
import io
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hydra import initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from .configcheck import compose_cell, compose_checked
from .dtypes import row_dtype
from .errors import ConfigError
from .methods import (  # the hook records, importable from here as before
    BYTES,
    GB,
    TOKENS_PER_WORD,
    Decoding,
    IndexPlan,
    MethodProfile,
    ModelPlan,
    PlanExtras,
    Sizing,
    eval_examples,
    generic_sizing,
    profiles_of,
    registered,
)
from .models.archs import (
    ARCHS,
    count_parameters,
    hub_config,
    hub_model,
    matmul_parameters,
    model_dims,
)
from .models.lm import effective_dtype
from .paths import CONF_DIR
from .retrieval.dense import encoder_dim
from .retrieval.faiss_index import (
    REFINE_MIN_CANDIDATES,
    TYPES,
    IndexSpec,
    build_flops,
    flat_bytes,
    resolve_spec,
    spec_bytes,
)
from .sweep import sweep_cells

log = logging.getLogger(__name__)

USABLE = 0.9            # share of a GPU's memory a model may fill (allocator, CUDA context)
TFLOPS = 100.0          # assumed effective TFLOP/s per GPU for the time estimate (--tflops)
# Disk of files that are downloaded on first use (GB): pyserini's prebuilt BM25 index
# (index-wikipedia-dpr-20210120-d1b9e6: 9,177,942,656 bytes, pyserini's prebuilt_index_info).
PREBUILT_GB = {"wikipedia-dpr": 9_177_942_656 / GB}
# Corpora by name: (passages, words per passage incl. the title). wikipedia-dpr: DPR's
# 21,015,324 100-word passages (conf/corpus/wikipedia-dpr.yaml, pyserini's index info);
# wiki-vital: 9,828 leads, 777,566 words (counted).
CORPUS_SIZE = {"wikipedia-dpr": (21_015_324, 102.0), "wiki-vital": (9_828, 79.1)}
# Lucene (pyserini, positions + document vectors + raw text, as ragrepro builds it): 10.0
# bytes per word and 124k words/s per indexing thread, measured on wiki-vital (7,797,725
# bytes; 3.1 s with 2 threads, results/bench/retrieval.csv).
LUCENE_BYTES_PER_WORD = 10.0
LUCENE_WORDS_PER_S_PER_THREAD = 124_000
# HNSW builds on the CPU (FAISS has no GPU HNSW): this many GFLOP/s of the work that
# faiss_index.hnsw_build_flops counts, i.e. a 32-core node at the one-thread rate of
# results/retrieval/ann_recall.md (about 5 GFLOP/s, measured on a loaded 2-core machine; a
# 21M-node graph misses the cache more, so read the estimate as a lower bound).
CPU_INDEX_GFLOPS = 32 * 5.0
ENCODE_TOKENS_PER_WORD = 1.3  # BERT WordPiece tokens per English Wikipedia word (assumed)


# ---- the time model ---------------------------------------------------------------------------
# Prefill and perplexity scoring are compute-bound: 2 x params FLOPs a token at the device's
# effective FLOP/s. Decoding is memory-bound: every step reads every weight once for the whole
# batch x beam, plus the KV cache of every live sequence up to its position, at the device's
# memory bandwidth; a step takes the longer of that and its own FLOPs (a roofline), so a wide
# enough batch turns compute-bound again.
@dataclass(frozen=True)
class Device:
    """A device kind as the time model sees it: effective FLOP/s for compute-bound passes,
    memory bandwidth (bytes/s) for decoding, and where both figures come from."""

    name: str
    flops: float
    bandwidth: float
    source: str


# GPUs: datasheet memory bandwidths (named as such), FLOP/s the planner's stated effective
# TFLOPS (about a third of a dense bf16 peak, what large-model inference reaches).
DEVICES: dict[str, Device] = {
    "a100-80gb": Device("NVIDIA A100 80GB SXM", TFLOPS * 1e12, 2.039e12,
                        "bandwidth: NVIDIA A100 datasheet, 2,039 GB/s HBM2e (80GB SXM)"),
    "a100-40gb": Device("NVIDIA A100 40GB", TFLOPS * 1e12, 1.555e12,
                        "bandwidth: NVIDIA A100 datasheet, 1,555 GB/s HBM2 (40GB)"),
    "h100-sxm": Device("NVIDIA H100 SXM 80GB", TFLOPS * 1e12, 3.35e12,
                       "bandwidth: NVIDIA H100 datasheet, 3.35 TB/s HBM3 (SXM)"),
    "h200": Device("NVIDIA H200 141GB", TFLOPS * 1e12, 4.8e12,
                   "bandwidth: NVIDIA H200 datasheet, 4.8 TB/s HBM3e"),
}
DEFAULT_DEVICE = "a100-80gb"
# This machine's CPU: `python -m benchmarks.memory_bandwidth` (one thread), read from here.
CPU_FIGURES = Path("results") / "bench" / "memory_bandwidth.csv"
# Share of the measured matmul rate a transformer forward pass reaches on a CPU: 43-64% in the
# RALM throughput benchmark (results/bench/README.md, float32 production path); the middle.
CPU_MATMUL_SHARE = 0.5


def cpu_device(rows: Sequence[dict[str, str]], source: str = str(CPU_FIGURES)) -> Device:
    """The CPU device from memory_bandwidth rows: bandwidth = the `matvec` rate (a decoding
    step's access pattern: every weight read once), FLOP/s = CPU_MATMUL_SHARE x `matmul`."""
    rate = {r["kind"]: float(r["rate"]) for r in rows}
    if "matvec" not in rate or "matmul" not in rate:
        raise ConfigError(f"{source} has no matvec and matmul rows: run `python -m "
                          f"benchmarks.memory_bandwidth` on this machine first.")
    threads = next((r.get("threads") for r in rows if r["kind"] == "matvec"), "?")
    return Device(f"this CPU ({threads} thread)", CPU_MATMUL_SHARE * rate["matmul"] * 1e9,
                  rate["matvec"] * 1e9, f"measured: {source} (matvec bandwidth; "
                  f"{CPU_MATMUL_SHARE:.0%} of the matmul rate)")


def device_named(name: str, root: Path | None = None) -> Device:
    """A device kind by name: a DEVICES key, or `cpu` (this machine's measured figures)."""
    if name == "cpu":
        path = (root or Path(__file__).resolve().parents[1]) / CPU_FIGURES
        if not path.exists():
            raise ConfigError(f"--device cpu reads {CPU_FIGURES}, which is missing: run "
                              f"`python -m benchmarks.memory_bandwidth` first.")
        return cpu_device(list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))))
    if name not in DEVICES:
        raise ConfigError(f"Unknown device {name!r}: choose one of "
                          f"{', '.join([*DEVICES, 'cpu'])}.")
    return DEVICES[name]


def kv_bytes_per_token(layers: int, kv_dim: int, dtype_bytes: int) -> int:
    """Key and value vectors of one token in every layer: 2 x layers x kv_dim x bytes
    (kv_dim = key/value heads x head size; the hidden size without grouped-query attention)."""
    return 2 * layers * kv_dim * dtype_bytes


def compute_seconds(params: int, tokens: float, flops: float) -> float:
    """A compute-bound pass (prefill, perplexity scoring): 2 x params FLOPs per token."""
    return 2.0 * params * tokens / flops


def scoring_seconds(body: int, head: int, tokens: float, scored: float, flops: float) -> float:
    """A compute-bound pass that runs the layers (`body` parameters) at every one of `tokens`
    positions and the vocabulary head (`head` parameters) at `scored` of them only, as
    ragrepro.models.lm does when it scores a window's new tokens: 2 FLOPs a parameter."""
    return 2.0 * (body * tokens + head * scored) / flops


def lm_matmuls(m: ModelPlan) -> tuple[int, int]:
    """(body, head) parameters of a hub LM (ragrepro.models.archs.matmul_parameters); a model
    without architecture sizes counts every parameter at every position (head 0)."""
    if m.source not in ARCHS:
        return m.params, 0
    return matmul_parameters(m.source, hub_model(m.source).architecture)


def decode_step_seconds(weight_bytes: float, kv_bytes: float, params: int, sequences: int,
                        device: Device) -> float:
    """One decoding step of `sequences` (batch x beam) sequences: the weights read once for
    all of them plus `kv_bytes` of KV cache, at the bandwidth, or the step's 2 x params x
    sequences FLOPs, whichever takes longer."""
    return max((weight_bytes + kv_bytes) / device.bandwidth,
               2.0 * params * sequences / device.flops)


def decode_batch_seconds(weight_bytes: float, kv_per_token: float, params: int,
                         sequences: int, context: int, steps: int, kv_passes: int,
                         device: Device) -> float:
    """`steps` decoding steps of one batch of `sequences` sequences whose KV cache starts at
    `context` tokens and grows by one a step (step t reads context + t tokens of each)."""
    return sum(decode_step_seconds(weight_bytes, kv_passes * sequences * (context + t)
                                   * kv_per_token, params, sequences, device)
               for t in range(steps))


def decode_seconds(d: Decoding, weight_bytes: float, kv_per_token: float, params: int,
                   device: Device) -> float:
    """Every batch of a cell's decoding: full batches of d.batch prompts x d.beam hypotheses,
    and the remainder as one smaller batch."""
    full, rest = divmod(d.sequences, max(d.batch, 1))
    one = lambda n: decode_batch_seconds(weight_bytes, kv_per_token, params, n * d.beam,
                                         d.context, d.steps, d.kv_passes, device)
    return full * one(d.batch) + (one(rest) if rest else 0.0)


def generic_decoding(cfg: DictConfig) -> Decoding:
    """A cell no method sizes: 32 new tokens after one 160-token passage and a 64-token
    prompt per example, greedy, `batch_size` at a time (as generic_sizing counts them)."""
    return Decoding(eval_examples(cfg), 32, 160 + 64,
                    int(OmegaConf.select(cfg, "batch_size", default=None) or 1))


def host_peak_gb(base_gb: float, weight_gb: float, act_gb: float, index_gb: float = 0.0
                 ) -> float:
    """Peak resident memory of a CPU run: the process before the model (interpreter, torch,
    transformers, a JVM for BM25), the weights, the activations and the indexes in RAM."""
    return base_gb + weight_gb + act_gb + index_gb


@dataclass
class CellPlan:
    cell: str
    models: list[ModelPlan]
    act_gb: float
    gpu_gb: float | None
    gpus: int
    disk_gb: float
    files: list[tuple[str, str, bool]] = field(default_factory=list)
    forward_tokens: int = 0
    tok_per_s: float = 0.0
    indexes: list[IndexPlan] = field(default_factory=list)
    generated_tokens: int = 0  # of forward_tokens, decoded one step at a time
    decode_s: float = 0.0      # their memory-bound time (decode_seconds)
    prefill_s: float | None = None  # the rest's compute-bound time; None: at tok_per_s

    @property
    def total_gb(self) -> float:
        return sum(m.weight_gb for m in self.models) + self.act_gb

    @property
    def gpus_needed(self) -> int | None:
        if not self.gpu_gb:
            return None
        return max(1, math.ceil(self.total_gb / (self.gpu_gb * USABLE)))

    @property
    def fits(self) -> bool | None:
        need = self.gpus_needed
        return None if need is None else need <= self.gpus

    @property
    def compute_s(self) -> float:
        """Prefill and scoring: the tokens not decoded step by step (their FLOPs, or at a
        given tok_per_s)."""
        if self.prefill_s is not None:
            return self.prefill_s
        rest = self.forward_tokens - self.generated_tokens
        return rest / self.tok_per_s if self.tok_per_s else 0.0

    @property
    def hours(self) -> float:
        return (self.compute_s + self.decode_s) / 3600


def activation_gb(batch: int, seq: int, hidden: int, layers: int, vocab: int,
                  dtype: str) -> float:
    """Key/value cache (2 x layers x seq x hidden), a few live hidden states per layer
    boundary (4 x seq x hidden) and float32 logits (seq x vocab), per sequence in the batch."""
    b = BYTES[dtype]
    per_seq = 2 * layers * seq * hidden * b + 4 * seq * hidden * b + seq * vocab * 4
    return batch * per_seq / GB


def kv_dim_of(source: str) -> int:
    """Key/value width of a hub model: key/value heads x head size (the hidden size when the
    config has no grouped-query attention)."""
    c = hub_config(source)
    hidden = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None) or c.d_model
    heads = getattr(c, "num_attention_heads", None) or getattr(c, "n_head", None) \
        or getattr(c, "num_heads", None)
    kv_heads = getattr(c, "num_key_value_heads", None) or heads
    head_dim = getattr(c, "head_dim", None) or (int(hidden) // int(heads) if heads else hidden)
    return int(kv_heads) * int(head_dim) if heads else int(hidden)


def tokens_per_second(params: int, tflops: float = TFLOPS) -> float:
    """Forward tokens/s at `tflops` effective: a forward pass costs ~2 x params FLOPs/token."""
    return tflops * 1e12 / (2 * max(params, 1))


def detect_gpus() -> tuple[float | None, int]:
    """(memory of one GPU in GB, count), or (None, 0) without CUDA."""
    try:
        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            return torch.cuda.get_device_properties(0).total_memory / GB, n
    except Exception:
        log.debug("GPU detection failed", exc_info=True)
    return None, 0


def forward_tokens(cfg: DictConfig) -> int:
    """Tokens through the main model, as the cell's method sizes them (generic otherwise)."""
    return (method_extras(cfg).sizing or generic_sizing(cfg)).forward_tokens


def _model(role: str, source: str | None, dtype: str) -> ModelPlan | None:
    if not source or source not in ARCHS:
        return None  # embedded / local models are small or unknown: not sized
    dims = model_dims(source)
    params = count_parameters(source, hub_model(source).architecture)
    return ModelPlan(role, source, params, dtype if dtype in BYTES else "float32", **dims)


def hub_model_plan(role: str, source: str | None, dtype: str) -> ModelPlan | None:
    """A hub model sized from its architecture (None: embedded/local/unknown, not sized)."""
    return _model(role, source, dtype)


def models_of(cfg: DictConfig) -> list[ModelPlan]:
    """The hub models a cell loads: the LM (in its effective dtype) and the retriever's
    encoders (methods add theirs through their plan hook)."""
    sel = lambda k: OmegaConf.select(cfg, k, default=None)
    found = [_model("lm", sel("model.source"), str(row_dtype(cfg)))]
    for key in ("retriever.encoder.source", "retriever.encoder.doc_source"):
        found.append(_model("retriever", sel(key), str(sel("retriever.dtype") or "float32")))
    return [m for m in found if m is not None]


def method_extras(cfg: DictConfig, tflops: float = TFLOPS,
                  profiles: Sequence[MethodProfile] | None = None) -> PlanExtras:
    """What the plan hooks of the cell's methods add (profiles in name order; the first
    sizing given wins)."""
    out = PlanExtras()
    for profile in profiles_of(cfg, profiles):
        if profile.planner.plan is None:
            continue
        extra = profile.planner.plan(cfg, tflops)
        out.models += extra.models
        out.files += extra.files
        out.indexes += extra.indexes
        out.uses_retriever = out.uses_retriever and extra.uses_retriever
        out.sizing = out.sizing or extra.sizing
        out.decoding = out.decoding or extra.decoding
    return out


# ---- indexes ---------------------------------------------------------------------------
def corpus_size(cfg: DictConfig) -> tuple[int, float] | None:
    """(passages, words per passage) of the cell's corpus, when known by name."""
    return CORPUS_SIZE.get(str(OmegaConf.select(cfg, "corpus.name", default=None)))


def encode_hours(passages: int, tokens: float, params: int, tflops: float) -> float:
    """Encoding every passage once: 2 x params FLOPs per token at `tflops`."""
    return 2.0 * params * tokens * passages / (tflops * 1e12) / 3600


def dense_index_plans(cfg: DictConfig, tflops: float = TFLOPS) -> list[IndexPlan]:
    """The cell's dense FAISS index, the other two types and the `type: auto` default beside
    it, and the embeddings."""
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    size = corpus_size(cfg)
    if not str(sel("retriever._target_") or "").endswith("DenseRetriever") or size is None:
        return []
    n, words = size
    source = str(sel("retriever.encoder.doc_source") or sel("retriever.encoder.source"))
    dim = encoder_dim(source)
    if dim is None:
        return []
    raw = OmegaConf.to_container(sel("retriever.faiss"), resolve=True) \
        if sel("retriever.faiss") is not None else {}
    chosen = str(raw.get("type", "flat"))
    enc = _model("retriever", source, str(sel("retriever.dtype") or "float32"))
    tokens = min(words * ENCODE_TOKENS_PER_WORD, int(sel("retriever.max_length") or 256))
    hours = encode_hours(n, tokens, enc.params, tflops) if enc else 0.0
    vectors = n * dim * 4 / GB
    out = [IndexPlan(f"dense embeddings ({source})", f"{n:,} x {dim} float32", 0.0, vectors,
                     0.0, hours, f"encoding {tokens:.0f} tokens/passage at {tflops:.0f} TFLOP/s; "
                     f"kept as .npy shards")]
    shown = []
    for kind in (chosen, *[t for t in TYPES if t != chosen], "auto"):
        try:
            spec = resolve_spec(raw if kind == chosen else {"type": kind}, n, dim)
        except ConfigError:
            if kind == chosen:
                raise  # the cell's own index: its refusal is the user's to see
            continue  # an alternative this corpus cannot train: not shown
        if spec.label() in shown:
            continue  # e.g. type=auto resolving to the flat index already listed
        shown.append(spec.label())
        role = "chosen" if kind == chosen else \
            "the type=auto default" if kind == "auto" else "alternative"
        out.append(faiss_index_plan(spec, n, dim, tflops, role, chosen=kind == chosen))
    return out


def faiss_index_plan(spec: IndexSpec, n: int, dim: int, tflops: float, role: str,
                     chosen: bool) -> IndexPlan:
    """One FAISS index: RAM while searching (with refine: the compressed codes only; the
    float vectors it re-scores stay in the embedding files, memory-mapped), disk, build."""
    gb = spec_bytes(spec, n, dim) / GB
    train = int(spec.train_size or 0) * dim * 4 / GB
    rate = CPU_INDEX_GFLOPS * 1e9 if spec.type == "hnsw" else tflops * 1e12
    where = "CPU" if spec.type == "hnsw" else "GPU FAISS"
    how = "copied from the embeddings" if spec.type == "flat" else where
    if spec.refine:
        how += (f"; re-scores {spec.refine} x k candidates (>= {REFINE_MIN_CANDIDATES}) "
                f"exactly from the {flat_bytes(n, dim) / GB:.1f} GB of embeddings, "
                f"memory-mapped (disk and page cache, not RAM)")
    # flat is rebuilt in memory from the embeddings (no file unless index_out asks);
    # approximate indexes are cached beside the embeddings
    disk = 0.0 if spec.type == "flat" else gb
    return IndexPlan(f"dense FAISS {spec.label()}", f"{n:,} x {dim}", gb, disk, gb + train,
                     build_flops(spec, n, dim) / rate / 3600, f"{how}; {role}", chosen=chosen)


def lucene_gb(words: float) -> float:
    """Lucene index with positions, document vectors and raw text (as ragrepro builds it)."""
    return words * LUCENE_BYTES_PER_WORD / GB


def bm25_index_plans(cfg: DictConfig) -> list[IndexPlan]:
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    if not str(sel("retriever._target_") or "").endswith("BM25Retriever"):
        return []
    index, size = sel("retriever.index"), corpus_size(cfg)
    if index in PREBUILT_GB:
        gb = PREBUILT_GB[str(index)]
        entries = f"{size[0]:,} passages" if size else "prebuilt"
        return [IndexPlan(f"BM25 pyserini prebuilt {index}", entries, 0.0, gb, 0.0, 0.0,
                          "downloaded once (tar.gz size); memory-mapped: RAM is page cache")]
    if size is None or index not in (None, "null"):
        return []
    n, words = size
    threads = int(sel("retriever.threads") or 1)
    hours = n * words / (LUCENE_WORDS_PER_S_PER_THREAD * threads) / 3600
    return [IndexPlan("BM25 Lucene (built once, cached)", f"{n:,} passages", 0.0,
                      lucene_gb(n * words), 0.0, hours,
                      f"{LUCENE_BYTES_PER_WORD:.0f} B/word, {threads} threads; memory-mapped")]


def needed_files(cfg: DictConfig) -> list[tuple[str, str, bool]]:
    """(what, path or name, present) for each local file or index the cell reads."""
    sel = lambda k: OmegaConf.select(cfg, k, default=None)
    out: list[tuple[str, str, bool]] = []
    if sel("dataset.path"):
        out.append(("dataset", str(sel("dataset.path")),
                    Path(str(sel("dataset.path"))).expanduser().exists()))
    dense = str(sel("retriever._target_") or "").endswith("DenseRetriever")
    if sel("corpus.name") == "wikipedia-dpr" and (dense or not sel("retriever.index")):
        path = sel("corpus.path")
        out.append(("corpus psgs_w100.tsv", str(path),
                    bool(path) and Path(str(path)).expanduser().exists()))
    index = sel("retriever.index")
    if index in PREBUILT_GB:
        out.append(("pyserini prebuilt index", f"{index}, downloaded on first use", True))
    return out


def cell_decoding(cfg: DictConfig, extras: PlanExtras) -> Decoding | None:
    """What the cell generates: its method's decoding; the generic one (32 new tokens an
    example) when no method sizes the cell; None for a method's scoring-only cell."""
    if extras.decoding is not None:
        return extras.decoding
    return generic_decoding(cfg) if extras.sizing is None else None


def plan_cell(cfg: DictConfig, cell: str, gpu_gb: float | None, gpus: int,
              tok_per_s: float | None = None, tflops: float = TFLOPS,
              device: Device | None = None) -> CellPlan:
    device = device or DEVICES[DEFAULT_DEVICE]
    extras = method_extras(cfg, tflops)
    models = models_of(cfg) + extras.models
    lm = next((m for m in models if m.role == "lm"), None)
    sel = lambda k, d=None: OmegaConf.select(cfg, k, default=d)
    size = extras.sizing or generic_sizing(cfg)
    act = activation_gb(size.batch, size.seq_len, lm.hidden, lm.layers, lm.vocab,
                        lm.dtype) if lm else 0.0
    ckpt = effective_dtype("checkpoint", sel("model.checkpoint_dtype") or "float32")
    disk = sum(m.params * BYTES.get(ckpt if m.role == "lm" else "float32", 4) / GB
               for m in models)
    indexes = (dense_index_plans(cfg, tflops) + bm25_index_plans(cfg)
               if extras.uses_retriever else []) + extras.indexes
    disk += sum(i.disk_gb for i in indexes if i.chosen)
    speed = tok_per_s or (tokens_per_second(lm.params, device.flops / 1e12) if lm else 0.0)
    decoding = cell_decoding(cfg, extras) if lm else None
    generated, decode_s = 0, 0.0
    if decoding is not None and lm is not None:
        generated = min(decoding.generated_tokens, size.forward_tokens)
        kv = kv_bytes_per_token(lm.layers, kv_dim_of(lm.source), BYTES[lm.dtype])
        decode_s = decode_seconds(decoding, lm.params * BYTES[lm.dtype], kv, lm.params, device)
    prefill_s = None if tok_per_s or lm is None else prefill_seconds(lm, size, generated, device)
    return CellPlan(cell, models, act, gpu_gb, gpus, disk, needed_files(cfg) + extras.files,
                    size.forward_tokens, speed, indexes, generated, decode_s, prefill_s)


def prefill_seconds(lm: ModelPlan, size: Sizing, generated: int, device: Device) -> float:
    """The forward tokens not decoded step by step, compute-bound: the layers at each, the
    vocabulary head where the sizing says logits are computed (every such token otherwise)."""
    rest = size.forward_tokens - generated
    scored = rest if size.scored_tokens is None else min(size.scored_tokens, rest)
    body, head = lm_matmuls(lm)
    return scoring_seconds(body, head, rest, scored, device.flops)


def _num(x: float) -> str:
    return f"{x:,.1f}"


def render(plans: list[CellPlan], tok_note: str,
           device: Device | None = None,
           profiles: Sequence[MethodProfile] | None = None) -> str:
    """A markdown table, one row per cell, then the files each cell needs."""
    device = device or DEVICES[DEFAULT_DEVICE]
    head = ("| cell | models (params, dtype) | weights GB | activations GB | total GB | "
            "GPU GB | GPUs needed | fits | disk GB | forward tokens | est. hours |")
    lines = [head, "|" + "---|" * 11]
    for p in plans:
        models = "; ".join(f"{m.role} {m.source} ({m.params / 1e9:.2f}B, {m.dtype})"
                           for m in p.models) or "(no hub model)"
        fits = {None: "unknown (no GPU: --gpu-mem)", True: "yes", False: "NO"}[p.fits]
        lines.append(f"| {p.cell or '(default)'} | {models} | "
                     f"{_num(sum(m.weight_gb for m in p.models))} | {_num(p.act_gb)} | "
                     f"{_num(p.total_gb)} | {_num(p.gpu_gb) if p.gpu_gb else '-'} | "
                     f"{p.gpus_needed or '-'} of {p.gpus} | {fits} | {_num(p.disk_gb)} | "
                     f"{p.forward_tokens:,} | {p.hours:.2f}{decoding_note(p)} |")
    lines += render_indexes(plans)
    files = sorted({f for p in plans for f in p.files})
    if files:
        lines += ["", "Files: " + "; ".join(f"{w} {path} ({'ok' if ok else 'MISSING'})"
                                            for w, path, ok in files)]
    lines += ["", (f"Assumptions: {USABLE:.0%} of each GPU usable; activations = KV cache + "
                  f"4 hidden states per layer + float32 logits; {tok_note}; decoding "
                  f"memory-bound on {device.name}: each step reads the weights once for the "
                  f"batch x beam plus every sequence's KV cache, at "
                  f"{device.bandwidth / 1e9:,.0f} GB/s ({device.source}), or takes its "
                  f"FLOPs if longer; WikiText-103 "
                  f"{TOKENS_PER_WORD} tokens/word; {untimed_training(profiles)}"
                  f"indexes: FAISS work at that TFLOP/s on a GPU (HNSW on a CPU at "
                  f"{CPU_INDEX_GFLOPS:.0f} GFLOP/s), encoders {ENCODE_TOKENS_PER_WORD} "
                  f"tokens/word (docs/performance.md, index sizing).")]
    return "\n".join(lines)


def decoding_note(p: CellPlan) -> str:
    """' (decoding 1.62)': the memory-bound share of a cell's hours, when it decodes."""
    return f" (decoding {p.decode_s / 3600:.2f})" if p.decode_s else ""


def untimed_training(profiles: Sequence[MethodProfile] | None = None) -> str:
    """'training (A, B) not in the time; ' for the methods that train, or ''."""
    chosen = registered() if profiles is None else profiles
    words = [p.planner.untimed_training for p in chosen if p.planner.untimed_training]
    return f"training ({', '.join(words)}) not in the time; " if words else ""


def render_indexes(plans: list[CellPlan]) -> list[str]:
    """One row per distinct index, with the cells that need it."""
    users: dict[IndexPlan, list[str]] = {}
    for p in plans:
        for i in p.indexes:
            users.setdefault(i, []).append(p.cell or "(default)")
    if not users:
        return []
    title = ("Indexes (alternative = another FAISS type for the same vectors, not what the "
             "cell runs):")
    head = ("| index | entries | used by | RAM GB | disk GB | build peak RAM GB | build hours "
            "| note |")
    lines = ["", title, "", head, "|" + "---|" * 8]
    for i, cells in users.items():
        who = "; ".join(cells) if len(cells) <= 2 else f"{len(cells)} of {len(plans)} cells"
        lines.append(f"| {i.what} | {i.entries} | {who} | {_num(i.ram_gb)} | {_num(i.disk_gb)} "
                     f"| {_num(i.build_ram_gb)} | {i.build_hours:.3g} | {i.note} |")
    return lines


def _ram_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GB


def check_fits(cfg: DictConfig) -> None:
    """Refuse, before any download, a cell whose models cannot fit the GPUs here (or this
    machine's memory without a GPU), or that needs several GPUs without device_map."""
    gpu_gb, n = detect_gpus()
    where = "GPU"
    if gpu_gb is None:
        gpu_gb, n, where = _ram_gb(), 1, "CPU memory"
    plan = plan_cell(cfg, "", gpu_gb, n)
    if not plan.models:
        return
    need = plan.gpus_needed or 1
    table = render([plan], "time at the default throughput", profiles=profiles_of(cfg))
    if not plan.fits:
        have = (f"this machine has no GPU and {gpu_gb:.0f} GB of memory" if where != "GPU"
                else f"it needs {need} x {gpu_gb:.0f} GB GPUs and {n} are here")
        raise ConfigError(f"This cell needs about {plan.total_gb:.0f} GB but {have}: run it "
                          f"where it fits (`ragrepro plan` sizes it), or choose a smaller "
                          f"model or a lower dtype.\n{table}")
    if need > 1 and not OmegaConf.select(cfg, "model.device_map", default=None):
        raise ConfigError(f"This cell needs {need} GPUs: set model.device_map=auto to spread "
                          f"the model over them (model parallelism).\n{table}")
    log.info("Preflight: %.1f GB on %d of %d x %.0f GB %s", plan.total_gb, need, n, gpu_gb,
             where)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="ragrepro plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--multirun", action="store_true", help="every cell of the sweep")
    ap.add_argument("--gpu-mem", type=float, default=None, help="GB per GPU (default: detect)")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs available (default: detect)")
    ap.add_argument("--tok-per-s", type=float, default=None,
                    help=f"assumed prefill/scoring tokens/s (default: {TFLOPS:.0f} TFLOP/s per "
                         f"GPU); decoding stays memory-bound at the device's bandwidth")
    ap.add_argument("--device", default=DEFAULT_DEVICE,
                    help=f"device kind of the time model: {', '.join(DEVICES)} (datasheet "
                         f"bandwidths) or cpu (this machine, measured by "
                         f"benchmarks.memory_bandwidth); default {DEFAULT_DEVICE}")
    ap.add_argument("overrides", nargs="*", help="experiment=... and other overrides")
    args = ap.parse_args(argv)
    sys.stdout.write(plan_text(args.overrides, args.multirun, args.gpu_mem, args.gpus,
                               args.tok_per_s, device_named(args.device)) + "\n")


def plan_text(overrides: list[str], multirun: bool, gpu_mem: float | None = None,
              gpus: int | None = None, tok_per_s: float | None = None,
              device: Device | None = None) -> str:
    device = device or DEVICES[DEFAULT_DEVICE]
    detected, count = detect_gpus()
    gpu_gb, n = gpu_mem or detected, gpus if gpus is not None else max(count, 1)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cells: list[list[str]] = [[]]
        if multirun:
            full = compose_checked(overrides, return_hydra_config=True)
            params = OmegaConf.select(full, "hydra.sweeper.params", default=None)
            cells = sweep_cells(OmegaConf.to_container(params) if params is not None else None)
        # each cell checked as its run would be: a value the run refuses is not planned
        cfgs = [compose_cell([*overrides, *c]) for c in cells]
        plans = [plan_cell(cfg, " ".join(c), gpu_gb, n, tok_per_s, device=device)
                 for cfg, c in zip(cfgs, cells)]
    # the note names the training of the planned cells' methods only, not of every method
    planned = [p for p in registered() if any(p in profiles_of(cfg) for cfg in cfgs)]
    note = (f"prefill and scoring at {tok_per_s:,.0f} tokens/s (given)" if tok_per_s else
            f"prefill and scoring compute-bound at {device.flops / 1e12:.3g} TFLOP/s: "
            f"2 FLOPs a token for each parameter of the LM's layers, and for each of its "
            f"vocabulary head only where logits are computed (language modelling: the scored "
            f"tokens), one device's worth (model parallelism with device_map adds memory, "
            f"not speed)")
    source = "given" if gpu_mem else ("detected" if detected else "none detected")
    return f"GPU memory: {_num(gpu_gb) if gpu_gb else '-'} GB x {n} ({source})\n\n" + \
        render(plans, note, device, planned)
