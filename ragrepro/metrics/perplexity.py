"""Perplexity from summed NLLs. Token and word level share the same NLL sum; only the
denominator differs, and the word-count rule is named so a number is never unlabelled."""
from __future__ import annotations

WORD_COUNT_RULES = ("spaces", "whitespace_split")


def count_words(text: str, rule: str = "spaces") -> int:
    """`spaces`: the official In-Context RALM rule, `text.count(" ")`.
    `whitespace_split`: lm-evaluation-harness's `len(re.split(r"\\s+", text))`-style count of
    whitespace-separated words."""
    if rule == "spaces":
        return text.count(" ")
    if rule == "whitespace_split":
        return len(text.split())
    raise ValueError(f"unknown word-count rule {rule!r}; use one of {WORD_COUNT_RULES}")


def ppl_token(nll_sum: float, n_tokens: int) -> tuple[float, float]:
    """Token-level perplexity: exp(sum NLL / number of tokens)."""
    return (nll_sum, n_tokens)


def ppl_word(nll_sum: float, n_words: int) -> tuple[float, float]:
    """Word-level perplexity: exp(sum NLL / number of words, by the recorded rule)."""
    return (nll_sum, n_words)

