"""FAISS index types for dense retrieval: `retriever.faiss` in conf/retriever/<dense>.yaml.

- `flat`: exact inner product over float32 vectors (4 d bytes per passage; 64 GB for DPR's
  21M 768-d passages). The default, and the reference the approximate types are measured
  against (results/retrieval/ann_recall.md).
- `ivfpq`: an inverted file of `nlist` lists over a k-means coarse quantizer, each vector
  stored as `m` product-quantizer codes of `nbits` bits; `nprobe` lists are searched.
- `hnsw`: a navigable small-world graph (`hnsw_m` links per node) over the float32 vectors;
  `ef_construction` / `ef_search` are the candidate lists when building / searching.
- `refine: R` (ivfpq only): exact re-ranking. The compressed index returns R x k candidates,
  which are re-scored against the float vectors of the cached embeddings, read through
  memory maps (`FloatStore`: only the candidates' rows are touched, so a 64 GB store needs no
  64 GB of RAM, unlike FAISS's IndexRefineFlat, which keeps them in memory).
- `type: auto`: flat while the flat index is at most AUTO_FLAT_MAX_BYTES, else ivfpq with
  re-ranking (`auto_type`), the defaults measured to reach recall@k >= 0.95 against flat
  (results/retrieval/ann_recall.md).

`auto` values scale with the corpus size N and the vector size d (`resolve_spec`). Recall
against exact search is measured on a probe set of corpus vectors (`probe_recall`) and
recorded on every dense row (DenseRetriever.row_settings). GPU FAISS
(the `gpu` extra) is used when it is installed and a GPU is visible (`use_gpu`); FAISS has no
GPU HNSW. The size and build-cost formulas below are pure so `ragrepro plan` can size an
index without building it; tests check them against FAISS's own serialised sizes.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..io import atomic_write_json, locked

log = logging.getLogger(__name__)

TYPES = ("flat", "ivfpq", "hnsw")   # what FAISS builds
CONFIG_TYPES = (*TYPES, "auto")    # what retriever.faiss.type accepts
TYPE_KEYS = {"flat": (), "ivfpq": ("nlist", "m", "nbits", "nprobe", "train_size"),
             "hnsw": ("hnsw_m", "ef_construction", "ef_search")}
SEARCH_KEYS = ("nprobe", "ef_search", "refine")  # chosen per search: not in an index file's key
KNOWN_KEYS = ("type", "gpu", "refine", *TYPE_KEYS["ivfpq"], *TYPE_KEYS["hnsw"])
REFINE_MAX = 256  # R x k candidates are gathered per query; beyond this, use type=flat
# FAISS's k-means warns below 39 training points per centroid: fewer leave lists badly placed.
MIN_POINTS_PER_CENTROID = 39
TRAIN_POINTS_PER_CENTROID = 64  # the auto training sample (FAISS suggests 30 to 256 per centroid)
KMEANS_ITERS = 25               # faiss.ClusteringParameters().niter
DEFAULTS = {"nbits": 8, "hnsw_m": 32, "ef_construction": 80, "ef_search": 128}
# The re-ranking defaults (refine: auto, and what type: auto picks), chosen from the recall
# they reached against flat on wiki-vital and on 1M synthetic vectors
# (results/retrieval/ann_recall.md).
AUTO_REFINE = 8                # 4 gave recall@10 0.968 at 1M, 8 0.978, 16 little more
REFINE_MIN_CANDIDATES = 64     # k = 1 on wiki-vital: 8 candidates gave recall@1 0.978, 64 0.999
# With re-ranking, the lists scanned cap recall: on 1M synthetic vectors a quarter of the
# lists gave recall@100 0.96, an eighth 0.94; on wiki-vital 65 of 252 lists 0.97.
REFINE_NPROBE_SHARE = 1 / 4    # lists scanned with re-ranking (auto_refine_nprobe) ...
REFINE_MIN_SCANNED = 2_500     # ... and vectors scanned at least: 25 per hit at k = 100
AUTO_FLAT_MAX_BYTES = 4 * 2**30  # type: auto keeps flat (exact) up to 4 GiB of vectors
ASSUMED_DIM = 768              # type: auto when the vector size is not known yet
GPU_MAX_K = 2048               # the most hits GPU FAISS returns per query


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
    refine: int | None = None  # exact re-ranking of refine x k candidates (ivfpq); None: off
    gpu: Any = "auto"  # how to choose the device; not a parameter of the index itself

    def params(self) -> dict[str, Any]:
        """The type and its own parameters: the index's cache key and its row label. refine
        only when set, so the keys and labels of indexes without it stay what they were."""
        d = asdict(self)
        out = {"type": self.type, **{k: d[k] for k in TYPE_KEYS[self.type]}}
        return {**out, "refine": self.refine} if self.refine else out

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


def auto_refine_nprobe(nlist: int, n: int) -> int:
    """nprobe with re-ranking, where the lists scanned cap recall, no longer the PQ error:
    REFINE_NPROBE_SHARE of the lists, and enough of them to scan REFINE_MIN_SCANNED vectors
    (a small corpus's lists are short); measured in results/retrieval/ann_recall.md."""
    return min(nlist, max(math.ceil(nlist * REFINE_NPROBE_SHARE),
                          math.ceil(REFINE_MIN_SCANNED * nlist / n)))


def auto_type(n: int, dim: int | None) -> str:
    """`type: auto`: flat (exact) while its float32 vectors take at most AUTO_FLAT_MAX_BYTES
    (an unknown vector size counts as ASSUMED_DIM), else ivfpq with re-ranking."""
    return "flat" if flat_bytes(n, dim or ASSUMED_DIM) <= AUTO_FLAT_MAX_BYTES else "ivfpq"


def refine_candidates(spec: IndexSpec, k: int, ntotal: int, gpu: bool = False) -> int:
    """How many hits to ask the index for: k, or refine x k (at least REFINE_MIN_CANDIDATES)
    to re-rank; never more than it holds, nor than GPU FAISS returns (GPU_MAX_K)."""
    fetch = max(spec.refine * k, REFINE_MIN_CANDIDATES) if spec.refine else k
    return max(1, min(fetch, ntotal, GPU_MAX_K if gpu else fetch))


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
    if kind not in CONFIG_TYPES:
        raise ConfigError(f"retriever.faiss.type={kind!r}; use one of {list(CONFIG_TYPES)}.")
    gpu = raw.get("gpu", "auto")
    if gpu not in ("auto", True, False):
        raise ConfigError(f"retriever.faiss.gpu={gpu!r}: use auto, true or false.")
    refine = _refine(raw)
    if kind == "auto":
        kind = auto_type(n, dim)
        refine = "auto" if refine is None else refine  # auto's ivfpq always re-ranks
        if kind == "flat":
            return IndexSpec("flat", gpu=gpu)  # exact: nothing to re-rank
    if refine is not None and kind != "ivfpq":
        why = ("flat scores every vector exactly" if kind == "flat" else
               "HNSW keeps the float vectors and its scores are exact (raise ef_search for "
               "recall)")
        raise ConfigError(f"retriever.faiss.refine={refine} with type={kind}: {why}; drop "
                          f"refine (null), or use type=ivfpq or type=auto.")
    if kind == "hnsw":
        return IndexSpec("hnsw", hnsw_m=_int(raw, "hnsw_m", lo=2),
                         ef_construction=_int(raw, "ef_construction"),
                         ef_search=_int(raw, "ef_search"), gpu=gpu)
    if kind == "flat":
        return IndexSpec("flat", gpu=gpu)
    return _resolve_ivfpq(raw, n, dim, corpus, gpu, refine)


def _refine(raw: Mapping[str, Any]) -> int | str | None:
    """retriever.faiss.refine checked: None (off), 'auto' or an integer factor."""
    value = raw.get("refine")
    if value is None or value == "auto":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= REFINE_MAX:
        return value
    raise ConfigError(f"retriever.faiss.refine={value!r}: use an integer from 1 to "
                      f"{REFINE_MAX} (refine x k candidates are re-scored exactly per query), "
                      f"auto ({AUTO_REFINE}), or null (no re-ranking).")


def _resolve_ivfpq(raw: Mapping[str, Any], n: int, dim: int | None, corpus: str,
                   gpu: Any, refine: int | str | None = None) -> IndexSpec:
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
    if nprobe == "auto":
        nprobe = auto_nprobe(nlist) if refine is None else auto_refine_nprobe(nlist, n)
    if nprobe > nlist:
        raise ConfigError(f"retriever.faiss.nprobe={nprobe} is more than nlist={nlist} lists.")
    train = _int(raw, "train_size")
    train = auto_train_size(n, nlist, nbits) if train == "auto" else train
    if not MIN_POINTS_PER_CENTROID * nlist <= train <= n:
        raise ConfigError(f"retriever.faiss.train_size={train}: use a number from "
                          f"{MIN_POINTS_PER_CENTROID * nlist} ({MIN_POINTS_PER_CENTROID} per "
                          f"list) to {n} (the corpus size), or auto.")
    return IndexSpec("ivfpq", nlist=nlist, m=m, nbits=nbits, nprobe=nprobe, train_size=train,
                     refine=AUTO_REFINE if refine == "auto" else refine, gpu=gpu)


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


# ---- the float store, exact search, re-ranking and recall probes --------------------------
# Every memory map holds a file descriptor: 21M passages are 5,131 shards of 4,096, above
# the usual limit of 1,024 open files, so only the most recently used maps stay open.
MAX_OPEN_MAPS = 256
SCORE_BYTES = 64 * 2**20   # float32 scores held at once by exact search and re-ranking
PROBE_SIZE = 200           # corpus vectors whose neighbours measure an index's recall
PROBE_SEED = 0


class FloatStore:
    """The corpus vectors (float32, one row per passage, in corpus order) in the cached .npy
    embedding shards, read through read-only memory maps: gathering rows reads only their
    pages, so the store (64 GB for 21M x 768) is disk and page cache, never a RAM copy."""

    def __init__(self, shards: Sequence[Path]):
        if not shards:
            raise ConfigError("The float store has no embedding files: encode the corpus first "
                              "(python scripts/build_index.py corpus=... retriever=...).")
        self.paths = [Path(p) for p in shards]
        shapes = [np.load(p, mmap_mode="r").shape for p in self.paths]  # headers only
        dims = {shape[1] for shape in shapes}
        if len(dims) != 1:
            raise ConfigError(f"The embedding files of {self.paths[0].parent} hold vectors of "
                              f"sizes {sorted(dims)}: they are not one corpus; delete the "
                              f"folder and encode again.")
        self.dim = dims.pop()
        self.offsets = np.concatenate([[0], np.cumsum([shape[0] for shape in shapes])])
        self._maps: OrderedDict[int, np.ndarray] = OrderedDict()

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def _map(self, shard: int) -> np.ndarray:
        mapped = self._maps.pop(shard, None)
        if mapped is None:
            mapped = np.load(self.paths[shard], mmap_mode="r")
        self._maps[shard] = mapped
        if len(self._maps) > MAX_OPEN_MAPS:
            self._maps.popitem(last=False)
        return mapped

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The vectors of corpus rows `ids` (any order, repeats allowed): (len(ids), d)."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise IndexError(f"row ids {ids.min()}..{ids.max()} outside the store's "
                             f"{len(self)} vectors")
        out = np.empty((ids.size, self.dim), dtype=np.float32)
        shard = np.searchsorted(self.offsets, ids, side="right") - 1
        order = np.argsort(shard, kind="stable")
        for group in np.split(order, np.flatnonzero(np.diff(shard[order])) + 1):
            if group.size:
                s = int(shard[group[0]])
                out[group] = self._map(s)[ids[group] - self.offsets[s]]
        return out

    def blocks(self, rows: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, vectors) over the whole store in order, at most `rows` at a time."""
        for s in range(len(self.paths)):
            mapped = self._map(s)
            for a in range(0, mapped.shape[0], rows):
                yield int(self.offsets[s]) + a, mapped[a:a + rows]


def top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row the k highest scores and their ids, best first (equal scores: lower id)."""
    if scores.shape[1] > k:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        scores = np.take_along_axis(scores, part, axis=1)
        ids = np.take_along_axis(ids, part, axis=1)
    order = np.lexsort((ids, -scores), axis=1)
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(ids, order, axis=1)


def exact_search(store: FloatStore, queries: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The exact top k inner products over the whole store: one sequential pass, a block of
    rows at a time (queries x block scores stay within SCORE_BYTES), 2 Q N d FLOPs."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(int(k), len(store))
    best_s = np.empty((len(q), 0), dtype=np.float32)
    best_i = np.empty((len(q), 0), dtype=np.int64)
    for start, x in store.blocks(max(1024, SCORE_BYTES // (4 * max(1, len(q))))):
        ids = np.broadcast_to(np.arange(start, start + len(x), dtype=np.int64), (len(q), len(x)))
        best_s, best_i = top_k(np.concatenate([best_s, q @ np.asarray(x).T], axis=1),
                               np.concatenate([best_i, ids], axis=1), k)
    return best_s, best_i


def refine(store: FloatStore, queries: np.ndarray, candidates: np.ndarray, k: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Re-score each query's candidate ids (-1: none) exactly against the store and keep the
    best k: (scores, ids), padded with -inf / -1 where fewer candidates came back. Only the
    candidates' rows are read, a chunk of queries at a time."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    cand = np.asarray(candidates, dtype=np.int64)
    width = max(k, cand.shape[1])
    out_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    out_i = np.full((len(q), k), -1, dtype=np.int64)
    chunk = max(1, SCORE_BYTES // (4 * max(1, width * store.dim)))
    for a in range(0, len(q), chunk):
        c = cand[a:a + chunk]
        valid = c >= 0
        uniq, where = np.unique(c[valid], return_inverse=True)
        pos = np.zeros(c.shape, dtype=np.int64)
        pos[valid] = where
        scores = np.einsum("qd,qcd->qc", q[a:a + chunk], store.rows(uniq)[pos])
        scores[~valid] = -np.inf
        s, i = top_k(scores.astype(np.float32), np.where(valid, c, -1), k)
        out_s[a:a + chunk, :s.shape[1]], out_i[a:a + chunk, :i.shape[1]] = s, i
    return out_s, out_i


def recall_at(approx: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean over queries of |approx[:k] ∩ exact[:k]| / k (ids; -1 never matches)."""
    hits = [len(set(a[:k].tolist()) & set(e[:k].tolist()) - {-1}) for a, e in zip(approx, exact)]
    return float(np.mean(hits)) / k


def probe_ids(n: int, size: int = PROBE_SIZE, seed: int = PROBE_SEED) -> np.ndarray:
    """The probe set: `size` corpus rows drawn without replacement (seeded), in order."""
    return np.sort(np.random.default_rng(seed).choice(n, size=min(size, n), replace=False))


def leave_one_out(ids: np.ndarray, probe: np.ndarray, k: int) -> np.ndarray:
    """Each probe's hits without the probe itself (a corpus vector is usually its own best
    match, which would flatter any index), the first k, padded with -1."""
    out = np.full((len(ids), k), -1, dtype=np.int64)
    for r, (row, own) in enumerate(zip(ids, probe)):
        kept = row[row != own][:k]
        out[r, :len(kept)] = kept
    return out


def probe_recall(search: Callable[[np.ndarray, int], np.ndarray], store: FloatStore,
                 probe: np.ndarray, exact: np.ndarray, k: int) -> float:
    """recall@k of `search(vectors, n) -> ids` against `exact` (the exact ids of the probe
    rows, at least k + 1 per row), leaving each probe's own row out of both."""
    if exact.shape[1] < min(k + 1, len(store)):
        raise ValueError(f"exact neighbours of {exact.shape[1]} per probe; recall@{k} needs "
                         f"{k + 1}")
    approx = search(store.rows(probe), k + 1)
    return recall_at(leave_one_out(approx, probe, k), leave_one_out(exact, probe, k), k)


@dataclass(frozen=True)
class Recall:
    """An index's measured recall@k against exact search, on `probe` corpus vectors."""

    k: int
    value: float | None  # None: not measurable (no float store beside a prebuilt index)
    probe: int

    def row(self) -> dict[str, Any]:
        """The results-row fields (docs/retrieval.md, 'Recall on every dense row')."""
        return {"faiss_recall_at_k": self.value, "faiss_recall_k": self.k,
                "faiss_recall_probe": self.probe}


def cached_recall(folder: Path, key: str, store: FloatStore,
                  search: Callable[[np.ndarray, int], np.ndarray], k: int,
                  size: int = PROBE_SIZE) -> Recall:
    """recall@k of `search` on the probe set, measured once per (index, search parameters, k)
    and kept in folder/recall-<key>.json; the probe's exact neighbours, which cost one pass
    over the store, are kept in folder/probe-<size>-exact.npy for every index over it."""
    path = folder / f"recall-{key}.json"
    with locked(path):
        table = json.loads(path.read_text()) if path.exists() else {"recall": {}}
        if str(k) not in table["recall"]:
            probe = probe_ids(len(store), size)
            exact = _probe_exact(folder, store, probe, k + 1)
            table["recall"][str(k)] = probe_recall(search, store, probe, exact, k)
            table.update(probe=len(probe), seed=PROBE_SEED)
            atomic_write_json(path, table)
    return Recall(k, float(table["recall"][str(k)]), int(table["probe"]))


def _probe_exact(folder: Path, store: FloatStore, probe: np.ndarray, need: int) -> np.ndarray:
    """The probe rows' exact neighbour ids, at least `need` (and 101) per row, cached."""
    path = folder / f"probe-{len(probe)}-exact.npy"
    with locked(path):
        if path.exists():
            ids = np.load(path)
            if ids.shape[1] >= min(need, len(store)):
                return ids
        started = time.perf_counter()
        _, ids = exact_search(store, store.rows(probe), max(need, 101))
        log.info("Exact neighbours of the %d-vector recall probe over %d vectors: %.1f s (one "
                 "pass over the float store)", len(probe), len(store),
                 time.perf_counter() - started)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
        np.save(tmp, ids)
        os.replace(tmp, path)
    return ids


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
    results row: 'flat', 'hnsw(hnsw_m=32,ef_construction=80,ef_search=128)', 'auto',
    'ivfpq(nlist=auto,m=auto,nbits=8,nprobe=auto,train_size=auto,refine=8)'."""
    raw = dict(raw or {})
    kind = str(raw.get("type", "flat"))
    keys = TYPE_KEYS.get(kind, ())
    parts = [f"{k}={raw.get(k, DEFAULTS.get(k, 'auto'))}" for k in keys]
    if raw.get("refine") is not None:  # only when set: earlier rows keep their label
        parts.append(f"refine={raw['refine']}")
    return f"{kind}({','.join(parts)})" if parts else kind
