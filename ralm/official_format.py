"""Retrieval files in the official In-Context RALM format (prepare_retrieval_data.py).

One JSON list per evaluated text, one entry per evaluation window:

    {"begin_location": prev_end, "end_location": end, "future": decode(ids[prev_end:end]),
     "query": "...", "retrieved_docs": [{"text": ..., "title": ..., "score": ...}, ...]}

The official eval_lm.py reads such a file and asserts that its window bounds equal its own.
We write one for every run (so the official code can read our retrievals) and read one in
place of searching (`retrieval.from_file=FILE.json`), after checking that its windows match
this run's tokenizer, stride and max_length.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrepro.errors import ConfigError, DataError
from ragrepro.io import atomic_write_json, read_json

from .windows import Window

ENTRY_KEYS = ("begin_location", "end_location", "retrieved_docs")


def entry(window: Window, future: str, query: str, docs: Sequence[dict[str, Any]]) -> dict:
    # window 0's begin_location is 0 in the official file (prev_end_loc starts at 0)
    begin = 0 if window.index == 0 else window.target_start
    return {"begin_location": begin, "end_location": window.end, "future": future,
            "query": query, "retrieved_docs": [dict(d) for d in docs]}


def write_file(path: Path, texts: Sequence[Sequence[dict]], joined: bool) -> None:
    """joined stream: the official single list; per-document streams: a list of lists."""
    data: Any = list(texts[0]) if joined and len(texts) == 1 else [list(t) for t in texts]
    atomic_write_json(path, data)


def read_file(path: str | Path) -> list[list[dict]]:
    """The file's entries, one list per text (an official file holds one text)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"retrieval file {p} not found (retrieval.from_file).")
    data = read_json(p)
    if not isinstance(data, list) or not data:
        raise DataError(f"{p}: expected a non-empty JSON list of window entries "
                        f"(official prepare_retrieval_data.py format).")
    texts = data if isinstance(data[0], list) else [data]
    for t, entries in enumerate(texts):
        for i, e in enumerate(entries):
            missing = [k for k in ENTRY_KEYS if not isinstance(e, dict) or k not in e]
            if missing:
                raise DataError(f"{p}: text {t} entry {i} lacks {missing}; each entry needs "
                                f"begin_location, end_location, retrieved_docs.")
            for j, d in enumerate(e["retrieved_docs"]):
                if not isinstance(d, dict) or "text" not in d:
                    raise DataError(f"{p}: text {t} entry {i} document {j} has no 'text'.")
    return texts


def _file_stride(entries: Sequence[dict]) -> int | None:
    if len(entries) >= 3:
        return int(entries[2]["end_location"]) - int(entries[1]["end_location"])
    return None


def check_windows(path: str | Path, entries: Sequence[dict], windows: Sequence[Window],
                  stride: int, max_length: int, n_tokens: int, text_index: int = 0) -> None:
    """Fail, naming the setting that differs, unless the file's windows are this run's."""
    where = f"retrieval file {path} (text {text_index})"
    if len(entries) == len(windows) and all(
            int(e["begin_location"]) == (0 if w.index == 0 else w.target_start)
            and int(e["end_location"]) == w.end for e, w in zip(entries, windows)):
        return
    problems = []
    file_end = int(entries[-1]["end_location"]) if entries else 0
    if file_end != n_tokens:
        problems.append(f"its windows cover {file_end} tokens but this run's tokenizer gives "
                        f"{n_tokens} for the text: the file was made with another tokenizer "
                        f"(model) or another dataset/limit")
    first_end = int(entries[0]["end_location"]) if entries else 0
    if first_end != min(max_length, n_tokens):
        problems.append(f"its first window ends at {first_end}, this run's at "
                        f"{min(max_length, n_tokens)}: its max_length differs from "
                        f"ralm.max_length={max_length}")
    fs = _file_stride(entries)
    if fs is not None and fs != stride:
        problems.append(f"its stride is {fs}, this run's ralm.stride={stride}")
    if not problems:
        problems.append(f"it has {len(entries)} windows, this run {len(windows)}")
    raise ConfigError(f"{where} does not match this run: " + "; ".join(problems) +
                      ". Make the file with the same model (tokenizer), ralm.stride and "
                      "ralm.max_length, or change them to the file's.")


def docs_of(entry_: dict) -> list[dict]:
    return list(entry_.get("retrieved_docs") or [])


def doc_text(doc: dict) -> str:
    """The official eval_lm.py layout: title + "\\n" + text when a title exists."""
    title = doc.get("title")
    return f"{title}\n{doc['text']}" if title else str(doc["text"])


def dumps_check(data: Any) -> str:  # used by tests: the file must be plain JSON
    return json.dumps(data, ensure_ascii=False)
