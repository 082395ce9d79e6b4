"""The three FilCo filtering measures (paper §2.2) and the official code's variants.

Everything here is pure: a span is a sentence of a retrieved passage, scores are numbers,
selection returns spans. Model probabilities for CXMI come in as log-probability arrays
(see `filco.cxmi` for how they are computed).

Paper vs official code (reference §3), each a named switch in `MeasureSpec`:
  StrInc   paper: the FIRST span whose normalised tokens contain the output
           code : EVERY sentence containing an answer as a raw lower-case substring
  Lexical  paper: word unigram F1 vs the output (vs the query for FEVER), best span > 0.5
           code : character-bag "F1" (Counter over the normalised string) vs the answers,
                  best sentence per passage with score >= 0.0
  CXMI     paper: M_gen(o|t+q) / M_gen(o|q) as a ratio (here: log-ratio), best span above
                  the threshold (ratio 1.0 = log-ratio 0; see `CXMI_THRESHOLD_NOTE`)
           code : sigmoid(log-ratio) from off-the-shelf Flan-T5-XL, best sentence per passage
                  with score >= 0.0 (so never empty)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragrepro.errors import ConfigError
from ragrepro.metrics.qa import normalize_squad, token_f1

from .metrics import char_f1_filco

MEASURES = ("strinc", "lexical", "cxmi")
CXMI_THRESHOLD_NOTE = (
    "The paper's text says CXMI lambda = 0.0 while its footnote 4 says 1.0 'naturally "
    "distinguishes context that adds to or reduces output probability' and gave the best "
    "results. A ratio threshold of 0.0 would keep every span (ratios are positive), so we follow "
    "the footnote: ratio > 1.0, i.e. log-ratio > 0.")


@dataclass(frozen=True)
class Span:
    """One candidate sentence: its passage rank, its index in the passage, its text."""

    passage: int
    index: int
    text: str


def candidate_spans(passages: Sequence[str], split) -> list[Span]:
    """All sentences of the ranked passages, in rank then reading order.
    `split` maps a passage text to its sentences (see `filco.split`)."""
    return [Span(i, j, s) for i, p in enumerate(passages) for j, s in enumerate(split(p))]


# -- per-span scores ---------------------------------------------------------------------
def contains_normalized(text: str, output: str) -> bool:
    """Paper StrInc: the output's SQuAD-normalised tokens occur contiguously in the text's."""
    needle, hay = normalize_squad(output).split(), normalize_squad(text).split()
    if not needle:
        return False
    n = len(needle)
    return any(hay[i:i + n] == needle for i in range(len(hay) - n + 1))


def contains_raw(text: str, output: str) -> bool:
    """Official-code StrInc (`has_answer`): raw lower-case substring, no word boundaries."""
    return bool(output) and output.lower() in text.lower()


def strinc(text: str, outputs: Sequence[str], match: str = "normalized") -> bool:
    test = {"normalized": contains_normalized, "raw": contains_raw}.get(match)
    if test is None:
        raise ConfigError(f"strinc match={match!r}; use 'normalized' (paper) or 'raw' (code).")
    return any(test(text, o) for o in outputs)


def lexical(text: str, references: Sequence[str], f1: str = "token") -> float:
    """Unigram F1 of the span against each reference, max over references.
    f1='token': words after SQuAD normalisation (paper); 'char': the code's character bag."""
    fn = {"token": token_f1, "char": char_f1_filco}.get(f1)
    if fn is None:
        raise ConfigError(f"lexical f1={f1!r}; use 'token' (paper) or 'char' (code).")
    return max((fn(text, r) for r in references), default=0.0)


def cxmi_log_ratio(logp_with: np.ndarray, logp_without: np.ndarray) -> float:
    """log M(o|t+q) - log M(o|q) from per-token log-probs of the same output o. Summing logs
    instead of multiplying probabilities (as the code does) cannot underflow on long outputs."""
    return float(np.sum(logp_with, dtype=np.float64) - np.sum(logp_without, dtype=np.float64))


def sigmoid(x: float) -> float:
    """Numerically stable logistic; the code's CXMI score is sigmoid(log-ratio)."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


# -- selection ---------------------------------------------------------------------------
def select_first(spans: Sequence[Span], flags: Sequence[bool]) -> list[Span]:
    """Paper StrInc: the first span (rank, then reading order) that passes."""
    for s, f in zip(spans, flags):
        if f:
            return [s]
    return []


def select_all(spans: Sequence[Span], flags: Sequence[bool]) -> list[Span]:
    """Code StrInc: every passing sentence, in order."""
    return [s for s, f in zip(spans, flags) if f]


def select_best_above(spans: Sequence[Span], scores: Sequence[float],
                      threshold: float) -> list[Span]:
    """Paper Lexical/CXMI: argmax over spans scoring strictly above the threshold; ties go to
    the earlier span (higher-ranked passage)."""
    best, best_score = None, -math.inf
    for s, v in zip(spans, scores):
        if v > threshold and v > best_score:
            best, best_score = s, v
    return [best] if best is not None else []


def select_top_per_passage(spans: Sequence[Span], scores: Sequence[float], threshold: float,
                           num_sents: int = 1) -> list[Span]:
    """Code Lexical/CXMI (`get_sent`): in each passage, the `num_sents` best sentences with
    score >= threshold (ties: earlier sentence), passages in rank order."""
    out: list[Span] = []
    by_passage: dict[int, list[tuple[float, Span]]] = {}
    for s, v in zip(spans, scores):
        by_passage.setdefault(s.passage, []).append((v, s))
    for p in sorted(by_passage):
        ranked = sorted(by_passage[p], key=lambda vs: (-vs[0], vs[1].index))
        out += [s for v, s in ranked[:num_sents] if v >= threshold]
    return out


def join_spans(spans: Sequence[Span]) -> str:
    """The filtered context: selected sentences joined by spaces (as the code does)."""
    return " ".join(s.text for s in spans)


# -- the measure settings ----------------------------------------------------------------
@dataclass(frozen=True)
class MeasureSpec:
    """A measure and its switches. `from_mode` fills unset switches from 'paper' or 'code'."""

    name: str
    mode: str = "paper"
    strinc_match: str = "normalized"      # normalized | raw
    strinc_select: str = "first"          # first | all
    lexical_f1: str = "token"             # token | char
    lexical_reference: str = "auto"       # auto (query for FEVER, else output) | output | query
    select: str = "best"                  # best | per_passage (lexical, cxmi)
    threshold: float = 0.5                # lexical: F1; cxmi: ratio (form=ratio) or sigmoid
    cxmi_form: str = "ratio"              # ratio (compared in log space) | sigmoid
    num_sents: int = 1                    # per_passage selection
    cxmi_output: str = "chosen"           # chosen (M_gen's target o) | first_answer (code)

    @classmethod
    def from_mode(cls, name: str, mode: str = "paper", **overrides) -> MeasureSpec:
        if name not in MEASURES:
            raise ConfigError(f"filco.measure={name!r}; use one of {MEASURES}.")
        if mode not in ("paper", "code"):
            raise ConfigError(f"filco.measure_mode={mode!r}; use 'paper' or 'code'.")
        paper = mode == "paper"
        base = {
            "name": name, "mode": mode,
            "strinc_match": "normalized" if paper else "raw",
            "strinc_select": "first" if paper else "all",
            "lexical_f1": "token" if paper else "char",
            "lexical_reference": "auto" if paper else "output",
            "select": "best" if paper else "per_passage",
            "threshold": (0.5 if name == "lexical" else 1.0) if paper else 0.0,
            "cxmi_form": "ratio" if paper else "sigmoid",
            # measure_ctxs.calc_cxmi scores answers[0]; the paper scores the output o
            "cxmi_output": "chosen" if paper else "first_answer",
        }
        base.update({k: v for k, v in overrides.items() if v is not None})
        spec = cls(**base)
        spec.check()
        return spec

    def check(self) -> None:
        if self.cxmi_form == "ratio" and self.name == "cxmi" and self.threshold <= 0:
            raise ConfigError(
                f"CXMI ratio threshold {self.threshold} <= 0 keeps every span (ratios are "
                f"positive). Use a positive ratio (paper footnote: 1.0), or cxmi_form=sigmoid.")
        if self.cxmi_output not in ("chosen", "first_answer"):
            raise ConfigError(f"cxmi_output={self.cxmi_output!r}; use 'chosen' or "
                              f"'first_answer'.")
        if self.select not in ("best", "per_passage"):
            raise ConfigError(f"select={self.select!r}; use 'best' or 'per_passage'.")

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def lexical_references(spec: MeasureSpec, task: str, query: str,
                       outputs: Sequence[str]) -> list[str]:
    ref = spec.lexical_reference
    if ref == "auto":
        ref = "query" if task == "fever" else "output"
    if ref not in ("output", "query"):
        raise ConfigError(f"lexical_reference={ref!r}; use auto, output or query.")
    return [query] if ref == "query" else list(outputs)


def cxmi_value(spec: MeasureSpec, log_ratio: float) -> float:
    """The score compared with the threshold: log-ratio (ratio form, threshold in log space
    below) or the code's sigmoid of it."""
    return sigmoid(log_ratio) if spec.cxmi_form == "sigmoid" else log_ratio


def cxmi_threshold(spec: MeasureSpec) -> float:
    return math.log(spec.threshold) if spec.cxmi_form == "ratio" else spec.threshold


def select_spans(spec: MeasureSpec, spans: Sequence[Span], *, task: str, query: str,
                 outputs: Sequence[str], log_ratios: Sequence[float] | None = None) -> list[Span]:
    """Apply the measure to the candidate spans of one example. CXMI needs `log_ratios`
    (one per span, from `filco.cxmi`)."""
    if spec.name == "strinc":
        flags = [strinc(s.text, outputs, spec.strinc_match) for s in spans]
        return select_first(spans, flags) if spec.strinc_select == "first" else select_all(spans, flags)
    if spec.name == "lexical":
        refs = lexical_references(spec, task, query, outputs)
        scores = [lexical(s.text, refs, spec.lexical_f1) for s in spans]
        threshold = spec.threshold
    else:
        if log_ratios is None or len(log_ratios) != len(spans):
            raise ConfigError("CXMI selection needs one log-ratio per candidate span.")
        scores = [cxmi_value(spec, lr) for lr in log_ratios]
        threshold = cxmi_threshold(spec)
    if spec.select == "best":
        return select_best_above(spans, scores, threshold)
    return select_top_per_passage(spans, scores, threshold, spec.num_sents)
