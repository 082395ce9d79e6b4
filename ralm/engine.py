"""The In-Context RALM evaluation loop over one token stream, batched.

Per block of windows: retrieve for the windows that start a retrieval, choose a document
(rerank), place it before the window's prefix, and score the window's new tokens. Window 0
has no document. With the evaluated LM as the zero-shot/oracle scorer, ranking and target
scoring share one pass per candidate, as in the official code (reference §3.5).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragrepro.errors import ConfigError, NumericsError

from . import rerank as rr
from .settings import RunSettings
from .windows import (
    Window,
    make_windows,
    place_doc,
    query_span,
    query_text,
    rerank_input,
    retrieval_plan,
)

log = logging.getLogger(__name__)


class DocSource(Protocol):
    """Where documents come from: a retriever, or an official-format retrieval file."""

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict[str, Any]]]: ...


class Scorer(Protocol):
    """The LM interface the engine needs (ragrepro.models.lm.LM satisfies it)."""

    def score_targets(self, inputs: Sequence[Sequence[int]], target_starts: Sequence[int],
                      batch_size: int = 8) -> list[np.ndarray]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str: ...


@dataclass
class Choice:
    """One retrieval: its query, its candidate documents and the chosen one."""

    window: int
    query: str
    docs: list[dict[str, Any]]
    chosen: int | None
    rerank_scores: list[float] | None = None
    doc_tokens: list[int] | None = None
    # the chosen row's target log-probs when ranking already scored the retrieval window
    target_logprobs: np.ndarray | None = None

    def record(self) -> dict[str, Any]:
        return {"window": self.window, "query": self.query, "docs": self.docs,
                "chosen": self.chosen, "rerank_scores": self.rerank_scores}


@dataclass
class StreamEval:
    """Evaluates one token stream. Callbacks: `encode_doc(doc) -> token ids` (truncated, the
    official special-token policy); `predict(prefix_text, docs) -> scores` for predictive;
    `zeroshot_other(...)` when the scoring LM is not the evaluated one."""

    lm: Scorer
    settings: RunSettings
    source: DocSource | None
    encode_doc: Callable[[dict[str, Any]], list[int]]
    bos_id: int | None = None
    predict: Callable[[str, list[dict[str, Any]]], list[float]] | None = None
    zeroshot_other: Callable[[Sequence[int], Window, list[dict[str, Any]]], list[float]] | None = None
    on_window: Callable[[dict[str, Any]], None] | None = None
    on_retrieval: Callable[[dict[str, Any]], None] | None = None
    text_index: int = 0
    reranker_prefix_tokens: int | None = None
    # doc -> whether encode_doc cut it to doc_max_tokens (the window's `doc_truncated`)
    doc_cut: Callable[[dict[str, Any]], bool] | None = None
    choices: dict[int, Choice] = field(default_factory=dict)

    # -- public ---------------------------------------------------------------------------
    def run(self, stream: Sequence[int], done: dict[int, dict] | None = None,
            restored: dict[int, dict] | None = None, progress: Any = None) -> list[dict[str, Any]]:
        """Evaluate every window not in `done`; returns all window records, in order.
        `restored` holds retrieval records of a killed run (its documents and choices)."""
        s = self.settings
        done = dict(done or {})
        windows, plan = self.plan_of(len(stream))
        for w_idx, rec in (restored or {}).items():
            self.choices[w_idx] = self._restore(rec)
        todo = [w for w in windows if w.index not in done]
        for b in range(0, len(todo), s.ralm.batch_windows):
            block = todo[b:b + s.ralm.batch_windows]
            self._retrieve(stream, windows, plan, block)
            for rec in self._score(stream, plan, block):
                done[rec["window"]] = rec
                if self.on_window:
                    self.on_window(rec)
            if progress is not None:
                progress.update(len(block))
        return [done[w.index] for w in windows]

    def plan_of(self, n_tokens: int) -> tuple[list[Window], list[int | None]]:
        """The windows, and per window the retrieval window whose document it uses (None:
        no document; every window for a variant that does not retrieve)."""
        s = self.settings
        windows = make_windows(n_tokens, s.ralm.max_length, s.ralm.stride)
        plan = retrieval_plan(windows, s.retrieval_stride)
        return windows, (plan if s.rerank.retrieves else [None] * len(windows))

    def query_of(self, stream: Sequence[int], window: Window) -> str:
        r = self.settings.ralm
        a, b = query_span(window.target_start, r.query_len)
        return query_text(self.lm.decode(stream[a:b]), r.query_clean_spaces)

    # -- retrieval and reranking ------------------------------------------------------------
    def _restore(self, rec: dict) -> Choice:
        ch = Choice(window=rec["window"], query=rec["query"], docs=rec["docs"],
                    chosen=rec["chosen"], rerank_scores=rec.get("rerank_scores"))
        if ch.chosen is not None:
            ch.doc_tokens = self.encode_doc(ch.docs[ch.chosen])
        return ch

    def _retrieve(self, stream: Sequence[int], windows: list[Window], plan: list[int | None],
                  block: list[Window]) -> None:
        needed = sorted({plan[w.index] for w in block} - {None} - set(self.choices))
        if not needed:
            return
        if self.source is None:
            raise ConfigError("ralm.rerank needs documents but no retriever or file was given.")
        rwins = [windows[i] for i in needed]  # type: ignore[index]
        queries = [self.query_of(stream, w) for w in rwins]
        all_docs = self.source.docs(self.text_index, rwins, queries)
        new: list[Choice] = []
        for w, q, docs in zip(rwins, queries, all_docs):
            docs = list(docs)[: self.settings.ralm.k]
            new.append(Choice(window=w.index, query=q, docs=docs, chosen=None))
        self._choose(stream, windows, new)
        for ch in new:
            self.choices[ch.window] = ch
            if self.on_retrieval:
                self.on_retrieval(ch.record())

    def _choose(self, stream: Sequence[int], windows: list[Window], new: list[Choice]) -> None:
        """Each new retrieval's choice, as its variant (settings.rerank) makes it; the LM
        rankings of all of them in one batched pass."""
        s, v = self.settings, self.settings.rerank
        lm_rows: list[tuple[Choice, int, list[int], int, int, int]] = []
        for ch in new:
            if not ch.docs:
                continue  # no document: the window is scored without retrieval
            if v.trained:
                self._predict(stream, windows[ch.window], ch)
            elif v.lm_ranked and v.ranks_prefix and self.zeroshot_other is not None:
                nll = self.zeroshot_other(stream, windows[ch.window], ch.docs)
                ch.rerank_scores = [float(x) for x in nll]
                ch.chosen = rr.choose_min_nll(nll)
            elif v.lm_ranked:  # with the evaluated LM: one pass per candidate
                w = windows[ch.window]
                for j, d in enumerate(ch.docs):
                    ids, a, b = rerank_input(stream, w, self.encode_doc(d), s.ralm.rerank_tokens,
                                             oracle=v.ranks_targets)
                    lm_rows.append((ch, j, ids, a, b, w.target_start - w.begin))
            else:
                ch.chosen = v.pick(len(ch.docs), s.seed, ch.window)
        if lm_rows:
            self._rank_by_lm(new, lm_rows)
        for ch in new:
            if ch.chosen is not None and ch.doc_tokens is None:
                ch.doc_tokens = self.encode_doc(ch.docs[ch.chosen])

    def _predict(self, stream: Sequence[int], window: Window, ch: Choice) -> None:
        """The trained reranker's scores of the candidates given the prefix (Eq. 8)."""
        if self.predict is None:
            raise ConfigError("ralm/rerank=predictive needs a trained reranker.")
        a, b = query_span(window.target_start,
                          self.reranker_prefix_tokens or self.settings.ralm.query_len)
        scores = self.predict(self.lm.decode(stream[a:b]), ch.docs)
        ch.rerank_scores = [float(x) for x in scores]
        ch.chosen = rr.choose_max_score(scores)

    def _rank_by_lm(self, new: list[Choice],
                    lm_rows: list[tuple[Choice, int, list[int], int, int, int]]) -> None:
        """Score every (retrieval, candidate) row; each retrieval keeps the least NLL and, for
        its own window, the chosen row's target log-probs (scored in the same pass)."""
        lps = self.lm.score_targets([r[2] for r in lm_rows], [r[3] for r in lm_rows],
                                    batch_size=self.settings.batch_size)
        per: dict[int, list[tuple[float, np.ndarray]]] = {}
        for (ch, j, ids, a, b, start), lp in zip(lm_rows, lps):
            rank_nll = -float(np.sum(lp[: b - a]))
            per.setdefault(ch.window, []).append((rank_nll, lp[start - a:]))
        for ch in new:
            if ch.window in per:
                rows = per[ch.window]
                ch.rerank_scores = [r[0] for r in rows]
                ch.chosen = rr.choose_min_nll(ch.rerank_scores)
                ch.target_logprobs = rows[ch.chosen][1]

    # -- scoring ----------------------------------------------------------------------------
    def _score_inputs(self, inputs: list[list[int]], starts: list[int], todo: list[int],
                      block: list[Window]) -> list[np.ndarray]:
        """Score window inputs; a non-finite value stops the run naming the window(s)."""
        try:
            return self.lm.score_targets(inputs, starts, batch_size=self.settings.batch_size)
        except NumericsError as e:
            by_index = {w.index: w for w in block}
            bad = [by_index[todo[r]] for r in (e.rows or range(len(todo)))]
            where = ", ".join(f"window {w.index} (tokens {w.begin}-{w.end})" for w in bad)
            raise NumericsError(f"text {self.text_index}, {where}: {e}. Try dtype=float32 or "
                                f"check the model file.") from e

    def _score(self, stream: Sequence[int], plan: list[int | None],
               block: list[Window]) -> list[dict[str, Any]]:
        inputs, starts, todo = [], [], []
        found: dict[int, np.ndarray] = {}
        for w in block:
            ch = self.choices.get(plan[w.index]) if plan[w.index] is not None else None
            if ch is not None and ch.window == w.index and ch.target_logprobs is not None:
                found[w.index] = ch.target_logprobs  # scored in the ranking pass
                continue
            doc = ch.doc_tokens if ch is not None and ch.chosen is not None else None
            ids, start = place_doc(stream, w, doc,
                                   bos_id=self.bos_id if self.settings.window_bos else None)
            inputs.append(ids)
            starts.append(start)
            todo.append(w.index)
        if inputs:
            for i, lp in zip(todo, self._score_inputs(inputs, starts, todo, block)):
                found[i] = lp
        out = []
        for w in block:
            lp = found[w.index]
            ch = self.choices.get(plan[w.index]) if plan[w.index] is not None else None
            rec: dict[str, Any] = {
                "text": self.text_index, "window": w.index, "begin": w.begin, "end": w.end,
                "target_start": w.target_start, "n_scored": len(lp),
                "nll_sum": -float(np.sum(lp)), "retrieval_window": plan[w.index]}
            if len(lp) != w.n_scored:
                raise AssertionError(f"window {w.index}: scored {len(lp)} of {w.n_scored}")
            if ch is not None:
                rec["query"] = ch.query
                if ch.chosen is not None:
                    d = ch.docs[ch.chosen]
                    rec.update(doc_rank=ch.chosen, doc_pid=d.get("id", d.get("pid")),
                               doc_title=d.get("title"), doc_score=d.get("score"),
                               doc_tokens=len(ch.doc_tokens or []),
                               rerank_score=(ch.rerank_scores[ch.chosen]
                                             if ch.rerank_scores else None))
                else:
                    rec["doc_rank"] = None
            rec["diag"] = self._window_diag(ch)
            out.append(rec)
        return out

    def _window_diag(self, ch: Choice | None) -> dict[str, bool | None]:
        """no_document: the window was scored without a retrieved document (window 0, a
        rerank=none run, a retrieval with no hit); doc_truncated: its document was cut to
        doc_max_tokens (None without a document, or when the caller cannot tell)."""
        doc = ch.docs[ch.chosen] if ch is not None and ch.chosen is not None else None
        cut = bool(self.doc_cut(doc)) if doc is not None and self.doc_cut else None
        return {"no_document": doc is None, "doc_truncated": cut}
