"""What the filtered context handed to the generator was, per test sample (issue 22).

A FilCo row can be weak because the filter outputs nothing (the generator then reads a
prompt ending in `context:` that it never saw in training), because it copies a fluent
sentence without the answer, or because the generator fails on a good context. Four facts
per sample tell these apart; `ragrepro.generation.summarize` turns them into row rates
(`diag_ctx_empty`, ...):

    ctx_empty         the filtered context is empty (before any test-time fallback)
    ctx_from_passage  it is made only of whole sentences of the passages (verbatim copies)
    ctx_has_answer    it holds a gold answer (SQuAD normalisation, whole tokens: the
                      normaliser of every FilCo task's paper metric)
    ctx_is_silver     it equals the example's silver context (None when not computed)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from .measures import candidate_spans, contains_normalized


def _ws(text: str) -> str:
    """Whitespace collapsed: sentences are joined by a space (join_spans) or a newline."""
    return " ".join(text.split())


def made_of_sentences(text: str, sentences: Sequence[str]) -> bool:
    """True iff `text` is a sequence of the given sentences (each whole, any order, repeats
    allowed) separated by whitespace. Empty text is not a copy of anything."""
    text = _ws(text)
    sents = {t for t in (_ws(s) for s in sentences) if t}
    if not text or not sents:
        return False
    # positions reachable by whole sentences; a dynamic programme, not a greedy match,
    # because one sentence can be a prefix of another
    todo, seen = [0], {0}
    while todo:
        i = todo.pop()
        for s in sents:
            if not text.startswith(s, i):
                continue
            j = i + len(s)
            if j == len(text):
                return True
            if text[j] == " " and j + 1 not in seen:
                seen.add(j + 1)
                todo.append(j + 1)
    return False


def has_answer(text: str, answers: Sequence[str]) -> bool:
    """Some gold answer's normalised tokens occur contiguously in the text's."""
    return any(contains_normalized(text, a) for a in answers)


def is_silver(text: str, silver: str | None) -> bool | None:
    """Equal to the silver context up to whitespace; None when no silver was computed."""
    return None if silver is None else _ws(text) == _ws(silver)


def context_diag(context: str, passages: Sequence[str], answers: Sequence[str],
                 split: Callable[[str], list[str]], silver: str | None = None) -> dict:
    """The four facts of one sample's filtered context (see the module doc)."""
    sentences = [s.text for s in candidate_spans(passages, split)]
    return {"ctx_empty": not context.strip(),
            "ctx_from_passage": made_of_sentences(context, sentences),
            "ctx_has_answer": has_answer(context, answers),
            "ctx_is_silver": is_silver(context, silver)}
