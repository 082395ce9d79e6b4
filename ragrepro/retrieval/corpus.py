"""Retrieval corpora: a list of passages with a content fingerprint for cache keys.

Each conf/corpus/<name>.yaml names its loader here with its arguments:
- `wiki_vital_corpus`: the embedded vital-article leads (ragrepro.data.vital), one passage each.
- `foldoc_corpus`: FOLDOC entries (ragrepro.data.foldoc).
- `dpr_tsv_corpus`: DPR's psgs_w100.tsv (id, text, title; 21M 100-word passages), read from a
  local `path`. Loaded lazily: a BM25 retriever on pyserini's prebuilt `wikipedia-dpr` index
  never needs the 13 GB file, so a missing path only fails when passages are actually read.
"""
from __future__ import annotations

import csv
import hashlib
import logging
import sys
import unicodedata
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf
from tqdm import tqdm

from ..data import foldoc, vital
from ..data.records import Passage
from ..errors import DataError
from ..hashing import hash_obj
from ..named_configs import group_config

log = logging.getLogger(__name__)

def nfc(title: str) -> str:
    """Titles are compared in Unicode NFC: the RALM forbidden-titles file holds both the NFC
    and NFD spellings of some titles (e.g. "Éva Gauthier")."""
    return unicodedata.normalize("NFC", title)


def chunk_words(passage: Passage, n: int = 100) -> list[Passage]:
    """Split a passage into consecutive chunks of `n` whitespace-separated words (DPR-style;
    the last chunk may be shorter). Chunk pids are `<pid>#<i>`; the title is kept on every
    chunk. Line breaks inside the text become single spaces, as in DPR's passages."""
    if n <= 0:
        raise DataError(f"chunk_words must be a positive number of words, got {n}.")
    words = passage.text.split()
    if not words:
        raise DataError(f"Passage {passage.pid!r} has empty text; remove it from the corpus.")
    return [Passage(pid=f"{passage.pid}#{i // n}", title=passage.title,
                    text=" ".join(words[i:i + n]))
            for i in range(0, len(words), n)]


def validate_passages(passages: list[Passage], source: str) -> None:
    """Every passage needs non-empty text and a unique pid."""
    seen: set[str] = set()
    for p in passages:
        if not p.text or not p.text.strip():
            raise DataError(f"{source}: passage {p.pid!r} (title {p.title!r}) has empty text. "
                            f"Remove it from the corpus file or fill in its text.")
        if p.pid in seen:
            raise DataError(f"{source}: passage id {p.pid!r} occurs twice; ids must be unique.")
        seen.add(p.pid)


def content_fingerprint(passages: list[Passage]) -> str:
    """sha256 over (pid, title, text) of every passage, in order."""
    h = hashlib.sha256()
    for p in passages:
        for field in (p.pid, p.title, p.text):
            h.update(field.encode("utf-8"))
            h.update(b"\x00")
        h.update(b"\x01")
    return h.hexdigest()[:16]


class Corpus:
    """An ordered collection of passages. Give `passages`, or a `loader` called on first use
    together with a `source_id` (cheap identity of the source, e.g. a file's path/size/mtime)."""

    def __init__(self, name: str, passages: list[Passage] | None = None,
                 loader: Callable[[], list[Passage]] | None = None,
                 source_id: dict | None = None, settings: dict | None = None):
        if (passages is None) == (loader is None):
            raise ValueError("Give exactly one of passages or loader.")
        self.name = name
        self.settings = dict(settings or {})
        self._source_id = source_id
        self._loader = loader
        self._passages: list[Passage] | None = None
        self._index: dict[str, int] | None = None
        self._fingerprint: str | None = None
        if passages is not None:
            self._set(passages)

    def _set(self, passages: list[Passage]) -> None:
        validate_passages(passages, f"corpus {self.name!r}")
        self._passages = passages

    @property
    def passages(self) -> list[Passage]:
        if self._passages is None:
            assert self._loader is not None
            self._set(self._loader())
        return self._passages

    @property
    def loaded(self) -> bool:
        return self._passages is not None

    def __len__(self) -> int:
        return len(self.passages)

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.passages)

    def __getitem__(self, i: int) -> Passage:
        return self.passages[i]

    def by_pid(self, pid: str) -> Passage:
        if self._index is None:
            self._index = {p.pid: i for i, p in enumerate(self.passages)}
        try:
            return self.passages[self._index[pid]]
        except KeyError:
            raise DataError(f"Passage id {pid!r} is not in corpus {self.name!r} "
                            f"({len(self)} passages).") from None

    def fingerprint(self) -> str:
        """A content hash for cache keys. File-backed corpora use the file's identity (path,
        size, mtime) plus the loading settings, so the 21M-passage file is not read just to
        key a cache."""
        if self._fingerprint is None:
            # Decided by how the corpus was made, never by whether it is loaded yet, so every
            # process computes the same key.
            if self._source_id is not None:
                self._fingerprint = hash_obj({"name": self.name, "source": self._source_id,
                                              **self.settings}, 16)
            else:
                self._fingerprint = hash_obj({"name": self.name, **self.settings,
                                              "content": content_fingerprint(self.passages)}, 16)
        return self._fingerprint

    def __repr__(self) -> str:
        size = len(self._passages) if self._passages is not None else "not loaded"
        return f"Corpus({self.name!r}, {size}, {self.settings})"


def _apply(passages: list[Passage], chunk: int | None,
           exclude_titles: Collection[str]) -> list[Passage]:
    if exclude_titles:
        banned = {nfc(t) for t in exclude_titles}
        passages = [p for p in passages if nfc(p.title) not in banned]
    if chunk:
        passages = [c for p in passages for c in chunk_words(p, chunk)]
    return passages


def read_dpr_tsv(path: str | Path) -> list[Passage]:
    """DPR's psgs_w100.tsv: a header line `id<TAB>text<TAB>title`, then one passage per line."""
    path = Path(path)
    csv.field_size_limit(sys.maxsize)
    out: list[Passage] = []
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        header = next(reader, None)
        if header is None or [h.strip().lower() for h in header[:3]] != ["id", "text", "title"]:
            raise DataError(f"{path}:1: expected the DPR header 'id<TAB>text<TAB>title', got "
                            f"{header!r}. Use DPR's psgs_w100.tsv (or a file in that format).")
        for lineno, row in enumerate(tqdm(reader, desc=f"reading {path.name}", unit=" psg",
                                          mininterval=5), start=2):
            if len(row) != 3:
                raise DataError(f"{path}:{lineno}: expected 3 tab-separated fields, got "
                                f"{len(row)}.")
            out.append(Passage(pid=row[0], title=row[2], text=row[1]))
    return out


def _dpr_source(path: str | None) -> tuple[Callable[[], list[Passage]], dict]:
    def missing() -> list[Passage]:
        raise DataError(
            "Corpus 'wikipedia-dpr' needs its passages file for this step, but corpus.path is "
            f"{path!r}{' (not found)' if path else ''}. Download DPR's psgs_w100.tsv "
            "(https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz, 13 GB "
            "unpacked) and pass corpus.path=/path/to/psgs_w100.tsv. BM25 with the prebuilt "
            "pyserini index (retriever=bm25-wikipedia-dpr) does not need it.")

    if not path or not Path(path).expanduser().exists():
        return missing, {"path": None}
    p = Path(path).expanduser().resolve()
    st = p.stat()
    return (lambda: read_dpr_tsv(p)), {"path": str(p), "size": st.st_size,
                                         "mtime": int(st.st_mtime)}


# ---- loaders (conf/corpus/*.yaml `_target_`s) -------------------------------------------
def _settings(chunk: int | None, exclude_titles: Collection[str]) -> dict:
    """The loading settings every corpus records (part of its cache key)."""
    return {"chunk_words": chunk, "exclude_titles": sorted({nfc(t) for t in exclude_titles})}


def wiki_vital_corpus(*, name: str, chunk_words: int | None,
                      exclude_titles: Collection[str]) -> Corpus:
    """The embedded vital-article leads, held-out LM articles removed (ragrepro.data.vital)."""
    return Corpus(name, _apply(vital.corpus_passages(), chunk_words, exclude_titles),
                  settings=_settings(chunk_words, exclude_titles))


def foldoc_corpus(*, name: str, path: str | None, chunk_words: int | None,
                  exclude_titles: Collection[str]) -> Corpus:
    """FOLDOC entries from Debian's dict-foldoc files in `path` (null: $FOLDOC_DIR or
    /usr/share/dictd; `make setup-foldoc`), held-out evaluated entries removed."""
    return Corpus(name, _apply(foldoc.corpus_passages(Path(path) if path else None), chunk_words,
                               exclude_titles), settings=_settings(chunk_words, exclude_titles))


def dpr_tsv_corpus(*, name: str, path: str | None, chunk_words: int | None,
                   exclude_titles: Collection[str]) -> Corpus:
    """A DPR-format passages TSV (psgs_w100.tsv), read lazily: keyed by the file's identity."""
    read, source_id = _dpr_source(path)
    return Corpus(name, loader=lambda: _apply(read(), chunk_words, exclude_titles),
                  source_id=source_id, settings=_settings(chunk_words, exclude_titles))


def load_corpus(name: str, chunk_words: int | None = None, path: str | None = None,
                exclude_titles: Collection[str] = (), **_) -> Corpus:
    """The corpus of conf/corpus/<name>.yaml with these arguments (callers that name a corpus
    by a string; a run's own corpus is its composed `corpus` node)."""
    given: dict = {"chunk_words": chunk_words, "exclude_titles": list(exclude_titles)}
    if path is not None:
        given["path"] = path
    try:
        return instantiate(OmegaConf.merge(group_config("corpus", name), given),
                           _convert_="all")
    except InstantiationException as e:  # the loader's own error says what to do
        if e.__cause__ is not None:
            raise e.__cause__ from None
        raise


def corpus_from_passages(name: str, passages: list[Passage]) -> Corpus:
    """An in-memory corpus (tests, user code)."""
    return Corpus(name, list(passages))


__all__ = [
    "Corpus",
    "chunk_words",
    "content_fingerprint",
    "corpus_from_passages",
    "load_corpus",
    "nfc",
    "read_dpr_tsv",
]
