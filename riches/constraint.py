"""What a hypothesis may emit next: free text, a corpus continuation inside a key, or the rest
of a close marker. Shared by the RICHES beam loop and the transformers LogitsProcessor.

Tokenisation contract (why keys decode to what the model emits): every key is indexed as the
tokenisation of " " + key text, which is exactly how it follows the open marker " <<" in the
prompt's few-shot examples (prompts are assembled segment by segment from the same token
ids). The markers are single tokens in both embedded vocabularies (" <<", " >>"); every other
vocabulary entry that contains "<<" or ">>" is masked in free text, so a key can only be
opened or closed by the official marker tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from ragrepro.errors import ConfigError

from . import markers
from .index import CorpusIndex, Span
from .index_sharded import ShardSpan
from .markers import MarkerSpec, MarkerState, Mode

WORD_START_PREFIXES = ("Ġ", "▁", " ")


# -- tokenizer facts ---------------------------------------------------------------------
def vocab_size_of(tokenizer: Any) -> int:
    return len(tokenizer)


def marker_spec(tokenizer: Any, open_text: str = " <<", close_text: str = " >>") -> MarkerSpec:
    enc = lambda s: tuple(tokenizer(s, add_special_tokens=False)["input_ids"])
    return MarkerSpec(enc(open_text), enc(close_text))


def key_token_ids(tokenizer: Any, texts: list[str], leading: str = " ") -> list[list[int]]:
    """The decoding-time tokenisation of keys: as they appear after the open marker."""
    if not texts:
        return []
    return tokenizer([leading + t for t in texts], add_special_tokens=False)["input_ids"]


def token_strings(tokenizer: Any) -> list[str]:
    return [s or "" for s in tokenizer.convert_ids_to_tokens(list(range(vocab_size_of(tokenizer))))]


def word_start_ids(strings: list[str]) -> np.ndarray:
    """Tokens that begin a word (a leading space in byte-level BPE or SentencePiece)."""
    return np.array([i for i, s in enumerate(strings) if s.startswith(WORD_START_PREFIXES)],
                    dtype=np.int64)


def marker_lookalike_ids(strings: list[str], spec: MarkerSpec) -> np.ndarray:
    """Tokens containing '<<' or '>>' that are not the open marker: banned in free text."""
    allowed = set(spec.open)
    return np.array([i for i, s in enumerate(strings)
                     if ("<<" in s or ">>" in s) and i not in allowed] + list(spec.close),
                    dtype=np.int64)


# -- per-hypothesis state ----------------------------------------------------------------
@dataclass(frozen=True)
class HypState:
    marker: MarkerState = field(default_factory=MarkerState)
    span: Span | ShardSpan | None = None  # the index span of the key prefix inside a key


@dataclass(frozen=True)
class Allowed:
    """kind: 'free' (everything but `banned`), 'key' or 'forced' (only `ids`)."""

    kind: str
    ids: np.ndarray | None = None
    banned: np.ndarray | None = None
    can_close: bool = False


@dataclass
class KeyConstraint:
    """The decoding constraint of one RICHES configuration.

    start: 'anywhere' (a key is any substring of an indexed key) or 'key' (it starts where
    an indexed key starts). end: 'anywhere' or 'key' (the close marker is allowed only where
    an indexed key ends). min_key_tokens: the close marker needs at least this many key
    tokens. start_at_word: the first key token must begin a word.
    """

    index: CorpusIndex
    spec: MarkerSpec
    vocab_size: int
    start: str = "anywhere"
    end: str = "anywhere"
    min_key_tokens: int = 1
    start_at_word: bool = True
    word_starts: np.ndarray | None = None
    free_banned: np.ndarray | None = None
    enabled: bool = True  # False: markers are parsed but nothing is constrained (no-retrieval)

    def __post_init__(self) -> None:
        for name, v in (("start", self.start), ("end", self.end)):
            if v not in ("anywhere", "key"):
                raise ConfigError(f"riches key {name}={v!r}; use 'anywhere' or 'key'.")
        if self.index.sep < self.vocab_size:
            raise ConfigError("index separator collides with a vocabulary id; rebuild the index "
                              "with this tokenizer's vocabulary size.")
        if self.start_at_word and self.word_starts is None:
            raise ConfigError("start_at_word needs the tokenizer's word-start ids.")

    @classmethod
    def for_tokenizer(cls, index: CorpusIndex, tokenizer: Any, open_text: str = " <<",
                      close_text: str = " >>", **kw: Any) -> KeyConstraint:
        spec = marker_spec(tokenizer, open_text, close_text)
        strings = token_strings(tokenizer)
        return cls(index=index, spec=spec, vocab_size=vocab_size_of(tokenizer),
                   word_starts=word_start_ids(strings),
                   free_banned=marker_lookalike_ids(strings, spec), **kw)

    def _key_banned(self) -> np.ndarray | None:
        """Free text inside an unconstrained key: the close marker is allowed, the
        look-alikes stay banned (a key ends only at the official close marker), and so does
        the open marker (keys do not nest; SmolLM2 without retrieval reopened its key over
        and over instead of closing it)."""
        if self.free_banned is None:
            return None
        kept = self.free_banned[self.free_banned != self.spec.close[0]]
        return np.union1d(kept, np.asarray(self.spec.open, dtype=np.int64))

    def initial(self) -> HypState:
        return HypState()

    def _key_root(self) -> Span | ShardSpan:
        return self.index.key_start() if self.start == "key" else self.index.root()

    def advance(self, state: HypState, token: int) -> HypState:
        m = markers.step(self.spec, state.marker, int(token))
        if m.mode is not Mode.KEY:
            return HypState(m, None)
        if state.marker.mode is not Mode.KEY:  # the open marker was just completed
            return HypState(m, self._key_root() if self.enabled else None)
        span = self.index.narrow(state.span, int(token)) if state.span is not None else None
        return HypState(m, span)

    def allowed(self, state: HypState) -> Allowed:
        m = state.marker
        if m.mode is Mode.CLOSING:
            return Allowed("forced", ids=np.array([self.spec.close[m.close_pos]], dtype=np.int64))
        if m.mode is Mode.FREE:
            return Allowed("free", banned=self.free_banned)
        if not self.enabled:
            # no-retrieval (§5.4): the evidence is free text, but the close marker is the
            # only way out of a key, so it must stay allowed inside one
            return Allowed("free", banned=self._key_banned())
        assert state.span is not None
        ch = self.index.children(state.span)
        toks = ch.tokens
        ends_here = bool(len(toks)) and toks[-1] == self.index.sep  # sep is the largest id
        ids = toks[:-1] if ends_here else toks
        ids = ids[ids != self.spec.close[0]]  # the close marker always means "close"
        if not m.key and self.start_at_word:
            ids = np.intersect1d(ids, self.word_starts, assume_unique=True)
        long_enough = len(m.key) >= self.min_key_tokens
        can_close = long_enough and (self.end == "anywhere" or ends_here)
        if can_close:
            ids = np.append(ids, self.spec.close[0])
        return Allowed("key", ids=ids.astype(np.int64), can_close=can_close)


def mask_scores(row: torch.Tensor, allowed: Allowed) -> torch.Tensor:
    """Scores with every disallowed token at -inf (a new tensor)."""
    if allowed.kind == "free":
        out = row.clone()
        if allowed.banned is not None and len(allowed.banned):
            out[torch.as_tensor(allowed.banned, device=row.device)] = -float("inf")
        return out
    out = torch.full_like(row, -float("inf"))
    if allowed.ids is not None and len(allowed.ids):
        idx = torch.as_tensor(allowed.ids, device=row.device)
        out[idx] = row[idx]
    return out


class RichesLogitsProcessor(LogitsProcessor):
    """The constraint as a transformers LogitsProcessor (for model.generate / LM.generate).

    The state of each row is recomputed from its generated tokens (input_ids[:, prompt_len:])
    and memoised by token tuple, so it survives beam reordering: one marker step and one
    index narrowing per row per call. `prompt_len` is the (left-padded) prompt width.
    A row with no allowed token (a dead end) gets the close marker, so generation can go on.
    """

    def __init__(self, constraint: KeyConstraint, prompt_len: int) -> None:
        self.constraint = constraint
        self.prompt_len = prompt_len
        self._memo: dict[tuple[int, ...], HypState] = {(): constraint.initial()}

    def state_of(self, generated: tuple[int, ...]) -> HypState:
        if generated in self._memo:
            return self._memo[generated]
        parent = self.state_of(generated[:-1])
        state = self.constraint.advance(parent, generated[-1])
        self._memo[generated] = state
        return state

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = scores.clone()
        for r in range(scores.shape[0]):
            state = self.state_of(tuple(int(t) for t in input_ids[r, self.prompt_len:]))
            allowed = self.constraint.allowed(state)
            if allowed.kind == "key" and not len(allowed.ids):
                allowed = Allowed("forced", ids=np.array([self.constraint.spec.close[0]]))
            out[r] = mask_scores(scores[r], allowed)
        return out
