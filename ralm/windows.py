"""Window arithmetic of In-Context RALM's evaluation loop, as pure functions.

The official `eval_lm.py` slides a window of `max_length` (L) tokens by `stride` (s) over one
token stream of N tokens. Window 0 is [0, L) and scores tokens 1..L-1; window i >= 1 is
[i*s, i*s + L) and scores only the tokens after the previous window's end; the last window
ends at N. Every token 1..N-1 is scored exactly once. Unlike the official code (which crashes
when N < L) a stream shorter than one window gives a single shorter window.

A retrieved document overwrites the first len(doc) positions of a window (reference §3.4):
the input stays as long as the window and its oldest prefix tokens are dropped, the paper's
"[doc; prefix trimmed from the left]" (§3.1).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragrepro.errors import ConfigError


@dataclass(frozen=True)
class Window:
    """One evaluation window: input tokens [begin, end), scored tokens [target_start, end)."""

    index: int
    begin: int
    end: int
    target_start: int

    @property
    def n_scored(self) -> int:
        return self.end - self.target_start

    @property
    def length(self) -> int:
        return self.end - self.begin


def make_windows(n_tokens: int, max_length: int, stride: int) -> list[Window]:
    """The official loop's windows over a stream of n_tokens (reference §3.2)."""
    if max_length < 2:
        raise ConfigError(f"ralm.max_length={max_length}: a window needs at least 2 tokens.")
    if not 1 <= stride <= max_length - 1:
        raise ConfigError(f"ralm.stride={stride} must be in 1..max_length-1 ({max_length - 1}).")
    if n_tokens < 2:
        return []  # nothing to score: token 0 is never scored
    out: list[Window] = []
    prev_end = 0
    for begin in range(0, n_tokens, stride):
        end = min(begin + max_length, n_tokens)
        # window 0 scores from token 1: the first token has no context
        out.append(Window(len(out), begin, end, max(prev_end, 1)))
        prev_end = end
        if end == n_tokens:
            break
    return out


def expected_window_count(n_tokens: int, max_length: int, stride: int) -> int:
    """1 + ceil((N - L) / s) for N >= L; one window for 2 <= N < L."""
    if n_tokens < 2:
        return 0
    if n_tokens <= max_length:
        return 1
    return 1 + -(-(n_tokens - max_length) // stride)


def retrieval_plan(windows: Sequence[Window], retrieval_stride: int) -> list[int | None]:
    """For each window, the index of the window whose boundary triggered the retrieval it
    uses (None: no document, i.e. window 0).

    With retrieval_stride == stride every window i >= 1 retrieves at its own boundary, which
    is the official behaviour. A larger retrieval stride retrieves again only once the
    boundary has moved at least retrieval_stride tokens since the last retrieval; windows in
    between reuse that document (the paper's separate s; official issue #11)."""
    if retrieval_stride < 1:
        raise ConfigError(f"ralm.retrieval_stride={retrieval_stride} must be >= 1.")
    plan: list[int | None] = []
    last: int | None = None
    for w in windows:
        if w.index == 0:
            plan.append(None)
            continue
        if last is None or w.target_start - windows[last].target_start >= retrieval_stride:
            last = w.index
        plan.append(last)
    return plan


def query_span(boundary: int, query_len: int) -> tuple[int, int]:
    """Token span of the retrieval query: the query_len tokens ending at the boundary (Eq. 4)."""
    if query_len < 1:
        raise ConfigError(f"ralm.query_len={query_len} must be >= 1.")
    return max(0, boundary - query_len), boundary


def place_doc(stream: Sequence[int], window: Window, doc: Sequence[int] | None,
              bos_id: int | None = None) -> tuple[list[int], int]:
    """The model input of a window and the offset of its first scored token in it.

    With a document, its tokens overwrite the first len(doc) positions (official code): the
    input is [doc ; last (window length - len(doc)) tokens]. Without one, `bos_id` (if given)
    overwrites position 0 of a window that does not start the stream, for models that need
    BOS at the start of every input. Scored positions never move."""
    ids = list(stream[window.begin:window.end])
    start = window.target_start - window.begin
    if doc:
        if len(doc) > start:
            raise ConfigError(
                f"a {len(doc)}-token document does not fit before the {window.n_scored} scored "
                f"tokens of a {window.length}-token window: lower ralm.doc_max_tokens or raise "
                f"ralm.max_length (need doc_max_tokens + stride + rerank_tokens < max_length).")
        ids[:len(doc)] = list(doc)
    elif bos_id is not None and window.begin > 0 and ids:
        ids[0] = bos_id
    return ids, start


def rerank_input(stream: Sequence[int], window: Window, doc: Sequence[int],
                 rerank_tokens: int, oracle: bool) -> tuple[list[int], int, int]:
    """Input and scored span [a, b) (offsets in the input) for ranking one document in the
    window that holds the retrieval boundary (reference §3.5).

    zero-shot: the rerank_tokens tokens before the boundary given [doc; earlier prefix]
    (paper Eq. 6); oracle: the window's own target tokens. The input is the full window with
    the document placed, so the evaluated LM can score both spans in one pass."""
    ids, start = place_doc(stream, window, doc)
    if oracle:
        return ids, start, len(ids)
    a = start - rerank_tokens
    if a < max(len(doc), 1):
        raise ConfigError(
            f"the document ({len(doc)} tokens) overlaps the {rerank_tokens} prefix tokens the "
            f"zero-shot reranker scores (window of {window.length} tokens, boundary at offset "
            f"{start}). Need doc_max_tokens + stride + rerank_tokens < max_length: lower "
            f"ralm.doc_max_tokens or ralm.rerank_tokens, or raise ralm.max_length.")
    return ids, a, start


# transformers' PreTrainedTokenizerBase.clean_up_tokenization (unchanged from 4.28 to today):
# what decode(..., clean_up_tokenization_spaces=True) applies after decoding.
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


def clean_up_tokenization(text: str) -> str:
    """Removes the spaces before punctuation and English contractions, in this order."""
    for old, new in _CLEAN_UP:
        text = text.replace(old, new)
    return text


def query_text(decoded: str, clean_spaces: bool) -> str:
    """The retrieval query string from its decoded tokens. The official eval_lm.py decodes
    with the tokenizer default, which in transformers 4.28 cleaned up tokenization spaces
    (ralm.query_clean_spaces=true); false keeps the raw decoding."""
    return clean_up_tokenization(decoded) if clean_spaces else decoded

