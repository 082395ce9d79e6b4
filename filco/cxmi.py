"""CXMI scores with a real model, batched.

The official `measure_ctxs.py` scores one sentence at a time, recomputing the no-context
probability for every sentence (its issue #3: very slow). Here every row of every example
(one no-context row per example, one row per sentence) goes through the model in length-sorted
batches; the one-at-a-time path is kept for the benchmark and the equality test."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragrepro.errors import ConfigError

from .encoding import prompt_ids, target_ids
from .measures import cxmi_log_ratio
from .prompts import code_cxmi_inputs, gen_prompt, gen_target
from .tasks import Task

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CxmiItem:
    """One example to score: its question, the output o, and its candidate sentences."""

    question: str
    output: str
    sentences: tuple[str, ...]


@dataclass
class CxmiScorer:
    """Scores log M(o|t+q) - log M(o|q) for every sentence t of an example.
    prompt='paper': the M_gen prompt with and without the context line, target `answer: o`;
    prompt='code': the official calc_cxmi strings, target o raw."""

    lm: LM
    task: Task
    prompt: str = "paper"
    batch_size: int = 16
    max_input_tokens: int | None = 1024

    def _texts(self, item: CxmiItem) -> tuple[str, list[str], str]:
        if self.prompt == "paper":
            base = gen_prompt(self.task, item.question, None)
            ctx = [gen_prompt(self.task, item.question, s) for s in item.sentences]
            return base, ctx, gen_target(self.task, item.output)
        if self.prompt == "code":
            pairs = [code_cxmi_inputs(item.question, s) for s in item.sentences]
            base = code_cxmi_inputs(item.question, "")[1]
            return base, [p[0] for p in pairs], item.output
        raise ConfigError(f"filco.cxmi.prompt={self.prompt!r}; use 'paper' or 'code'.")

    def _rows(self, items: Sequence[CxmiItem]) -> tuple[list[tuple[str, str]], list[int]]:
        """(source, target) per row: per example its base row then its sentence rows."""
        rows: list[tuple[str, str]] = []
        sizes = []
        for it in items:
            base, ctx, tgt = self._texts(it)
            rows.append((base, tgt))
            rows += [(c, tgt) for c in ctx]
            sizes.append(1 + len(ctx))
        return rows, sizes

    def _score(self, rows: Sequence[tuple[str, str]], batch_size: int) -> list[np.ndarray]:
        if self.lm.kind == "causal":
            inputs, starts = [], []
            for src, tgt in rows:
                p = prompt_ids(self.lm, src, self.max_input_tokens)
                inputs.append(p + target_ids(self.lm, tgt))
                starts.append(len(p))
            return self.lm.score_targets(inputs, starts, batch_size=batch_size)
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))
        scored = self.lm.score_seq2seq([rows[i][0] for i in order], [rows[i][1] for i in order],
                                       batch_size=batch_size)
        out: list[np.ndarray] = [np.zeros(0)] * len(rows)
        for i, s in zip(order, scored):
            out[i] = s
        return out

    def log_ratios(self, items: Sequence[CxmiItem]) -> list[list[float]]:
        """Batched across sentences and examples."""
        rows, sizes = self._rows(items)
        logps = self._score(rows, self.batch_size)
        out, k = [], 0
        for n in sizes:
            base = logps[k]
            out.append([cxmi_log_ratio(lp, base) for lp in logps[k + 1:k + n]])
            k += n
        return out

    def log_ratios_one_at_a_time(self, items: Sequence[CxmiItem]) -> list[list[float]]:
        """The official code's schedule: per sentence, one forward pass with it and one
        without, batch size 1."""
        out = []
        for it in items:
            base, ctx, tgt = self._texts(it)
            ratios = []
            for c in ctx:
                lp_base = self._score([(base, tgt)], 1)[0]
                lp_ctx = self._score([(c, tgt)], 1)[0]
                ratios.append(cxmi_log_ratio(lp_ctx, lp_base))
            out.append(ratios)
        return out
