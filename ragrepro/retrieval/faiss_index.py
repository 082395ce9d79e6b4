"""FAISS index types for dense retrieval: `retriever.faiss` in conf/retriever/<dense>.yaml.

- `flat`: exact inner product over float32 vectors (4 d bytes per passage; 64 GB for DPR's
  21M 768-d passages). The default, and the reference the approximate types are measured
  against (results/retrieval/ann_recall.md).
- `ivfpq`: an inverted file of `nlist` lists over a k-means coarse quantizer, each vector
  stored as `m` product-quantizer codes of `nbits` bits; `nprobe` lists are searched.
- `hnsw`: a navigable small-world graph (`hnsw_m` links per node) over the float32 vectors;
  `ef_construction` / `ef_search` are the candidate lists when building / searching.

`auto` values scale with the corpus size N and the vector size d (`resolve_spec`). GPU FAISS
(the `gpu` extra) is used when it is installed and a GPU is visible (`use_gpu`); FAISS has no
GPU HNSW. The size and build-cost formulas below are pure so `ragrepro plan` can size an
index without building it; tests check them against FAISS's own serialised sizes.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError

log = logging.getLogger(__name__)

TYPES = ("flat", "ivfpq", "hnsw")
TYPE_KEYS = {"flat": (), "ivfpq": ("nlist", "m", "nbits", "nprobe", "train_size"),
             "hnsw": ("hnsw_m", "ef_construction", "ef_search")}
SEARCH_KEYS = ("nprobe", "ef_search")
KNOWN_KEYS = ("type", "gpu", *TYPE_KEYS["ivfpq"], *TYPE_KEYS["hnsw"])
# FAISS's k-means warns below 39 training points per centroid: fewer leave lists badly placed.
MIN_POINTS_PER_CENTROID = 39
TRAIN_POINTS_PER_CENTROID = 64  # the auto training sample (FAISS suggests 30 to 256 per centroid)
KMEANS_ITERS = 25               # faiss.ClusteringParameters().niter
DEFAULTS = {"nbits": 8, "hnsw_m": 32, "ef_construction": 80, "ef_search": 128}


@dataclass(frozen=True)
class IndexSpec:
    """A resolved index choice: every `auto` replaced by a number for this corpus."""

    type: str = "flat"
    nlist: int | None = None
    m: int | None = None
    nbits: int | None = None
    nprobe: int | None = None
    train_size: int | None = None
    hnsw_m: int | None = None
    ef_construction: int | None = None
    ef_search: int | None = None
    gpu: Any = "auto"  # how to choose the device; not a parameter of the index itself

    def params(self) -> dict[str, Any]:
        """The type and its own parameters: the index's cache key and its row label."""
        d = asdict(self)
        return {"type": self.type, **{k: d[k] for k in TYPE_KEYS[self.type]}}

    def build_params(self) -> dict[str, Any]:
        """The parameters that change the built index (not nprobe / ef_search, which are
        chosen per search): the key of a cached index file."""
        return {k: v for k, v in self.params().items() if k not in SEARCH_KEYS}

    def label(self) -> str:
        """e.g. 'ivfpq(nlist=252,m=48,nbits=8,nprobe=8,train_size=9828)'."""
        p = self.params()
        inner = ",".join(f"{k}={v}" for k, v in p.items() if k != "type")
        return f"{self.type}({inner})" if inner else self.type


def auto_nlist(n: int) -> int:
    """4 sqrt(N) lists (FAISS's guideline is 4 to 16 sqrt(N)), but never fewer than 39
    training points per list: at most N // 39."""
    return max(1, min(round(4 * math.sqrt(n)), n // MIN_POINTS_PER_CENTROID))


def auto_pq_m(dim: int) -> int:
    """d / 8 sub-vectors (8 dims each; 48 bytes for 384-d, 96 for 768-d), or the largest
    divisor of d below that when 8 does not divide d (PQ needs m | d)."""
    target = max(1, dim // 8)
    return next(m for m in range(target, 0, -1) if dim % m == 0)


def auto_nprobe(nlist: int) -> int:
    """1/64 of the lists, at least 8 (all of them when there are fewer)."""
    return min(nlist, max(8, nlist // 64))


def auto_train_size(n: int, nlist: int, nbits: int) -> int:
    """64 points per centroid of the larger of the two k-means (coarse lists, PQ codebook)."""
    return min(n, TRAIN_POINTS_PER_CENTROID * max(nlist, 2 ** nbits))


def _int(raw: Mapping[str, Any], key: str, lo: int = 1, hi: int | None = None) -> Any:
    """raw[key] as a checked integer; missing/null/auto: the key's default, else 'auto'."""
    value = raw.get(key)
    if value is None or value == "auto":
        return DEFAULTS.get(key, "auto")
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= lo \
        and (hi is None or value <= hi)
    if not ok:
        bound = f"an integer from {lo} to {hi}" if hi else f"an integer >= {lo}"
        raise ConfigError(f"retriever.faiss.{key}={value!r}: use {bound} or auto.")
    return value


def resolve_spec(raw: Mapping[str, Any] | None, n: int, dim: int | None,
                 corpus: str = "the corpus") -> IndexSpec:
    """The index for N vectors of `dim` dimensions (dim None: m stays unresolved, which only
    matters for ivfpq with m=auto). Refuses what FAISS could not train well."""
    raw = dict(raw or {})
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"Unknown retriever.faiss key(s) {unknown}; known: {list(KNOWN_KEYS)}.")
    kind = raw.get("type", "flat")
    if kind not in TYPES:
        raise ConfigError(f"retriever.faiss.type={kind!r}; use one of {list(TYPES)}.")
    gpu = raw.get("gpu", "auto")
    if gpu not in ("auto", True, False):
        raise ConfigError(f"retriever.faiss.gpu={gpu!r}: use auto, true or false.")
    if kind == "hnsw":
        return IndexSpec("hnsw", hnsw_m=_int(raw, "hnsw_m", lo=2),
                         ef_construction=_int(raw, "ef_construction"),
                         ef_search=_int(raw, "ef_search"), gpu=gpu)
    if kind == "flat":
        return IndexSpec("flat", gpu=gpu)
    return _resolve_ivfpq(raw, n, dim, corpus, gpu)


def _resolve_ivfpq(raw: Mapping[str, Any], n: int, dim: int | None, corpus: str,
                   gpu: Any) -> IndexSpec:
    if n < MIN_POINTS_PER_CENTROID:
        raise ConfigError(f"retriever.faiss.type=ivfpq: {corpus} has {n} passages, too few to "
                          f"train even one inverted list ({MIN_POINTS_PER_CENTROID} needed); "
                          f"use retriever.faiss.type=flat.")
    nlist = _int(raw, "nlist")
    nlist = auto_nlist(n) if nlist == "auto" else nlist
    if n < MIN_POINTS_PER_CENTROID * nlist:
        raise ConfigError(f"retriever.faiss.nlist={nlist} needs at least "
                          f"{MIN_POINTS_PER_CENTROID * nlist:,} training vectors "
                          f"({MIN_POINTS_PER_CENTROID} per list) but {corpus} has {n:,} "
                          f"passages: use nlist <= {n // MIN_POINTS_PER_CENTROID} (or "
                          f"nlist=auto), or retriever.faiss.type=flat.")
    nbits = _int(raw, "nbits", hi=16)
    if n < 2 ** nbits:
        raise ConfigError(f"retriever.faiss.nbits={nbits}: a {2 ** nbits}-centroid PQ codebook "
                          f"cannot be trained on {corpus}'s {n} passages; lower nbits or use "
                          f"type=flat.")
    m = _int(raw, "m")
    if m == "auto" and dim is not None:
        m = auto_pq_m(dim)
    if isinstance(m, int) and dim is not None and dim % m:
        raise ConfigError(f"retriever.faiss.m={m} must divide the vector size {dim}; divisors "
                          f"near it: {[x for x in range(max(1, m - 8), m + 9) if dim % x == 0]}.")
    nprobe = _int(raw, "nprobe")
    nprobe = auto_nprobe(nlist) if nprobe == "auto" else nprobe
    if nprobe > nlist:
        raise ConfigError(f"retriever.faiss.nprobe={nprobe} is more than nlist={nlist} lists.")
    train = _int(raw, "train_size")
    train = auto_train_size(n, nlist, nbits) if train == "auto" else train
    if not MIN_POINTS_PER_CENTROID * nlist <= train <= n:
        raise ConfigError(f"retriever.faiss.train_size={train}: use a number from "
                          f"{MIN_POINTS_PER_CENTROID * nlist} ({MIN_POINTS_PER_CENTROID} per "
                          f"list) to {n} (the corpus size), or auto.")
    return IndexSpec("ivfpq", nlist=nlist, m=m, nbits=nbits, nprobe=nprobe, train_size=train,
                     gpu=gpu)


# ---- sizes (bytes) and build costs (FLOPs): pure formulas, for `ragrepro plan` -------------
def flat_bytes(n: int, dim: int) -> int:
    """n float32 vectors."""
    return 4 * n * dim


def ivfpq_bytes(n: int, dim: int, nlist: int, m: int, nbits: int) -> int:
    """Per vector its PQ code (m x nbits bits) and its int64 id in the inverted lists; plus
    the coarse centroids (nlist x d float32) and the PQ codebooks (2^nbits x d float32)."""
    return n * (math.ceil(m * nbits / 8) + 8) + 4 * dim * (nlist + 2 ** nbits)


def hnsw_links_per_node(hnsw_m: int) -> float:
    """Expected neighbour slots per node: 2M on level 0 plus M per upper level; FAISS puts a
    node on l upper levels with probability M^-l (1 - 1/M), so M / (M - 1) upper slots."""
    return 2 * hnsw_m + hnsw_m / (hnsw_m - 1)


def hnsw_bytes(n: int, dim: int, hnsw_m: int) -> float:
    """The float32 vectors, int32 neighbour slots, an int64 offset and an int32 level per node."""
    return n * (4 * dim + 4 * hnsw_links_per_node(hnsw_m) + 8 + 4)


def spec_bytes(spec: IndexSpec, n: int, dim: int) -> float:
    if spec.type == "ivfpq":
        m = spec.m if isinstance(spec.m, int) else auto_pq_m(dim)
        return ivfpq_bytes(n, dim, int(spec.nlist), m, int(spec.nbits))
    if spec.type == "hnsw":
        return hnsw_bytes(n, dim, int(spec.hnsw_m))
    return flat_bytes(n, dim)


def kmeans_flops(points: int, centroids: int, dim: int, iters: int = KMEANS_ITERS) -> float:
    """Distances of every point to every centroid (2 d FLOPs each), per iteration."""
    return 2.0 * points * centroids * dim * iters


def ivfpq_build_flops(n: int, dim: int, nlist: int, nbits: int, train_size: int) -> float:
    """Coarse k-means plus the m sub-space k-means (2^nbits centroids over d/m dims each, d in
    all) on the training sample, then assigning and encoding all n vectors."""
    return (kmeans_flops(train_size, nlist, dim) + kmeans_flops(train_size, 2 ** nbits, dim)
            + 2.0 * n * dim * (nlist + 2 ** nbits))


def hnsw_build_flops(n: int, dim: int, ef_construction: int, hnsw_m: int) -> float:
    """Each insertion explores about ef_construction candidates with up to 2M neighbours each
    (an upper bound: revisits are skipped), 2 d FLOPs per distance: 4 d M ef per vector.
    FAISS has no GPU HNSW; benchmarks/ann_recall.py reports the rate this reaches on a CPU."""
    return 4.0 * n * dim * ef_construction * hnsw_m


def build_flops(spec: IndexSpec, n: int, dim: int) -> float:
    """Work to build the index from the vectors (flat: a copy, counted as none)."""
    if spec.type == "ivfpq":
        return ivfpq_build_flops(n, dim, int(spec.nlist), int(spec.nbits), int(spec.train_size))
    if spec.type == "hnsw":
        return hnsw_build_flops(n, dim, int(spec.ef_construction), int(spec.hnsw_m))
    return 0.0


# ---- device -------------------------------------------------------------------------------
def gpu_faiss() -> tuple[bool, int]:
    """(this FAISS build has GPU support, GPUs it sees)."""
    import faiss  # deferred: faiss (native library; the spec and plan functions need none)

    if not hasattr(faiss, "StandardGpuResources"):
        return False, 0
    return True, int(faiss.get_num_gpus())


def use_gpu(setting: Any, has_gpu_faiss: bool, n_gpus: int, index_type: str) -> bool:
    """Whether to build and search on the GPU. auto: when GPU FAISS is installed and sees a
    GPU (never for hnsw, which FAISS runs on the CPU only); true: required."""
    available = has_gpu_faiss and n_gpus > 0
    if setting is True:
        if index_type == "hnsw":
            raise ConfigError("retriever.faiss.gpu=true with type=hnsw: FAISS has no GPU HNSW; "
                              "use gpu=auto (CPU) or type=ivfpq / flat on the GPU.")
        if not available:
            why = "no GPU is visible" if has_gpu_faiss else "this FAISS is the CPU build"
            raise ConfigError(f"retriever.faiss.gpu=true but {why}: install GPU FAISS (the "
                              f"`gpu` extra, docs/retrieval.md) on a GPU machine, or set "
                              f"gpu=auto.")
        return True
    return setting == "auto" and available and index_type != "hnsw"


def to_gpu(index: Any, spec: IndexSpec, n_gpus: int) -> Any:
    """A GPU copy of a CPU index: sharded over all GPUs when there are several (a 64 GB flat
    index does not fit one 40 GB card), with float16 lookup tables for PQ codes of more than
    48 bytes (GPU IVFPQ needs them there)."""
    import faiss  # deferred: faiss (native library; the spec and plan functions need none)

    float16 = spec.type == "ivfpq" and int(spec.m or 0) > 48
    if n_gpus > 1:
        co = faiss.GpuMultipleClonerOptions()
        co.shard, co.useFloat16 = True, float16
        return faiss.index_cpu_to_all_gpus(index, co=co, ngpu=n_gpus)
    co = faiss.GpuClonerOptions()
    co.useFloat16 = float16
    res = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(res, 0, index, co)  # FAISS keeps `res` alive with it


def to_cpu(index: Any) -> Any:
    import faiss  # deferred: faiss (native library; the spec and plan functions need none)

    return faiss.index_gpu_to_cpu(index) if "Gpu" in type(index).__name__ else index


def empty_index(spec: IndexSpec, dim: int) -> Any:
    """An untrained CPU index of the spec's type (inner product)."""
    import faiss  # deferred: faiss (native library; the spec and plan functions need none)

    if spec.type == "flat":
        return faiss.IndexFlatIP(dim)
    if spec.type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, int(spec.hnsw_m), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(spec.ef_construction)
        return index
    m = spec.m if isinstance(spec.m, int) else auto_pq_m(dim)
    quantizer = faiss.IndexFlatIP(dim)
    # FAISS's wrapper keeps a reference to the quantizer inside the IVF index
    return faiss.IndexIVFPQ(quantizer, dim, int(spec.nlist), m, int(spec.nbits),
                            faiss.METRIC_INNER_PRODUCT)


def set_search_params(index: Any, spec: IndexSpec, k: int) -> None:
    """nprobe for IVF; efSearch (at least the k hits asked, or HNSW returns fewer) for HNSW."""
    import faiss  # deferred: faiss (native library; the spec and plan functions need none)

    if spec.type == "ivfpq":
        space = faiss.GpuParameterSpace() if "Gpu" in type(index).__name__ \
            else faiss.ParameterSpace()
        space.set_index_parameter(index, "nprobe", int(spec.nprobe))
    elif spec.type == "hnsw":
        index.hnsw.efSearch = max(int(spec.ef_search), int(k))


def config_label(raw: Mapping[str, Any] | None) -> str:
    """The index as configured, `auto` left as written (the corpus size resolves it), for a
    results row: 'flat', 'hnsw(hnsw_m=32,ef_construction=80,ef_search=128)'."""
    raw = dict(raw or {})
    kind = str(raw.get("type", "flat"))
    keys = TYPE_KEYS.get(kind, ())
    inner = ",".join(f"{k}={raw.get(k, DEFAULTS.get(k, 'auto'))}" for k in keys)
    return f"{kind}({inner})" if inner else kind
