"""RICHES beam search over a decoder-only model with a KV cache (§3.1, §3.3).

Adaptive beam (the paper's final setting): a hypothesis inside a key proposes its `beam_size`
best allowed tokens; a hypothesis in free text proposes only its single best token (greedy),
so free "thoughts" cannot fill the beam with small variations. With `adaptive=False` every
hypothesis proposes `beam_size` tokens (plain constrained beam search).

Scores are sums of the model's log-probabilities of the chosen tokens (Eq. 2: masking
disallowed tokens does not renormalise; Z is never computed). `renormalize=True` instead
scores each token by its log-probability renormalised over the allowed set.
"""
from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from .constraint import Allowed, HypState, KeyConstraint, mask_scores
from .markers import Mode

log = logging.getLogger(__name__)


@dataclass
class BeamConfig:
    beam_size: int = 10
    adaptive: bool = True
    max_new_tokens: int = 128
    renormalize: bool = False
    length_penalty: float = 0.0  # final score = sum logp / len**length_penalty
    stop_strings: tuple[str, ...] = ("\n\n",)
    stop_window: int = 8  # tokens decoded to look for a stop string
    # when set, the end of the answer line (a newline after the last answer prefix) also
    # stops a hypothesis: the demonstrations end with their answer
    answer_prefix: str | None = None


@dataclass
class Hypothesis:
    tokens: list[int]
    score: float
    state: HypState
    reason: str = ""  # eos | stop | length
    steps_constrained: int = 0

    def final_score(self, length_penalty: float) -> float:
        return self.score / (max(len(self.tokens), 1) ** length_penalty) if length_penalty else self.score


class StepModel(Protocol):
    """Next-token logits for a growing batch of hypotheses that share a prompt."""

    def start(self, prompt: Sequence[int]) -> torch.Tensor: ...  # [1, V]

    def step(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor: ...  # [n, V]


class HFStepModel:
    """A transformers causal LM with its KV cache reordered to follow the beam.

    The few-shot prefix is shared by every question: `start(prompt, shared=n)` reuses the
    cache of the first n prompt tokens from the previous call when they are identical, so
    only the question is prefilled."""

    def __init__(self, model: Any, device: str = "cpu") -> None:
        self.model = model
        self.device = device
        self.cache: Any = None
        params = inspect.signature(model.forward).parameters
        # transformers 5 names the cache argument `cache`; 4.x `past_key_values`
        self._cache_arg = "cache" if "cache" in params else "past_key_values"
        self._keep_arg = "logits_to_keep" if "logits_to_keep" in params else None
        self._prefix: tuple[tuple[int, ...], Any] | None = None
        self._copy = copy.deepcopy

    def _forward(self, ids: torch.Tensor, cache: Any) -> tuple[torch.Tensor, Any]:
        kw: dict[str, Any] = {"use_cache": True}
        if cache is not None:
            kw[self._cache_arg] = cache
        if self._keep_arg:
            kw[self._keep_arg] = 1  # vocabulary logits only for the last position
        out = self.model(input_ids=ids, **kw)
        new = out.get("cache") if hasattr(out, "get") and out.get("cache") is not None \
            else out.past_key_values
        return out.logits[:, -1].float(), new

    @torch.no_grad()
    def start(self, prompt: Sequence[int], shared: int = 0) -> torch.Tensor:
        prompt = [int(t) for t in prompt]
        cache = None
        rest = prompt
        if 0 < shared < len(prompt):
            head = tuple(prompt[:shared])
            if self._prefix is None or self._prefix[0] != head:
                _, pc = self._forward(torch.tensor([list(head)], device=self.device), None)
                self._prefix = (head, pc)
            cache = self._copy(self._prefix[1])
            rest = prompt[shared:]
        logits, self.cache = self._forward(torch.tensor([rest], device=self.device), cache)
        return logits

    @torch.no_grad()
    def step(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        self.cache.reorder_cache(torch.tensor(list(parents), device=self.device))
        ids = torch.tensor(list(tokens), device=self.device)[:, None]
        logits, self.cache = self._forward(ids, self.cache)
        return logits


@dataclass
class BeamStats:
    steps: int = 0
    max_live: int = 0
    expansions: list[int] = field(default_factory=list)  # candidates proposed per step


def width_for(allowed: Allowed, cfg: BeamConfig) -> int:
    """How many continuations a hypothesis proposes (the adaptive rule of §3.3)."""
    if allowed.kind == "forced":
        return 1
    if allowed.kind == "key" or not cfg.adaptive:
        return cfg.beam_size
    return 1


def propose(logp: torch.Tensor, allowed: Allowed, width: int,
            renormalize: bool) -> list[tuple[float, int]]:
    """(token log-prob, token) of a hypothesis's best `width` allowed continuations."""
    masked = mask_scores(logp, allowed)
    finite = int(torch.isfinite(masked).sum())
    k = min(width, finite)
    if k == 0:
        return []
    vals, ids = masked.topk(k)
    if renormalize:
        vals = vals - torch.logsumexp(masked, dim=-1)
    return [(float(v), int(i)) for v, i in zip(vals, ids)]


def beam_search(model: StepModel, prompt: Sequence[int], constraint: KeyConstraint,
                cfg: BeamConfig, decode: Callable[[Sequence[int]], str],
                eos_ids: Sequence[int] = (), stats: BeamStats | None = None,
                shared_prefix: int = 0, start_state: HypState | None = None) -> list[Hypothesis]:
    """Hypotheses best first: finished ones (EOS or a stop string in free text) before
    those cut at max_new_tokens, each group by final score. `start_state` is the marker and
    index state after the prompt (default: free text; e.g. a prompt ending in the open
    marker starts inside a key)."""
    eos = {int(e) for e in eos_ids}
    logits = model.start(prompt, shared_prefix) if shared_prefix else model.start(prompt)
    live = [Hypothesis([], 0.0, start_state or constraint.initial())]
    finished: list[Hypothesis] = []
    for _ in range(cfg.max_new_tokens):
        logp = torch.log_softmax(logits.float(), dim=-1)
        cands: list[tuple[float, int, int]] = []
        for i, h in enumerate(live):
            allowed = constraint.allowed(h.state)
            for lp, tok in propose(logp[i], allowed, width_for(allowed, cfg), cfg.renormalize):
                cands.append((h.score + lp, i, tok))
        if stats is not None:
            stats.steps += 1
            stats.expansions.append(len(cands))
        cands.sort(key=lambda c: -c[0])
        nxt: list[Hypothesis] = []
        parents: list[int] = []
        for score, i, tok in cands:
            h = live[i]
            in_free = h.state.marker.mode is Mode.FREE
            if tok in eos and in_free:
                finished.append(Hypothesis(h.tokens + [tok], score, h.state, "eos",
                                           h.steps_constrained))
                continue
            state = constraint.advance(h.state, tok)
            nh = Hypothesis(h.tokens + [tok], score, state, "",
                            h.steps_constrained + (0 if in_free else 1))
            if state.marker.mode is Mode.FREE and _has_stop(nh.tokens, cfg, decode):
                nh.reason = "stop"
                finished.append(nh)
                continue
            nxt.append(nh)
            parents.append(i)
            if len(nxt) == cfg.beam_size:
                break
        live = nxt
        if stats is not None:
            stats.max_live = max(stats.max_live, len(live))
        if not live or _done(finished, live, cfg):
            break
        logits = model.step(parents, [h.tokens[-1] for h in live])
    for h in live:
        h.reason = "length"
    done = sorted(finished, key=lambda h: -h.final_score(cfg.length_penalty))
    cut = sorted(live, key=lambda h: -h.final_score(cfg.length_penalty))
    return done + cut


def _has_stop(tokens: list[int], cfg: BeamConfig, decode: Callable[[Sequence[int]], str]) -> bool:
    if not cfg.stop_strings and not cfg.answer_prefix:
        return False
    tail = decode(tokens[-cfg.stop_window:])
    if any(s in tail for s in cfg.stop_strings):
        return True
    # the whole text is decoded only when the tail holds a line end
    return bool(cfg.answer_prefix) and "\n" in tail and \
        answer_line_ended(decode(tokens), str(cfg.answer_prefix))


def answer_line_ended(text: str, answer_prefix: str) -> bool:
    """Whether `text` holds an answer line and its end: the answer is complete."""
    i = text.rfind(answer_prefix)
    return i >= 0 and "\n" in text[i + len(answer_prefix):]


def _done(finished: list[Hypothesis], live: list[Hypothesis], cfg: BeamConfig) -> bool:
    if len(finished) >= cfg.beam_size:
        return True
    if finished and cfg.length_penalty == 0:
        # Log-probs only fall as a hypothesis grows, so no live one can overtake the best
        # finished one: stopping here returns exactly the same top beam.
        best = max(h.score for h in finished)
        return best >= max(h.score for h in live)
    return False

