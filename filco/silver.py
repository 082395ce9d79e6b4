"""Silver contexts t_silver: the sentences of the top-k retrieved passages that the task's
measure selects (paper §2.2-2.3), plus the official code's fallbacks when nothing passes."""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from ragrepro.errors import ConfigError
from ragrepro.metrics.qa import normalize_squad

from .cxmi import CxmiItem, CxmiScorer
from .measures import MeasureSpec, Span, candidate_spans, join_spans, select_spans

log = logging.getLogger(__name__)

# Examples labelled together (their CXMI rows scored in one batch sequence). Sharded
# labelling (filco/silver_shards.py) cuts parts at multiples of it, so every part scores the
# same batches as one process and writes the same labels.
SILVER_CHUNK = 16


@dataclass(frozen=True)
class Example:
    """What FilCo needs of one example: query, gold outputs, ranked passage texts."""

    qid: str
    question: str
    answers: tuple[str, ...]
    passages: tuple[str, ...]
    task: str = "qa"
    titles: tuple[str, ...] = ()
    gold_titles: tuple[str, ...] = ()


@dataclass
class Silver:
    text: str
    spans: list[tuple[int, int]] = field(default_factory=list)  # (passage rank, sentence index)
    passages: list[int] = field(default_factory=list)           # ranks of passages used

    @property
    def empty(self) -> bool:
        return not self.text


def choose_output(answers: Sequence[str], passages: Sequence[str]) -> str:
    """The output o used as M_gen's target (and CXMI's scored output), as the code builds it:
    in the highest-ranked passage containing any answer, the first answer (in list order) it
    contains; otherwise the first answer. Containment: lower-case substring (code rule)."""
    for p in passages:
        low = p.lower()
        for a in answers:
            if a and a.lower() in low:
                return a
    return answers[0] if answers else ""


def cxmi_output(spec: MeasureSpec, ex: Example) -> str:
    """The output CXMI scores: M_gen's target (paper) or answers[0] (measure_ctxs.calc_cxmi)."""
    if spec.cxmi_output == "first_answer":
        return ex.answers[0] if ex.answers else ""
    return choose_output(ex.answers, ex.passages)


def silver_from_spans(spans: Sequence[Span]) -> Silver:
    return Silver(text=join_spans(spans), spans=[(s.passage, s.index) for s in spans],
                  passages=sorted({s.passage for s in spans}))


def silver_contexts(examples: Sequence[Example], spec: MeasureSpec,
                    split: Callable[[str], list[str]], scorer: CxmiScorer | None = None,
                    chunk: int = SILVER_CHUNK) -> list[Silver]:
    """Silver context of every example. CXMI rows of `chunk` examples are scored together."""
    out: list[Silver] = []
    for start in tqdm(range(0, len(examples), chunk), desc=f"silver {spec.name}", leave=False):
        part = examples[start:start + chunk]
        spans = [candidate_spans(ex.passages, split) for ex in part]
        ratios: list[list[float] | None] = [None] * len(part)
        if spec.name == "cxmi":
            if scorer is None:
                raise ConfigError("The CXMI measure needs a scoring model (filco.cxmi.scorer).")
            items = [CxmiItem(ex.question, cxmi_output(spec, ex), tuple(s.text for s in sp))
                     for ex, sp in zip(part, spans)]
            ratios = list(scorer.log_ratios(items))
        for ex, sp, lr in zip(part, spans, ratios):
            chosen = select_spans(spec, sp, task=ex.task, query=ex.question,
                                  outputs=list(ex.answers), log_ratios=lr)
            out.append(silver_from_spans(chosen))
    return out


# -- what the models see when the silver context is empty (code behaviour, reference §3) --
def gen_train_context(silver: Silver, passages: Sequence[str], rule: str = "top1") -> str:
    """M_gen training input context. rule='top1' (code): the top-1 passage when nothing
    passed; 'empty': an empty context."""
    if silver.text or rule == "empty":
        return silver.text
    return passages[0] if passages else ""


def ctx_train_target(silver: Silver, rule: str = "empty", passages: Sequence[str] = ()) -> str:
    """M_ctx training target. rule='empty' (code; 'expected' per the author, issue #4): the
    empty string; 'top1': the top-1 passage; 'drop' is handled by the caller."""
    if silver.text or rule == "empty":
        return silver.text
    return passages[0] if passages else ""


def eval_context(predicted: str, passages: Sequence[str], rule: str = "none") -> str:
    """Test-time M_gen context from the filter's prediction. rule='none' (code:
    replace_context has no fallback); 'top1' falls back to the top-1 passage."""
    if predicted.strip() or rule == "none":
        return predicted
    return passages[0] if passages else ""


def psg_labels(silver: Silver, n_passages: int) -> list[bool]:
    """Psg baseline labels: a passage is kept iff the sentence-level measure selected a span
    from it (the code has no Psg script; this ties Psg to the same measure as FilCo)."""
    return [i in set(silver.passages) for i in range(n_passages)]


def answer_in(text: str, answers: Sequence[str]) -> bool:
    """Table 2 recall for extractive QA: a normalised answer occurs in the passage."""
    norm = f" {normalize_squad(text)} "
    return any(normalize_squad(a) and f" {normalize_squad(a)} " in norm for a in answers)
