"""Pipeline `ralm.lm_eval.run`: In-Context RALM perplexity with optional retrieval and
reranking (paper §3-§6; official eval_lm.py + prepare_retrieval_data.py).

Hydra builds its inputs (ralm/conf/ralm/base.yaml `pipeline:`): the evaluated LM, the texts, the
typed `ralm` settings and, unbuilt (ragrepro.deferred), the parts only some cells use: the
corpus and retriever, a second scoring LM, the reranker's labelling LM and the dataset config.
Per window it appends one record to samples.jsonl (the resume checkpoint) and per retrieval
one to retrievals.jsonl; at the end it writes retrieval.json in the official format.
"""
from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragrepro import shards
from ragrepro.data.records import LMDoc
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError, DataError
from ragrepro.generation import summarize
from ragrepro.io import append_line, atomic_write_text, read_json, read_jsonl_tolerant
from ragrepro.metrics import get_metric
from ragrepro.metrics.perplexity import count_words
from ragrepro.pipeline import Result
from ragrepro.retrieval import index_row
from ragrepro.tracking import Run

from . import official_format as off
from .documents import doc_encoder, forbidden_titles
from .engine import DocSource, StreamEval
from .reranker import TrainingInputs, get_reranker
from .settings import RalmSettings, RerankerSettings, RunSettings
from .sources import (
    Documents,
    RetrieverSource,
    build_retriever,
    document_source,
    near_dup_filter,
    other_zeroshot,
)

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)

__all__ = ["RetrieverSource", "aggregate", "run", "streams_of"]


# -- inputs -------------------------------------------------------------------------------
def streams_of(docs: Sequence[LMDoc], mode: str) -> list[str]:
    """joined: one text, the documents concatenated with "" (official eval_lm.py);
    per_document: one text per document, each its own stream."""
    if mode == "joined":
        return ["".join(d.text for d in docs)]
    if mode == "per_document":
        return [d.text for d in docs]
    raise ConfigError(f"ralm.stream={mode!r}; use joined or per_document.")


def resume_state(run: Run) -> tuple[dict[tuple[int, int], dict], dict[tuple[int, int], dict]]:
    """(text, window) -> scored window record and -> retrieval record, from a killed run."""
    done = {(d["text"], d["window"]): d for d in run.repair_samples()}
    restored: dict[tuple[int, int], dict] = {}
    rpath = run.path("retrievals.jsonl")
    if rpath.exists():
        for rec in read_jsonl_tolerant(rpath):
            restored[(rec["text"], rec["window"])] = rec
    if done:
        log.info("Resuming: %d windows already scored", len(done))
    return done, restored


def record_sources(settings: dict[str, Any], d: Documents, rfile: str | None,
                   scorer_info: dict | None, reranker_info: dict[str, Any]) -> None:
    """Add what the documents, the scorer and the reranker were to the row's settings."""
    rs = d.retriever_settings or {}
    settings.update({"retriever": rs.get("name", rs.get("retriever")) if not rfile else "file",
                     "n_forbidden_titles": len(d.exclude), "near_dup": d.near_dup is not None,
                     **(d.near_dup.settings() if d.near_dup is not None else {}),
                     **index_row(getattr(d.source, "retriever", None))})
    if d.near_dup is not None:
        log.info("Near-duplicate exclusion removed %d documents (word %d-gram containment > "
                 "%.2f): %s", len(d.near_dup.removed), d.near_dup.n, d.near_dup.threshold,
                 sorted(d.near_dup.removed.items())[:20])
    if scorer_info:
        settings["scorer_model_revision"] = scorer_info.get("revision")
    if reranker_info:
        settings.update(reranker_model=reranker_info.get("model_key"),
                        reranker_encoder=reranker_info.get("encoder"),
                        reranker_label_model=reranker_info.get("label_model"))


def retrieval_logger(path: Path, text_index: int) -> Callable[[dict], None]:
    """Appends each retrieval of one text to retrievals.jsonl as it happens (resume input)."""
    def log_one(rec: dict) -> None:
        append_line(path, json.dumps({"text": text_index, **rec}, ensure_ascii=False))
    return log_one


# Which windows a run scores: per text, a range of window indices (None: every window).
Selection = dict[int, range] | None
_OUTSIDE: dict[str, Any] = {"outside_shard": True}  # a window another shard scores


def window_counts(lm: LM, s: RunSettings, encode_doc: Callable[[dict], list[int]],
                  streams: Sequence[Sequence[int]]) -> list[int]:
    return [len(StreamEval(lm, s, None, encode_doc).plan_of(len(st))[0]) for st in streams]


def shard_selection(run: Run, counts: Sequence[int], batch_windows: int) -> Selection:
    """The windows of this run's shard: whole blocks of `batch_windows` windows of a text
    (what the unsharded run scores in one batch, so each part's NLL is the same floats);
    None when the run is not a shard."""
    if shards.part_of(run) is None:
        return None
    units = shards.spans(counts, batch_windows)
    return shards.selected(units, shards.items_of(run, len(units)))


def evaluate_streams(run: Run, lm: LM, s: RunSettings, source: DocSource | None,
                     encode_doc: Callable[[dict], list[int]], streams: list[list[int]], desc: str,
                     only: Selection = None,
                     **ev_kwargs: Any) -> tuple[list[list[dict]], list[StreamEval | None]]:
    """Score every window of every stream (or only those of `only`), resuming the windows
    (and retrievals) a killed run already wrote; returns the per-window records and the
    evaluators, per stream (no evaluator for a text `only` leaves out)."""
    done, restored = resume_state(run)
    all_records: list[list[dict]] = []
    evaluators: list[StreamEval | None] = []
    counts = window_counts(lm, s, encode_doc, streams)
    total = sum(counts) if only is None else sum(len(r) for r in only.values())
    with tqdm(total=total, desc=desc, unit="win", initial=len(done)) as bar:
        for ti, st in enumerate(streams):
            if only is not None and ti not in only:
                all_records.append([])
                evaluators.append(None)
                continue
            ev = StreamEval(lm, s, source, encode_doc, bos_id=lm.bos_id,
                            on_window=run.add_sample, text_index=ti,
                            on_retrieval=retrieval_logger(run.path("retrievals.jsonl"), ti),
                            **ev_kwargs)
            mine = {w: d for (t, w), d in done.items() if t == ti}
            if only is not None:  # the other shards' windows count as done, and are dropped
                mine.update({w: _OUTSIDE for w in range(counts[ti]) if w not in only[ti]})
            rest = {w: d for (t, w), d in restored.items() if t == ti}
            all_records.append([r for r in ev.run(st, mine, rest, progress=bar)
                                if r is not _OUTSIDE])
            evaluators.append(ev)
    return all_records, evaluators


def run(run: Run, *, lm: LM, texts: list[LMDoc], settings: RalmSettings, corpus: Deferred,
        retriever: Deferred, retrieval_file: str | None, scorer: Deferred,
        reranker: RerankerSettings | None, label_model: Deferred, dataset: Deferred,
        seed: int, batch_size: int, min_scored_tokens: int = 1) -> Result:
    """Perplexity of `texts` under `lm`, each window conditioned on its chosen document.
    `dataset` is the texts' config (its name picks the forbidden titles; the reranker may
    train on another split of it); `scorer`: a zero-shot scoring LM other than `lm`;
    `min_scored_tokens`: fewer scored tokens are refused before any retriever, reranker or
    scorer is built (check_scored_tokens)."""
    s = RunSettings.of(settings, seed=seed, batch_size=batch_size, model_adds_bos=lm.add_bos,
                       from_file=retrieval_file)
    r, v = s.ralm, s.rerank
    if scorer and not v.ranks_prefix:
        raise ConfigError(f"a scorer model (scorer=...) only applies to ralm/rerank=zeroshot "
                          f"(this run: ralm/rerank={v.name}).")
    docs_text = streams_of(texts, r.stream)
    streams = [lm.encode(t) for t in docs_text]  # the model's BOS policy (Gemma: BOS first)
    check_scored_tokens(streams, texts, r.stream, dataset, min_scored_tokens)
    positions = getattr(lm, "context_size", None)  # the loaded model's; checked before where known
    if positions is not None and r.max_length > positions:
        raise ConfigError(f"ralm.max_length={r.max_length} is above the {positions} token "
                          f"positions of {lm.name}: set ralm.max_length<={positions}.")
    row = s.row(model_adds_bos=lm.add_bos, scorer_name=scorer.name or lm.name,
                corpus_name=corpus.name)
    exclude = forbidden_titles(r.forbidden_titles, dataset.name) if v.searches else []

    def search():
        return (build_retriever(retriever, corpus),
                near_dup_filter(r.near_dup, r.near_dup_ngram, r.near_dup_threshold, docs_text))

    d = document_source(run, s, texts, streams,
                        lambda ids: lm.decode(ids, skip_special_tokens=True), search, exclude)
    predict, reranker_info = None, {}
    if v.trained:
        with run.timed("reranker"):
            predict, reranker_info = get_reranker(TrainingInputs(
                reranker, lm, label_model, dataset, corpus, retriever, r, batch_size))
    zs_other, scorer_info = None, None
    if scorer and scorer.name != lm.name:
        with run.timed("load_scorer"):
            scorer_lm, scorer_info = scorer.build(), scorer.config
        zs_other = other_zeroshot(scorer_lm, lm, s, doc_encoder(scorer_lm, r.doc_max_tokens,
                                                                  scorer_lm.add_bos))
    encode_doc = doc_encoder(lm, r.doc_max_tokens, s.window_bos)
    # The evaluated LM ranks the candidates by full-window passes that the other LM-ranked
    # variant (zero-shot or oracle) of the same sweep process runs identically, and the
    # first-document and predictive cells score rows of those passes: keep them.
    # (an LM-like model of a plug-in or a test without a memo simply runs every pass)
    share = getattr(lm, "share_passes", None)
    shared = bool(zs_other is None and share is not None and share())
    memo = getattr(lm, "pass_memo", None) if shared else None
    before = (memo.hits, memo.misses, memo.row_hits) if memo is not None else (0, 0, 0)
    counts = window_counts(lm, s, encode_doc, streams)
    only = shard_selection(run, counts, r.batch_windows)
    with run.timed("evaluate"):
        all_records, evaluators = evaluate_streams(
            run, lm, s, d.source, encode_doc, streams, f"ralm {lm.name} {v.name}", only,
            predict=predict, zeroshot_other=zs_other,
            reranker_prefix_tokens=reranker_info.get("prefix_tokens"),
            doc_cut=doc_cut_checker(lm, r.doc_max_tokens, s.window_bos))
    if memo is not None:  # the process's memo: this cell's share is the change
        log.info("Pass memo: %d batches replayed (%d of them from rows of same-shape batches), "
                 "%d run (%.0f MB held)", memo.hits - before[0], memo.row_hits - before[2],
                 memo.misses - before[1], memo.used / 2**20)
    with run.timed("write_retrieval_file"):
        write_official_file(run.path("retrieval.json"), lm, streams, evaluators, r.stream, only)
    metrics = aggregate_windows([x for rs in all_records for x in rs],
                                text_totals(streams, docs_text, r.word_count, lm.add_bos))
    if only is not None:  # the merge checks that the parts scored every window once
        metrics["shard_windows_expected"] = sum(len(w) for w in only.values())
    record_sources(row, d, s.retrieval_file, scorer_info, reranker_info)
    extra = {"retriever_settings": d.retriever_settings, "reranker": reranker_info,
             "scorer_model": scorer_info}
    return Result(metrics=metrics, settings=row, extra=extra)


# The per-token NLL of a small LM on encyclopaedic text has a standard deviation of about
# 3.5 nats (the mini Table 1 runs' windows); n scored tokens give log-perplexity a 95% CI of
# about +-1.96 * 3.5 / sqrt(n) nats: +-0.69 (a factor of 2 in perplexity) at n = 100, the
# default minimum, and +-0.22 (about 24%) at 10 x that, below which a run is warned about.
WARN_FACTOR = 10


def check_scored_tokens(streams: Sequence[Sequence[int]], texts: Sequence[LMDoc], mode: str,
                        dataset: Deferred, minimum: int) -> None:
    """Refuse a text that scores nothing, and a run whose texts give fewer than `minimum`
    scored tokens (token 0 of each stream has no context and is never scored); warn below
    WARN_FACTOR x minimum."""
    source = _dataset_label(dataset)
    if mode == "per_document":
        for i, (st, doc) in enumerate(zip(streams, texts)):
            if len(st) < 2:
                raise DataError(f"{source}: text {i} ({doc.title or doc.doc_id!r}) has "
                                f"{len(st)} token(s), so nothing in it is scored (the first "
                                f"token has no context). Remove it, or set ralm.stream=joined.")
    scored = sum(max(len(st) - 1, 0) for st in streams)
    fix = (f"Evaluate a longer text or more of them (limit=null keeps every document), or "
           f"set min_scored_tokens={max(scored, 1)} to accept it")
    if scored < minimum:
        raise DataError(f"{source}: the text gives {scored} scored token(s), below "
                        f"min_scored_tokens={minimum}: a perplexity from so few tokens is not "
                        f"a measurement (95% CI of log-perplexity wider than +-0.7 nats). "
                        f"{fix}.")
    if scored < WARN_FACTOR * minimum:
        log.warning("%s: only %d scored tokens (< %d = %d x min_scored_tokens): the 95%% CI of "
                    "its log-perplexity is wider than +-0.22 nats (about 24%% in perplexity).",
                    source, scored, WARN_FACTOR * minimum, WARN_FACTOR)


def _dataset_label(dataset: Deferred) -> str:
    config = dataset.config or {}
    path = config.get("path")
    return f"dataset {dataset.name or '?'} ({path})" if path else f"dataset {dataset.name or '?'}"


def doc_cut_checker(lm: LM, max_tokens: int, bos_first: bool) -> Callable[[dict], bool]:
    """Whether ralm.documents.doc_encoder cuts a document to max_tokens: its encoding
    without truncation (the same special tokens, the same added BOS) is longer."""
    cache: dict[str, bool] = {}

    def cut(doc: dict) -> bool:
        text = off.doc_text(doc)
        if text not in cache:
            ids = list(lm.tokenizer(text, add_special_tokens=True)["input_ids"])
            if bos_first and lm.bos_id is not None and (not ids or ids[0] != lm.bos_id):
                ids = [lm.bos_id] + ids
            cache[text] = len(ids) > max_tokens
        return cache[text]

    return cut


def aggregate(records: Sequence[Sequence[dict]], streams: Sequence[Sequence[int]],
              texts: Sequence[str], word_rule: str, add_bos: bool) -> dict[str, Any]:
    """Word and token perplexity from the same NLL sum (reference §3.6). Token level divides
    by the number of text tokens (the official dataset_len: token 0 included when it is
    unscored; an added BOS is not a text token)."""
    return aggregate_windows([r for rs in records for r in rs],
                             text_totals(streams, texts, word_rule, add_bos))


TOTALS = ("n_tokens", "n_words", "n_texts")  # of the texts, whichever windows are scored


def text_totals(streams: Sequence[Sequence[int]], texts: Sequence[str], word_rule: str,
                add_bos: bool) -> dict[str, int]:
    return {"n_tokens": int(sum(len(st) - (1 if add_bos and st else 0) for st in streams)),
            "n_words": int(sum(count_words(t, word_rule) for t in texts)),
            "n_texts": len(texts)}


def aggregate_windows(records: Sequence[dict], totals: dict[str, int]) -> dict[str, Any]:
    """The metrics of window records in the unsharded order (text, then window): the NLL is
    summed in that order, so a merged sharded run gives the same float."""
    nll = float(sum(r["nll_sum"] for r in records))
    n_scored = int(sum(r["n_scored"] for r in records))
    n_tokens, n_words = totals["n_tokens"], totals["n_words"]
    n_ret = sum(1 for r in records if r.get("doc_rank") is not None)
    return {
        "ppl_word": get_metric("ppl_word").aggregate([(nll, n_words)]),
        "ppl_token": get_metric("ppl_token").aggregate([(nll, n_tokens)]),
        "nll_sum": nll, "n_scored_tokens": n_scored, "n_tokens": n_tokens, "n_words": n_words,
        "n_windows": len(records), "n_windows_with_doc": int(n_ret),
        "n_texts": totals["n_texts"],
        # per-window facts (diag_no_document, diag_doc_truncated); windows of a run made
        # before they were recorded add nothing
        **summarize(records)}


def merge_shards(parts: Sequence[shards.Part], samples: list[dict],
                 out: Path) -> dict[str, Any]:
    """The run's metrics from its parts' windows (ragrepro/shards.py); retrievals.jsonl
    keeps each retrieval once, retrieval.json joins the parts' windows per text."""
    keys = [(r["text"], r["window"]) for r in samples]
    if any(a >= b for a, b in itertools.pairwise(keys)):
        raise DataError(f"The parts of {out} hold windows out of order or twice: their "
                        f"shard=i/n ranges overlap. Delete {out}/ and rerun the parts.")
    expected = sum(int(p.metrics.get("shard_windows_expected", len(p.samples))) for p in parts)
    if len(samples) != expected:
        raise DataError(f"The parts of {out} scored {len(samples)} windows of {expected}: "
                        f"delete the shards/ parts whose samples are short and rerun them.")
    totals = {k: parts[0].metrics[k] for k in TOTALS}
    for p in parts[1:]:
        if {k: p.metrics[k] for k in TOTALS} != totals:
            raise DataError(f"Part {p.index} of {out} counts other texts ({p.metrics}) than "
                            f"part 0 ({totals}): rerun it with the same settings.")
    rpath = out / "retrievals.jsonl"
    if rpath.exists():
        kept = shards.first_by_key(read_jsonl_tolerant(rpath), lambda r: (r["text"], r["window"]))
        atomic_write_text(rpath, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
    files = [p.folder / "retrieval.json" for p in parts]
    if all(f.is_file() for f in files):
        merge_official_files([read_json(f) for f in files], out / "retrieval.json")
    return aggregate_windows(samples, totals)


def merge_official_files(datas: Sequence[Any], path: Path) -> None:
    """The parts' retrieval.json (each with its own windows), joined per text in order."""
    joined = all(not d or not isinstance(d[0], list) for d in datas)
    if joined:
        off.write_file(path, [[e for d in datas for e in d]], joined=True)
        return
    n = max(len(d) for d in datas)
    off.write_file(path, [[e for d in datas if t < len(d) for e in d[t]] for t in range(n)],
                   joined=False)


def write_official_file(path: Path, lm: LM, streams: Sequence[Sequence[int]],
                        evaluators: Sequence[StreamEval | None], stream_mode: str,
                        only: Selection = None) -> None:
    """retrieval.json in the official format; a shard writes its own windows only."""
    out = []
    for ti, (st, ev) in enumerate(zip(streams, evaluators)):
        if ev is None:
            out.append([])
            continue
        windows, plan = ev.plan_of(len(st))
        if only is not None:
            windows = [w for w in windows if w.index in only[ti]]
        entries = []
        for w in windows:
            ch = ev.choices.get(plan[w.index]) if plan[w.index] is not None else None
            query = ch.query if ch else ("" if w.index == 0 else ev.query_of(st, w))
            docs = [{k: d[k] for k in ("title", "text", "score", "id") if k in d}
                    for d in (ch.docs if ch else [])]
            entries.append(off.entry(w, lm.decode(st[(0 if w.index == 0 else w.target_start):
                                                     w.end]), query, docs))
        out.append(entries)
    off.write_file(path, out, joined=stream_mode == "joined")


# `ralm.lm_eval.run` runs in shards (shard=i/n, blocks of windows): ragrepro/shards.py
run = shards.shardable(merge_shards)(run)
