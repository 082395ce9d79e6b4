"""The retriever interface, the forbidden-title filter and the on-disk result cache."""
from __future__ import annotations

import abc
import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..hashing import hash_obj, stable_json
from ..io import append_line, locked
from ..paths import cache_dir
from .corpus import Corpus, nfc

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Hit:
    pid: str
    title: str
    text: str
    score: float

    def as_text(self, with_title: bool = True) -> str:
        """`title\\ntext`: the layout of pyserini's wikipedia-dpr `contents` (without quotes)."""
        return f"{self.title}\n{self.text}" if with_title and self.title else self.text


def reject_unknown(kind: str, extra: dict) -> None:
    """Retriever configs are strict: a misspelt key must not be silently ignored."""
    if extra:
        raise ConfigError(f"Unknown {kind} setting(s) {sorted(extra)}. Check the spelling "
                          f"against conf/retriever/*.yaml.")


def fetch_count(k: int, fetch: int | None) -> int:
    """How many hits to ask the index for before the title filter: `fetch` (a caller's own
    candidate rule, e.g. RALM's official one in ralm/candidates.py), else k."""
    if fetch is None:
        return k
    if fetch < k:
        raise ConfigError(f"fetch={fetch} is smaller than k={k}: a search cannot keep more "
                          f"hits than it asked for. Give fetch >= k, or leave it out.")
    return int(fetch)


def normalize_titles(titles: Collection[str]) -> frozenset[str]:
    return frozenset(nfc(t) for t in titles)


def filter_titles(hits: Sequence[Hit], exclude_titles: Collection[str], k: int) -> list[Hit]:
    """Drop hits whose NFC title is excluded; keep the first k of the rest, in order."""
    banned = normalize_titles(exclude_titles)
    return [h for h in hits if nfc(h.title) not in banned][:k]


def hits_to_json(hits: Sequence[Hit]) -> list[list[Any]]:
    return [[h.pid, h.title, h.text, h.score] for h in hits]


def hits_from_json(rows: list[list[Any]]) -> list[Hit]:
    return [Hit(pid=str(r[0]), title=r[1], text=r[2], score=float(r[3])) for r in rows]


def _ends_without_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            return False
        f.seek(-1, 2)
        return f.read(1) != b"\n"


def read_jsonl_skipping(path: Path) -> list[dict]:
    """Every readable JSON line of a cache file; torn or garbled lines are skipped."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                log.debug("%s: skipping an unreadable cache line", path)
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


class ResultCache:
    """Hits per query for one (retriever settings, corpus, n) key, in an append-only JSONL file.

    Each finished batch is appended durably, so a killed job keeps what it did; a torn last
    line is ignored on reload. Parallel jobs append under a file lock."""

    def __init__(self, path: Path, key_obj: dict):
        self.path = path
        self.key_obj = key_obj
        self._table: dict[str, list[list[Any]]] | None = None

    def _load(self) -> dict[str, list[list[Any]]]:
        if self._table is None:
            self._table = {}
            if not self.path.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                append_line(self.path, stable_json({"key": self.key_obj}))
            for row in read_jsonl_skipping(self.path):
                if "q" in row:
                    self._table[row["q"]] = row["hits"]
        return self._table

    def get(self, query: str) -> list[Hit] | None:
        rows = self._load().get(query)
        return None if rows is None else hits_from_json(rows)

    def put_many(self, results: dict[str, list[Hit]]) -> None:
        table = self._load()
        lines = []
        for q, hits in results.items():
            rows = hits_to_json(hits)
            table[q] = rows
            lines.append(stable_json({"q": q, "hits": rows}))
        if lines:
            with locked(self.path):
                # A job killed mid-write leaves a line without its newline: end it first,
                # so the torn line stays one unreadable (skipped) line.
                torn = _ends_without_newline(self.path)
                append_line(self.path, ("\n" if torn else "") + "\n".join(lines))


class Retriever(abc.ABC):
    """Base class. Subclasses set `name` and `corpus` and implement `settings()` and
    `_search(queries, n) -> list[list[Hit]]` (n hits per query, best first)."""

    name: str = "retriever"
    corpus: Corpus
    cache: bool = True
    cache_batch: int = 1000  # queries per uncached call (and per durable cache append)

    @abc.abstractmethod
    def settings(self) -> dict:
        """Every setting that changes the hits (part of the cache key)."""

    def row_settings(self) -> dict[str, Any]:
        """What a results row records about the searched index beyond the configuration:
        nothing here; the dense retriever adds its FAISS index's measured recall."""
        return {}

    def contents(self, hit: Hit) -> str:
        """The document string as the index stores it; `title\ntext` unless a subclass knows
        better (BM25 over a prebuilt index returns its stored contents)."""
        return hit.as_text()

    @abc.abstractmethod
    def _search(self, queries: list[str], n: int) -> list[list[Hit]]:
        """Uncached search: n hits per query, best first."""

    # ---- cache ------------------------------------------------------------------------
    def cache_key(self, n: int) -> dict:
        """Everything that changes the hits of a query, except the query itself."""
        return {"retriever": self.settings(), "corpus": self.corpus.fingerprint(), "n": n}

    def query_key(self, query: str, n: int) -> str:
        return hash_obj({**self.cache_key(n), "query": query}, 16)

    def _cache(self, n: int) -> ResultCache:
        caches = self.__dict__.setdefault("_caches", {})
        if n not in caches:
            key = self.cache_key(n)
            path = cache_dir() / "retrieval" / f"{self.name}-{hash_obj(key, 16)}.jsonl"
            caches[n] = ResultCache(path, key)
        return caches[n]

    # ---- search -----------------------------------------------------------------------
    def search(self, queries: list[str], k: int, exclude_titles: Collection[str] = (),
               fetch: int | None = None) -> list[list[Hit]]:
        """Up to k hits per query, best first, after dropping excluded titles from the first
        `fetch` (default k) hits: fewer than k can remain. How many candidates make up for
        the dropped ones is the caller's rule (the cached hits are keyed by `fetch`)."""
        if isinstance(queries, str):
            raise ConfigError("search() takes a list of queries; wrap a single query in [].")
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}.")
        n = fetch_count(k, fetch)
        raw = self._cached_search(list(queries), n)
        if exclude_titles:
            banned = normalize_titles(exclude_titles)
            return [filter_titles(h, banned, k) for h in raw]
        return [h[:k] for h in raw]

    def _cached_search(self, queries: list[str], n: int) -> list[list[Hit]]:
        if not self.cache:
            return self._search(queries, n)
        cache = self._cache(n)
        found: dict[str, list[Hit]] = {}
        todo: dict[str, None] = {}  # ordered set: each distinct uncached query once
        for q in queries:
            if q in found or q in todo:
                continue
            hits = cache.get(q)
            if hits is None:
                todo[q] = None
            else:
                found[q] = hits
        todo = list(todo)
        if todo:
            log.debug("%s: %d of %d queries not cached", self.name, len(todo), len(queries))
        for start in range(0, len(todo), self.cache_batch):
            batch = todo[start:start + self.cache_batch]
            fresh = dict(zip(batch, self._search(batch, n)))
            cache.put_many(fresh)
            found.update(fresh)
        return [found[q] for q in queries]


def index_row(retriever: Any) -> dict[str, Any]:
    """The row fields of the retriever a pipeline searched (none without one, e.g. passages
    read from the records), for the pipeline's Result.settings."""
    fields = getattr(retriever, "row_settings", None)
    return dict(fields()) if callable(fields) else {}


def cache_path_of(retriever: Retriever, k: int, fetch: int | None = None) -> Path:
    """Where the hits of `search(..., k, fetch=fetch)` are cached (for logs and tests)."""
    return retriever._cache(fetch_count(k, fetch)).path


def load_cache_rows(path: Path) -> list[dict]:
    return read_jsonl_skipping(path)


