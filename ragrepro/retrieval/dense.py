"""Dense retrieval with any Hugging Face encoder and a FAISS inner-product index.

The corpus is encoded once; the embeddings are cached as .npy shards under
cache_dir()/dense/<key>/, keyed by everything that changes them (encoder source and revision,
pooling, prefixes, document format, max_length, normalisation, corpus fingerprint). Shards are
written as they finish, so a killed encoding job resumes where it stopped. At paper scale give
`index_path`: a FAISS index written by scripts/build_index.py, loaded and never rebuilt.
The index type (`retriever.faiss`: flat, ivfpq, hnsw; retrieval/faiss_index.py) is part of
the key of a built approximate index, cached beside the embeddings.
"""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from ..errors import ConfigError
from ..hashing import hash_obj
from ..io import atomic_write_json, locked
from ..models.archs import ARCHS, model_dims
from ..models.lm import DTYPES, pick_device
from ..models.loading import offline_error, resolve_source
from ..paths import cache_dir
from .base import Hit, Retriever, reject_unknown
from .corpus import Corpus
from .faiss_index import (
    FloatStore,
    IndexSpec,
    Recall,
    cached_recall,
    empty_index,
    gpu_faiss,
    refine,
    refine_candidates,
    resolve_spec,
    set_search_params,
    to_cpu,
    to_gpu,
    use_gpu,
)

log = logging.getLogger(__name__)

POOLINGS = ("mean", "cls", "pooler")
ENCODER_KEYS = ("name", "source", "doc_source", "revision", "doc_revision", "pooling",
                "query_prefix", "doc_prefix", "doc_format", "kind", "trust_remote_code",
                "model_class", "doc_model_class", "token_type_ids")


def mean_pool(hidden, mask):
    """Average of the token vectors where mask is 1. hidden: (B, T, H), mask: (B, T)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)


def pool(output: Any, mask, pooling: str):
    """One vector per sequence from a model output: mean of tokens, [CLS] (first token), or
    the model's pooler output (DPR encoders expose only that: their [CLS] vector)."""
    hidden = getattr(output, "last_hidden_state", None)
    if pooling == "pooler" or (pooling == "cls" and hidden is None):
        pooled = getattr(output, "pooler_output", None)
        if pooled is None:
            raise ConfigError("This encoder has no pooler output; use pooling=cls or mean.")
        return pooled
    if hidden is None:
        raise ConfigError(f"pooling={pooling!r} needs token vectors, which this encoder (e.g. "
                          f"a DPR encoder class) does not return; use pooling=cls.")
    if pooling == "mean":
        return mean_pool(hidden, mask)
    if pooling == "cls":
        return hidden[:, 0]
    raise ConfigError(f"encoder.pooling={pooling!r}; use one of {POOLINGS}.")


def l2_normalize(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def doc_inputs(titles: Sequence[str], texts: Sequence[str], doc_format: str,
               prefix: str = "") -> tuple[list[str], list[str] | None]:
    """Strings given to the tokenizer for passages. doc_format 'pair' encodes (title, text)
    as a sentence pair ([CLS] title [SEP] text [SEP], as DPR does); otherwise it is a template
    with {title} and {text}."""
    if doc_format == "pair":
        return [prefix + t for t in titles], list(texts)
    try:
        return [prefix + doc_format.format(title=t, text=x) for t, x in zip(titles, texts)], None
    except (KeyError, IndexError) as e:
        raise ConfigError(f"encoder.doc_format={doc_format!r} may only use {{title}} and "
                          f"{{text}}, or be 'pair'.") from e


def part_files(n_files: int, part: int, parts: int) -> range:
    """The embedding files (indices) of one part: contiguous blocks whose sizes differ by at
    most one, the larger blocks first; the parts cover every file exactly once."""
    base, extra = divmod(n_files, parts)
    start = part * base + min(part, extra)
    return range(start, start + base + (1 if part < extra else 0))


class Encoder:
    """A tokenizer and model producing one vector per input text."""

    def __init__(self, source: str, pooling: str, max_length: int, device: str,
                 revision: str | None = None, trust_remote_code: bool = False,
                 dtype: str = "float32", model_class: str | None = None,
                 token_type_ids: bool = True):
        # deferred: transformers (seconds to import; a BM25 run or a plan never builds one)
        import transformers
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if pooling not in POOLINGS:
            raise ConfigError(f"encoder.pooling={pooling!r}; use one of {POOLINGS}.")
        path, local = resolve_source(source, kind="encoder")
        if dtype not in DTYPES:
            raise ConfigError(f"retriever.dtype={dtype!r}; use one of {sorted(DTYPES)}.")
        kw = {"trust_remote_code": trust_remote_code}
        if not local and revision:
            kw["revision"] = revision
        try:
            config = AutoConfig.from_pretrained(path, **kw)
            # DPR question and context encoders share model_type "dpr": AutoModel would load a
            # context encoder's weights into a question encoder (randomly initialised!), so
            # take the class the config names (encoder.model_class) or the checkpoint names.
            cls = self._model_class(config, model_class, transformers, AutoModel)
            self.tokenizer = AutoTokenizer.from_pretrained(path, **kw)
            self.model = cls.from_pretrained(path, dtype=DTYPES[dtype], **kw)
        except OSError as e:
            if not local:
                raise offline_error(source, e) from e
            raise
        self.device = pick_device(device)
        self.model.to(self.device).eval()
        self.pooling = pooling
        self.max_length = max_length
        self.token_type_ids = token_type_ids
        self._torch = torch

    @staticmethod
    def _model_class(config, model_class: str | None, transformers, auto):
        if model_class:
            if not hasattr(transformers, model_class):
                raise ConfigError(f"encoder.model_class={model_class!r} is not a transformers "
                                  f"class (e.g. DPRContextEncoder, DPRQuestionEncoder).")
            return getattr(transformers, model_class)
        arch = (config.architectures or [None])[0]
        if config.model_type == "dpr":
            if not arch:
                raise ConfigError("This DPR checkpoint does not name its class; set "
                                  "encoder.model_class (DPRQuestionEncoder or DPRContextEncoder).")
            return getattr(transformers, arch)
        return auto

    def encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None,
               batch_size: int = 64, progress: str | None = None) -> np.ndarray:
        """float32 (len(texts), dim). Inputs are sorted by length so batches pad little."""
        torch = self._torch
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]) - len(pairs[i] if pairs else ""))
        out: list[np.ndarray] = [None] * len(texts)  # type: ignore[list-item]
        starts = range(0, len(order), batch_size)
        bar = tqdm(starts, desc=progress, unit="batch", disable=progress is None or len(starts) < 3)
        for s in bar:
            idx = order[s:s + batch_size]
            a = [texts[i] for i in idx]
            b = [pairs[i] for i in idx] if pairs is not None else None
            enc = self.tokenizer(a, b, padding=True, truncation=True if b is None else
                                 "longest_first", max_length=self.max_length, return_tensors="pt")
            if not self.token_type_ids:  # e.g. Spider: segment ids all 0 even for (title, text)
                enc.pop("token_type_ids", None)
            enc = {k: v.to(self.device) for k, v in enc.items()}
            with torch.inference_mode():
                vec = pool(self.model(**enc), enc["attention_mask"], self.pooling)
            for i, v in zip(idx, vec.float().cpu().numpy()):
                out[i] = v
        return np.stack(out).astype(np.float32) if out else np.zeros((0, 0), np.float32)


def encoder_dim(source: str) -> int | None:
    """The vector size of an encoder without loading its weights: its local config.json, or
    the architecture table for a hub id (None when neither says)."""
    path, local = resolve_source(source, kind="encoder")
    if local:
        cfg = Path(path) / "config.json"
        if cfg.is_file():
            conf = json.loads(cfg.read_text())
            return conf.get("hidden_size") or conf.get("dim") or conf.get("d_model")
        return None
    return int(model_dims(source)["hidden"]) if source in ARCHS else None


def training_sample(shards: Sequence[Path], size: int, seed: int = 0) -> np.ndarray:
    """`size` vectors drawn without replacement (seeded) from the shards, in corpus order,
    read through memory maps: the whole corpus never needs to be in memory."""
    counts = [int(np.load(p, mmap_mode="r").shape[0]) for p in shards]
    total = sum(counts)
    pick = np.sort(np.random.default_rng(seed).choice(total, size=min(size, total),
                                                      replace=False))
    parts, start = [], 0
    for path, count in zip(shards, counts):
        mine = pick[(pick >= start) & (pick < start + count)] - start
        if len(mine):
            parts.append(np.asarray(np.load(path, mmap_mode="r")[mine], dtype=np.float32))
        start += count
    return np.ascontiguousarray(np.concatenate(parts))


class DenseRetriever(Retriever):
    """Inner product between pooled query and passage vectors (cosine with normalize=true)."""

    def __init__(self, corpus: Corpus, encoder: Mapping[str, Any], name: str = "dense",
                 max_length: int = 256, batch_size: int = 64, normalize: bool = False,
                 device: str = "auto", index_path: str | None = None,
                 shard_size: int = 4096, cache: bool = True, dtype: str = "float32",
                 faiss: Mapping[str, Any] | None = None, **extra):
        reject_unknown("dense retriever", extra)
        enc = dict(encoder)
        unknown = set(enc) - set(ENCODER_KEYS)
        if unknown:
            raise ConfigError(f"Unknown encoder key(s) {sorted(unknown)}; known: "
                              f"{list(ENCODER_KEYS)}.")
        if "source" not in enc:
            raise ConfigError("encoder.source is required (e.g. embedded:minilm, a folder, or a "
                              "hub id such as facebook/contriever).")
        enc.setdefault("pooling", "mean")
        enc.setdefault("query_prefix", "")
        enc.setdefault("doc_prefix", "")
        enc.setdefault("doc_format", "{title} {text}")
        if enc["pooling"] not in POOLINGS:
            raise ConfigError(f"encoder.pooling={enc['pooling']!r}; use one of {POOLINGS}.")
        self.corpus = corpus
        self.encoder_cfg = enc
        self.name = name
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.normalize = bool(normalize)
        self.device = device
        self.dtype = dtype
        self.index_path = index_path
        self.shard_size = int(shard_size)
        self.cache = cache
        self.faiss_cfg = dict(faiss or {})
        self._spec: IndexSpec | None = None
        self._q_encoder: Encoder | None = None
        self._d_encoder: Encoder | None = None
        self._index = None
        self._store: FloatStore | None = None
        self._largest_n = 0  # the most hits any search asked for: the k its row's recall is at

    # ---- settings and keys ------------------------------------------------------------
    def encoder_settings(self) -> dict:
        e = self.encoder_cfg
        return {"source": e["source"], "revision": e.get("revision"),
                "doc_source": e.get("doc_source"), "doc_revision": e.get("doc_revision"),
                "pooling": e["pooling"], "query_prefix": e["query_prefix"],
                "doc_prefix": e["doc_prefix"], "doc_format": e["doc_format"],
                "model_class": e.get("model_class"), "doc_model_class": e.get("doc_model_class"),
                "token_type_ids": bool(e.get("token_type_ids", True))}

    def settings(self) -> dict:
        s = {"retriever": "dense", "name": self.name, "encoder": self.encoder_settings(),
             "encoder_name": self.encoder_cfg.get("name"), "max_length": self.max_length,
             "normalize": self.normalize, "dtype": self.dtype}
        if self.index_path:
            s["index_path"] = str(self.index_path)
        spec = self.index_spec()
        if spec.type != "flat":  # flat keeps the keys it had before index types existed
            s["faiss"] = {**spec.params(), "trained_on": self.index_device()}
        return s

    def vector_dim(self) -> int | None:
        """Size of the passage vectors: from the cached embeddings, else the encoder's config."""
        shards = self.shard_paths()
        if shards and shards[0].exists():
            return int(np.load(shards[0], mmap_mode="r").shape[1])
        e = self.encoder_cfg
        return encoder_dim(e.get("doc_source") or e["source"])

    def index_spec(self) -> IndexSpec:
        """retriever.faiss with every `auto` resolved for this corpus (checked once)."""
        if self._spec is None:
            self._spec = resolve_spec(self.faiss_cfg, len(self.corpus), self.vector_dim(),
                                      f"corpus {self.corpus.name!r}")
        return self._spec

    def index_device(self) -> str:
        """'gpu' when GPU FAISS builds/searches this index (retriever.faiss.gpu), else 'cpu'."""
        has, n = gpu_faiss()
        return "gpu" if use_gpu(self.index_spec().gpu, has, n, self.index_spec().type) else "cpu"

    def embeddings_key(self) -> str:
        return hash_obj({"encoder": self.encoder_settings(), "max_length": self.max_length,
                         "normalize": self.normalize, "corpus": self.corpus.fingerprint(),
                         **({"dtype": self.dtype} if self.dtype != "float32" else {})}, 16)

    def embeddings_dir(self) -> Path:
        return cache_dir() / "dense" / f"{self.corpus.name}-{self.embeddings_key()}"

    # ---- encoders ---------------------------------------------------------------------
    def _encoder(self, side: str) -> Encoder:
        e = self.encoder_cfg
        if self._q_encoder is None:
            self._q_encoder = Encoder(e["source"], e["pooling"], self.max_length, self.device,
                                      e.get("revision"), bool(e.get("trust_remote_code", False)),
                                      self.dtype, e.get("model_class"),
                                      bool(e.get("token_type_ids", True)))
        if side == "doc" and e.get("doc_source"):
            if self._d_encoder is None:
                self._d_encoder = Encoder(e["doc_source"], e["pooling"], self.max_length,
                                          self.device, e.get("doc_revision") or e.get("revision"),
                                          bool(e.get("trust_remote_code", False)), self.dtype,
                                          e.get("doc_model_class"),
                                          bool(e.get("token_type_ids", True)))
            return self._d_encoder
        return self._q_encoder

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        p = self.encoder_cfg["query_prefix"]
        vec = self._encoder("query").encode([p + q for q in queries], batch_size=self.batch_size)
        return l2_normalize(vec) if self.normalize else vec

    def encode_passages(self, passages: Sequence[Any], progress: str | None = None) -> np.ndarray:
        e = self.encoder_cfg
        a, b = doc_inputs([p.title for p in passages], [p.text for p in passages],
                          e["doc_format"], e["doc_prefix"])
        vec = self._encoder("doc").encode(a, b, batch_size=self.batch_size, progress=progress)
        return l2_normalize(vec) if self.normalize else vec

    # ---- corpus embeddings and index --------------------------------------------------
    def shard_paths(self) -> list[Path]:
        """The corpus's embedding files, shard_size passages each, in corpus order."""
        folder = self.embeddings_dir()
        return [folder / f"shard-{s // self.shard_size:05d}.npy"
                for s in range(0, len(self.corpus), self.shard_size)]

    def _encode_shard_file(self, i: int, shards: list[Path]) -> None:
        """Encode one file's passages; written under a temporary name and renamed, so a
        killed job leaves either the whole file or none (and the rerun redoes only it)."""
        chunk = self.corpus.passages[i * self.shard_size:(i + 1) * self.shard_size]
        vec = self.encode_passages(chunk, progress=f"encoding {self.corpus.name} "
                                   f"shard {i + 1}/{len(shards)}")
        tmp = shards[i].with_name(f"{shards[i].name}.{os.getpid()}.tmp.npy")
        np.save(tmp, vec)
        os.replace(tmp, shards[i])

    def _write_meta(self) -> None:
        meta = self.embeddings_dir() / "meta.json"
        if not meta.exists():
            atomic_write_json(meta, {"settings": self.settings(), "passages": len(self.corpus),
                                     "corpus": self.corpus.name,
                                     "corpus_fingerprint": self.corpus.fingerprint(),
                                     "shard_size": self.shard_size})

    def corpus_embeddings(self) -> list[Path]:
        """Encode the corpus once into .npy shards (resumable); return the shard paths."""
        folder = self.embeddings_dir()
        shards = self.shard_paths()
        with locked(folder):
            folder.mkdir(parents=True, exist_ok=True)
            todo = [i for i, path in enumerate(shards) if not path.exists()]
            if todo:
                log.info("Encoding %d passages of %s with %s (once; cached in %s)",
                         len(self.corpus), self.corpus.name, self.encoder_cfg["source"], folder)
            for i in todo:
                self._encode_shard_file(i, shards)
            self._write_meta()
        return shards

    def encode_part(self, part: int, parts: int) -> list[Path]:
        """Encode part `part` of `parts` (a contiguous block of embedding files), as one job
        of a sharded encoding. Parts run in parallel on different machines sharing the cache
        folder: no lock is held, each file lands atomically, finished files are skipped."""
        folder = self.embeddings_dir()
        folder.mkdir(parents=True, exist_ok=True)
        shards = self.shard_paths()
        mine = part_files(len(shards), part, parts)
        todo = [i for i in mine if not shards[i].exists()]
        log.info("Part %d/%d of %s: embedding files %s, %d to encode, %d already done",
                 part, parts, self.corpus.name, f"{mine.start}-{mine.stop - 1}" if mine else
                 "none", len(todo), len(mine) - len(todo))
        for i in todo:
            self._encode_shard_file(i, shards)
        self._write_meta()
        return [shards[i] for i in mine]

    def missing_shards(self) -> list[int]:
        return [i for i, path in enumerate(self.shard_paths()) if not path.exists()]

    def build_index(self):
        """The FAISS index of retriever.faiss over the cached corpus embeddings (CPU). The
        exact flat index is rebuilt from the embeddings (a copy); an approximate one is
        trained once and cached as index-<key>.faiss beside them."""
        import faiss  # deferred: faiss (native library, loaded when an index is built)

        shards = self.corpus_embeddings()
        if not shards:
            raise ConfigError(f"Corpus {self.corpus.name!r} is empty.")
        spec = self.index_spec()
        if spec.type == "flat":
            index = None
            for path in shards:
                vec = np.load(path)
                if index is None:
                    index = faiss.IndexFlatIP(vec.shape[1])
                index.add(np.ascontiguousarray(vec, dtype=np.float32))
            return index
        key = hash_obj({**spec.build_params(), "trained_on": self.index_device()}, 12)
        path = self.embeddings_dir() / f"index-{spec.type}-{key}.faiss"
        with locked(path):
            if not path.exists():
                index = self._train_and_add(spec, shards)
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                faiss.write_index(to_cpu(index), str(tmp))
                os.replace(tmp, path)
        return faiss.read_index(str(path))

    def _train_and_add(self, spec: IndexSpec, shards: list[Path]):
        """Train on a seeded sample of the vectors (ivfpq), then add every shard in order, so
        FAISS ids are corpus positions."""
        dim = int(np.load(shards[0], mmap_mode="r").shape[1])
        index = empty_index(spec, dim)
        has, n_gpus = gpu_faiss()
        if use_gpu(spec.gpu, has, n_gpus, spec.type):
            index = to_gpu(index, spec, n_gpus)
        log.info("Building FAISS %s over %d vectors of %s (once; cached)", spec.label(),
                 len(self.corpus), self.corpus.name)
        if spec.type == "ivfpq":
            index.train(training_sample(shards, int(spec.train_size)))
        for path in shards:
            index.add(np.ascontiguousarray(np.load(path), dtype=np.float32))
        return index

    def save_index(self, path: str | Path) -> Path:
        """Write the FAISS index to `path` (plus a .json with the settings it was built with)."""
        import faiss  # deferred: faiss (native library, loaded when an index is built)

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        index = self._index if self._index is not None else self.build_index()
        faiss.write_index(to_cpu(index), str(path))
        atomic_write_json(path.with_suffix(path.suffix + ".json"),
                          {"settings": {k: v for k, v in self.settings().items()
                                        if k != "index_path"},
                           "corpus": self.corpus.name, "ntotal": int(index.ntotal),
                           "corpus_fingerprint": self.corpus.fingerprint()})
        return path

    def _open(self):
        if self._index is not None:
            return self._index
        if self.index_path:
            index = self._load_index(Path(self.index_path).expanduser())
        else:
            index = self.build_index()
        has, n_gpus = gpu_faiss()
        if use_gpu(self.index_spec().gpu, has, n_gpus, self.index_spec().type):
            index = to_gpu(index, self.index_spec(), n_gpus)
        self._index = index
        return self._index

    def float_store(self) -> FloatStore:
        """The cached corpus embeddings, memory-mapped: what re-ranking and the recall probe
        read exactly (only the rows they need)."""
        if self._store is None:
            missing = self.missing_shards()
            if missing:
                raise ConfigError(f"retriever.faiss.refine and the recall probe read the corpus "
                                  f"embeddings in {self.embeddings_dir()}, but {len(missing)} "
                                  f"embedding files are missing (first: {missing[0]}): encode "
                                  f"them (python scripts/build_index.py corpus=... retriever=..."
                                  f", or experiment=core/encode_shards), or drop refine.")
            self._store = FloatStore(self.shard_paths())
        return self._store

    def index_recall(self, k: int) -> Recall:
        """recall@k of the index (with its search parameters) against exact search on the
        probe set; flat is exact (1.0, nothing measured). Measured once, cached beside the
        index; None when the embeddings behind a prebuilt index are not here."""
        spec = self.index_spec()
        if spec.type == "flat":
            return Recall(k, 1.0, 0)
        if self.missing_shards():
            log.warning("recall of %s not measured: the corpus embeddings are not in %s",
                        spec.label(), self.embeddings_dir())
            return Recall(k, None, 0)
        key = hash_obj({**spec.params(), "trained_on": self.index_device(),
                        "index_path": str(self.index_path or "")}, 12)
        return cached_recall(self.embeddings_dir(), key, self.float_store(),
                             lambda q, n: self.search_vectors(q, n)[1], k)

    def row_settings(self) -> dict[str, Any]:
        """The index this retriever searched and its recall@k at the most hits asked (k 100
        when nothing was searched), for the results row."""
        recall = self.index_recall(self._largest_n or 100)
        return {"faiss_index_resolved": self.index_spec().label(), **recall.row()}

    def _load_index(self, path: Path):
        import faiss  # deferred: faiss (native library, loaded when an index is built)

        if not path.exists():
            raise ConfigError(f"retriever.index_path={str(path)!r} does not exist. Build it "
                              f"deliberately with `python scripts/build_index.py corpus=... "
                              f"retriever=...` (it is never built implicitly), or set "
                              f"retriever.index_path=null to encode the corpus here.")
        index = faiss.read_index(str(path))
        meta = path.with_suffix(path.suffix + ".json")
        if meta.exists():
            info = json.loads(meta.read_text())
            if info.get("settings", {}).get("encoder") not in (None, self.encoder_settings()):
                raise ConfigError(f"FAISS index {path} was built with encoder settings "
                                  f"{info['settings']['encoder']}, not {self.encoder_settings()}.")
            self._check_index_type(path, info.get("settings", {}).get("faiss"))
        if index.ntotal != len(self.corpus):
            raise ConfigError(f"FAISS index {path} holds {index.ntotal} vectors but corpus "
                              f"{self.corpus.name!r} has {len(self.corpus)} passages: they do "
                              f"not belong together.")
        return index

    def _check_index_type(self, path: Path, built: Mapping[str, Any] | None) -> None:
        """A prebuilt index must be the type retriever.faiss says, or its search parameters
        (nprobe, efSearch) would silently be FAISS's defaults."""
        have = dict(built or {"type": "flat"})
        have.pop("trained_on", None)
        have.pop("refine", None)  # re-ranking happens after the index: any file serves it
        want = {k: v for k, v in self.index_spec().params().items() if k != "refine"}
        if have != want:
            raise ConfigError(f"FAISS index {path} is {have} but retriever.faiss says {want}: "
                              f"set retriever.faiss to the index's parameters (its .json "
                              f"sidecar lists them), or rebuild it.")

    # ---- search -----------------------------------------------------------------------
    def _cached_search(self, queries: list[str], n: int) -> list[list[Hit]]:
        self._largest_n = max(self._largest_n, n)  # also when every query is cached
        return super()._cached_search(queries, n)

    def search_vectors(self, q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the n best passages per query vector: the index's hits, or with
        retriever.faiss.refine its refine x n candidates re-scored exactly."""
        index, spec = self._open(), self.index_spec()
        n = min(n, index.ntotal)
        fetch = refine_candidates(spec, n, index.ntotal, gpu=self.index_device() == "gpu")
        set_search_params(index, spec, fetch)
        q = np.ascontiguousarray(q, dtype=np.float32)
        scores, ids = index.search(q, fetch)
        return refine(self.float_store(), q, ids, n) if spec.refine else (scores, ids)

    def _search(self, queries: list[str], n: int) -> list[list[Hit]]:
        scores, ids = self.search_vectors(self.encode_queries(queries), n)
        out = []
        for row_s, row_i in zip(scores, ids):
            hits = []
            for s, i in zip(row_s, row_i):
                if i < 0:
                    continue
                p = self.corpus[int(i)]
                hits.append(Hit(pid=p.pid, title=p.title, text=p.text, score=float(s)))
            out.append(hits)
        return out
