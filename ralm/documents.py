"""Documents for In-Context RALM evaluation: retrieval hits as the official dicts, their
official token encoding, and the titles a run must never retrieve. Shared by the evaluation
pipeline (ralm.lm_eval) and the predictive reranker's training (ralm.reranker)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragrepro.data.vital import heldout_titles
from ragrepro.errors import ConfigError

from . import official_format as off

if TYPE_CHECKING:
    from ragrepro.models.lm import LM


def hit_dict(h: Any) -> dict[str, Any]:
    return {"id": h.pid, "title": h.title, "text": h.text, "score": float(h.score)}


def forbidden_titles(value: str | None, dataset_name: str | None) -> list[str]:
    """`ralm.forbidden_titles`. `auto`: wiki-vital -> its held-out LM titles; wikitext-103 ->
    the official 125-line list, which must be given as a file (ralm.forbidden_titles=PATH);
    other datasets -> none. `none` -> none; a path -> one title per line."""
    if value in (None, "none"):
        return []
    if value != "auto":
        p = Path(str(value)).expanduser()
        if not p.exists():
            raise ConfigError(f"ralm.forbidden_titles={value!r}: file not found. Give a text "
                              f"file with one title per line, `auto` or `none`.")
        return [t.strip().strip('"') for t in p.read_text(encoding="utf-8").splitlines()
                if t.strip()]
    name = dataset_name
    if name == "wiki-vital":
        return heldout_titles()
    if name == "wikitext-103":
        raise ConfigError(
            "WikiText-103 needs the official forbidden-titles list (its dev/test articles, "
            "removed from Wikipedia retrieval): download ralm/retrievers/"
            "wikitext103_forbidden_titles.txt from AI21Labs/in-context-ralm and set "
            "ralm.forbidden_titles=/path/to/it (or ralm.forbidden_titles=none to skip the filter).")
    return []


def doc_encoder(lm: LM, max_tokens: int, bos_first: bool):
    """The official encoding of a document: title + "\\n" + text, tokenizer.encode with its
    default special tokens, truncated to max_tokens."""
    cache: dict[str, list[int]] = {}

    def encode(doc: dict) -> list[int]:
        text = off.doc_text(doc)
        if text not in cache:
            ids = lm.tokenizer(text, add_special_tokens=True, truncation=True,
                               max_length=max_tokens)["input_ids"]
            if bos_first and lm.bos_id is not None and (not ids or ids[0] != lm.bos_id):
                ids = ([lm.bos_id] + list(ids))[:max_tokens]
            cache[text] = list(ids)
        return cache[text]

    return encode
