"""FOLDOC (the Free On-line Dictionary of Computing, GFDL) as an optional mini LM corpus and
dataset, read from Debian's `dict-foldoc` dictd files (`make setup-foldoc`).

An entry is a dictd record: headword lines (the title, then alias names), a blank line, and an
indented body whose `{link}` braces mark cross-references; we keep the link text. Entries of
20+ words are kept. Held-out evaluated entries (150-400 words, chosen by the hash of their
title, so the split never depends on file order) are removed from the corpus. FOLDOC's alias
entries ("computer cookie" for "HTTP cookie") can still repeat an evaluated entry under
another title: run with near-duplicate exclusion (ralm.near_dup, on at mini scale).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, DataError
from .common import finish_docs
from .records import LMDoc, Passage

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
DEFAULT_DIR = "/usr/share/dictd"
MIN_WORDS = 20
HELDOUT_WORDS = (150, 400)
HELDOUT_PER_SPLIT = 10
_LINK = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Entry:
    title: str
    aliases: tuple[str, ...]
    body: str

    @property
    def n_words(self) -> int:
        return len(self.body.split())


def b64_number(s: str) -> int:
    """dictd's index numbers: base-64 digits, most significant first."""
    v = 0
    for c in s:
        i = B64.find(c)
        if i < 0:
            raise DataError(f"bad dictd base-64 digit {c!r} in {s!r}")
        v = v * 64 + i
    return v


def index_spans(index_text: str) -> list[tuple[int, int]]:
    """Distinct (offset, length) records of a dictd index, in offset order (several
    headwords may point to one record)."""
    spans = set()
    for line in index_text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        spans.add((b64_number(parts[1]), b64_number(parts[2])))
    return sorted(spans)


def clean_body(text: str) -> str:
    """Strip `{link}` braces and the indentation; paragraphs stay separated by a blank line."""
    text = _LINK.sub(r"\1", text)
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
    return "\n\n".join(p for p in paras if p)


def parse_record(record: str) -> Entry | None:
    """One dictd record -> Entry; None for the 00-database-* metadata records."""
    head, _, body = record.strip("\n").partition("\n\n")
    names = [x.strip() for x in head.splitlines() if x.strip()]
    if not names or names[0].startswith("00-database") or names[0].startswith("00database"):
        return None
    return Entry(names[0], tuple(names[1:]), clean_body(body))


def read_entries(index_text: str, data: bytes) -> list[Entry]:
    out = []
    for off, n in index_spans(index_text):
        e = parse_record(data[off:off + n].decode("utf-8", errors="replace"))
        if e is not None and e.n_words >= MIN_WORDS:
            out.append(e)
    return out


def split_of(e: Entry) -> str:
    """`test`/`dev` for held-out candidates (150-400 words), by title hash; else `corpus`."""
    lo, hi = HELDOUT_WORDS
    return "candidate" if lo <= e.n_words <= hi else "corpus"


def heldout(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """The first 10 candidates by sha256(title) are `test`, the next 10 `dev`."""
    cands = sorted((e for e in entries if split_of(e) == "candidate"),
                   key=lambda e: hashlib.sha256(e.title.encode()).hexdigest())
    k = HELDOUT_PER_SPLIT
    return {"test": cands[:k], "dev": cands[k:2 * k]}


def foldoc_dir() -> Path:
    d = Path(os.environ.get("FOLDOC_DIR", DEFAULT_DIR))
    if not (d / "foldoc.index").exists() or not (d / "foldoc.dict.dz").exists():
        raise ConfigError(f"FOLDOC dictd files not found in {d} (foldoc.index, foldoc.dict.dz). "
                          f"Run `make setup-foldoc` (installs Debian's dict-foldoc package), or "
                          f"set FOLDOC_DIR to a folder holding both files.")
    return d


def load_entries(directory: Path | None = None) -> list[Entry]:
    d = directory or foldoc_dir()
    with gzip.open(d / "foldoc.dict.dz") as f:  # dictzip is gzip-compatible
        data = f.read()
    return read_entries((d / "foldoc.index").read_text(encoding="utf-8"), data)


def as_lm_doc(e: Entry) -> LMDoc:
    return LMDoc(doc_id=e.title, title=e.title, text=f"{e.title}\n\n{e.body}\n\n")


def lm_docs(split: str = "test", directory: Path | None = None) -> list[LMDoc]:
    if split not in ("dev", "test"):
        raise ConfigError(f"foldoc has held-out splits dev and test, not {split!r}.")
    return [as_lm_doc(e) for e in heldout(load_entries(directory))[split]]


def foldoc_docs(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
                path: str | None) -> list[LMDoc]:
    """Loader of conf/dataset/foldoc.yaml: held-out entries of split dev or test, from the
    dictd files in `path` (null: $FOLDOC_DIR or /usr/share/dictd)."""
    return finish_docs(lm_docs(split, Path(path) if path else None), name, split, limit)


def corpus_passages(directory: Path | None = None) -> list[Passage]:
    """Every kept entry except the held-out ones (dev and test), one passage each."""
    entries = load_entries(directory)
    held = {e.title for es in heldout(entries).values() for e in es}
    return [Passage(pid=f"foldoc-{i}", title=e.title, text=e.body)
            for i, e in enumerate(entries) if e.title not in held]
