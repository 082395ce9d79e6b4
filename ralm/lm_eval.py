"""Pipeline `ralm.lm_eval.run`: In-Context RALM perplexity with optional retrieval and
reranking (paper §3-§6; official eval_lm.py + prepare_retrieval_data.py).

Per window it appends one record to samples.jsonl (the resume checkpoint) and per retrieval
one to retrievals.jsonl; at the end it writes retrieval.json in the official format.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ragrepro.data.records import LMDoc
from ragrepro.errors import ConfigError
from ragrepro.io import read_jsonl_tolerant
from ragrepro.metrics import get_metric
from ragrepro.metrics.perplexity import WORD_COUNT_RULES, count_words
from ragrepro.named_configs import load_model
from ragrepro.pipeline import Result
from ragrepro.tracking import Run

from . import official_format as off
from .documents import doc_encoder, forbidden_titles, hit_dict
from .engine import EvalSettings, StreamEval
from .reranker import get_reranker
from .windows import Window

log = logging.getLogger(__name__)

STREAMS = ("joined", "per_document")


# -- inputs -------------------------------------------------------------------------------
def load_texts(cfg: DictConfig) -> list[LMDoc]:
    """The dataset's documents (first `limit`), through the dataset config's loader."""
    from hydra.utils import instantiate

    ds = cfg.dataset
    kw = {} if "limit" in ds else {"limit": cfg.get("limit")}
    return list(instantiate(ds, _convert_="all", **kw))


def streams_of(docs: Sequence[LMDoc], mode: str) -> list[str]:
    """joined: one text, the documents concatenated with "" (official eval_lm.py);
    per_document: one text per document, each its own stream."""
    if mode == "joined":
        return ["".join(d.text for d in docs)]
    if mode == "per_document":
        return [d.text for d in docs]
    raise ConfigError(f"ralm.stream={mode!r}; use one of {STREAMS}.")


def load_model_by_name(cfg: DictConfig, name: str) -> tuple[Any, dict[str, Any]]:
    """Instantiate conf/model/<name>.yaml with this run's dtype and device."""
    return load_model(name, str(cfg.dtype), str(cfg.device))


def eval_settings(cfg: DictConfig) -> EvalSettings:
    r = cfg.ralm
    stride = int(r.stride)
    return EvalSettings(
        max_length=int(r.max_length), stride=stride,
        retrieval_stride=int(r.retrieval_stride if r.get("retrieval_stride") is not None
                             else stride),
        query_len=int(r.query_len), doc_max_tokens=int(r.doc_max_tokens), k=int(r.k),
        rerank=str(r.rerank), rerank_tokens=int(r.rerank_tokens), seed=int(cfg.seed),
        window_bos=bool(window_bos(cfg)), batch_windows=int(r.get("batch_windows", 16)),
        batch_size=int(cfg.batch_size),
        query_clean_spaces=bool(r.get("query_clean_spaces", True)))


def window_bos(cfg: DictConfig) -> bool:
    v = cfg.ralm.get("window_bos", "auto")
    return bool(cfg.model.get("add_bos", False)) if v == "auto" else bool(v)


def retrieval_file(cfg: DictConfig) -> str | None:
    from_file = OmegaConf.select(cfg, "retrieval.from_file")
    own = cfg.ralm.get("retrieval_file")
    if from_file and own and str(from_file) != str(own):
        raise ConfigError("retrieval.from_file and ralm.retrieval_file name different files; "
                          "set one.")
    return from_file or own


# -- document sources -----------------------------------------------------------------------
class RetrieverSource:
    """Top-k hits per query; with a near-duplicate filter, 4k are fetched so that k usually
    remain after it (fewer when the filter removes more)."""

    def __init__(self, retriever: Any, k: int, exclude: Sequence[str], near_dup: Any = None):
        self.retriever, self.k, self.exclude = retriever, k, list(exclude)
        self.near_dup = near_dup

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict]]:
        fetch = self.k * 4 if self.near_dup is not None else self.k
        hits = self.retriever.search(list(queries), fetch, exclude_titles=self.exclude)
        out = [[hit_dict(h) for h in hs] for hs in hits]
        if self.near_dup is not None:
            out = [self.near_dup.keep(ds)[: self.k] for ds in out]
        return out


def near_dup_filter(cfg: DictConfig, texts: Sequence[str]) -> Any:
    """`ralm.near_dup=true`: drop candidates whose word n-gram containment in the evaluated
    texts exceeds ralm.near_dup_threshold (ragrepro/retrieval/neardup.py)."""
    r = cfg.ralm
    if not r.get("near_dup", False):
        return None
    from ragrepro.retrieval.neardup import NearDupFilter

    return NearDupFilter(texts, n=int(r.get("near_dup_ngram", 8)),
                         threshold=float(r.get("near_dup_threshold", 0.05)))


class FileSource:
    """Documents of an official-format retrieval file, by window index."""

    def __init__(self, path: str, texts: list[list[dict]]):
        self.path, self.texts = path, texts

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict]]:
        return [off.docs_of(self.texts[text_index][w.index]) for w in windows]


# -- the pipeline ---------------------------------------------------------------------------
def _other_zeroshot(scorer: Any, lm: Any, s: EvalSettings, encode_doc_scorer):
    """Zero-shot ranking with a scoring LM that is not the evaluated one (paper Table 3):
    the window's prefix is decoded and re-encoded with the scorer's tokenizer, the document
    overwrites its first positions, and the last s' scorer tokens are scored."""
    def nlls(stream: Sequence[int], window: Window, docs: list[dict]) -> list[float]:
        ctx = scorer.encode(lm.decode(stream[window.begin:window.target_start]), add_bos=False)
        rows, starts = [], []
        for d in docs:
            dt = encode_doc_scorer(d)
            if len(dt) + s.rerank_tokens > len(ctx):
                raise ConfigError("the scorer's document covers the tokens it should rank; "
                                  "lower ralm.doc_max_tokens or ralm.rerank_tokens.")
            rows.append(list(dt) + list(ctx[len(dt):]))
            starts.append(len(ctx) - s.rerank_tokens)
        return [-float(np.sum(lp)) for lp in scorer.score_targets(rows, starts, s.batch_size)]

    return nlls


def document_source(cfg: DictConfig, s: Any, run: Run, docs: list, texts: list[str],
                    streams: list[list[int]], lm: Any, stream_mode: str,
                    rfile: Any) -> tuple[Any, dict | None, Any, list[str]]:
    """Where each window's documents come from: the gold articles, an official retrieval file
    (checked against this run's windows) or a retriever; with its settings, the near-duplicate
    filter and the excluded titles."""
    source, retriever_settings, near_dup = None, None, None
    exclude = forbidden_titles(cfg) if s.rerank not in ("none", "gold") else []
    if s.rerank == "gold":
        from .gold import GoldSource

        if rfile:
            raise ConfigError("ralm.rerank=gold uses the evaluated articles as documents; "
                              "drop retrieval.from_file / ralm.retrieval_file.")
        source = GoldSource(docs, streams, lambda ids: lm.decode(ids, skip_special_tokens=True),
                            joined=stream_mode == "joined")
        retriever_settings = {"name": "gold"}
    elif s.rerank != "none":
        with run.timed("retriever"):
            if rfile:
                texts_entries = off.read_file(rfile)
                if len(texts_entries) != len(streams):
                    raise ConfigError(f"retrieval file {rfile} holds {len(texts_entries)} texts, "
                                      f"this run {len(streams)} (ralm.stream={stream_mode}, "
                                      f"limit={cfg.get('limit')}).")
                for i, (st, ent) in enumerate(zip(streams, texts_entries)):
                    from .windows import make_windows

                    off.check_windows(rfile, ent, make_windows(len(st), s.max_length, s.stride),
                                      s.stride, s.max_length, len(st), i)
                source = FileSource(rfile, texts_entries)
                retriever_settings = {"from_file": str(rfile)}
            else:
                from ragrepro.retrieval import retriever_from_config

                retriever = retriever_from_config(cfg)
                near_dup = near_dup_filter(cfg, texts)
                source = RetrieverSource(retriever, s.k, exclude, near_dup)
                retriever_settings = retriever.settings()

    return source, retriever_settings, near_dup, exclude


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


def record_sources(settings: dict[str, Any], retriever_settings: dict | None, rfile: Any,
                   exclude: list[str], near_dup: Any, scorer_info: dict | None,
                   reranker_info: dict[str, Any]) -> None:
    """Add what the documents, the scorer and the reranker were to the row's settings."""
    settings.update({"retriever": (retriever_settings or {}).get("name",
                                   (retriever_settings or {}).get("retriever"))
                     if not rfile else "file", "n_forbidden_titles": len(exclude),
                     "near_dup": near_dup is not None,
                     **(near_dup.settings() if near_dup is not None else {})})
    if near_dup is not None:
        log.info("Near-duplicate exclusion removed %d documents (word %d-gram containment > "
                 "%.2f): %s", len(near_dup.removed), near_dup.n, near_dup.threshold,
                 sorted(near_dup.removed.items())[:20])
    if scorer_info:
        settings["scorer_model_revision"] = scorer_info.get("revision")
    if reranker_info:
        settings.update(reranker_model=reranker_info.get("model_key"),
                        reranker_encoder=reranker_info.get("encoder"),
                        reranker_label_model=reranker_info.get("label_model"))


def retrieval_logger(path: Path, text_index: int) -> Callable[[dict], None]:
    """Appends each retrieval of one text to retrievals.jsonl as it happens (resume input)."""
    import json

    from ragrepro.io import append_line

    def log_one(rec: dict) -> None:
        append_line(path, json.dumps({"text": text_index, **rec}, ensure_ascii=False))
    return log_one


def evaluate_streams(run: Run, lm: Any, s: Any, source: Any, encode_doc: Any,
                     streams: list[list[int]], desc: str,
                     **ev_kwargs: Any) -> tuple[list[list[dict]], list[StreamEval]]:
    """Score every window of every stream, resuming the windows (and retrievals) a killed run
    already wrote; returns the per-window records and the evaluators, per stream."""
    from tqdm import tqdm

    done, restored = resume_state(run)
    all_records: list[list[dict]] = []
    evaluators: list[StreamEval] = []
    total = sum(len(StreamEval(lm, s, None, encode_doc).plan_of(len(st))[0]) for st in streams)
    with tqdm(total=total, desc=desc, unit="win", initial=len(done)) as bar:
        for ti, st in enumerate(streams):
            ev = StreamEval(lm, s, source, encode_doc, bos_id=lm.bos_id,
                            on_window=run.add_sample, text_index=ti,
                            on_retrieval=retrieval_logger(run.path("retrievals.jsonl"), ti),
                            **ev_kwargs)
            mine = {w: d for (t, w), d in done.items() if t == ti}
            rest = {w: d for (t, w), d in restored.items() if t == ti}
            all_records.append(ev.run(st, mine, rest, progress=bar))
            evaluators.append(ev)
    return all_records, evaluators


def run(cfg: DictConfig, run: Run) -> Result:
    s = eval_settings(cfg)
    s.validate()
    r = cfg.ralm
    word_rule = str(r.get("word_count", "spaces"))
    if word_rule not in WORD_COUNT_RULES:
        raise ConfigError(f"ralm.word_count={word_rule!r}; use one of {WORD_COUNT_RULES}.")
    stream_mode = str(r.get("stream", "joined"))
    rfile = retrieval_file(cfg)
    scorer_name = r.get("scorer_model")
    if scorer_name and s.rerank != "zeroshot":
        raise ConfigError("ralm.scorer_model only applies to ralm.rerank=zeroshot.")

    with run.timed("load_data"):
        docs = load_texts(cfg)
        texts = streams_of(docs, stream_mode)
    with run.timed("load_model"):
        from hydra.utils import instantiate

        lm = instantiate(cfg.model)
    streams = [lm.encode(t) for t in texts]  # the model's BOS policy (Gemma: BOS first)
    settings = result_settings(cfg, s, word_rule, stream_mode, rfile, lm)

    source, retriever_settings, near_dup, exclude = document_source(
        cfg, s, run, docs, texts, streams, lm, stream_mode, rfile)

    predict = None
    reranker_info: dict[str, Any] = {}
    if s.rerank == "predictive":
        with run.timed("reranker"):
            predict, reranker_info = get_reranker(cfg, lm, source_for_training(cfg, s))
    zs_other, scorer_info = None, None
    if scorer_name and scorer_name != cfg.model.name:
        with run.timed("load_scorer"):
            scorer, scorer_info = load_model_by_name(cfg, scorer_name)
        zs_other = _other_zeroshot(scorer, lm, s, doc_encoder(scorer, s.doc_max_tokens,
                                                               scorer.add_bos))

    encode_doc = doc_encoder(lm, s.doc_max_tokens, s.window_bos)
    with run.timed("evaluate"):
        all_records, evaluators = evaluate_streams(
            run, lm, s, source, encode_doc, streams, f"ralm {cfg.model.name} {s.rerank}",
            predict=predict, zeroshot_other=zs_other,
            reranker_prefix_tokens=reranker_info.get("prefix_tokens"))

    with run.timed("write_retrieval_file"):
        write_official_file(run.path("retrieval.json"), lm, streams, evaluators, stream_mode)

    metrics = aggregate(all_records, streams, texts, word_rule, lm.add_bos)
    record_sources(settings, retriever_settings, rfile, exclude, near_dup, scorer_info,
                   reranker_info)
    extra = {"retriever_settings": retriever_settings, "reranker": reranker_info,
             "scorer_model": scorer_info}
    return Result(metrics=metrics, settings=settings, extra=extra)


def source_for_training(cfg: DictConfig, s: EvalSettings):
    return None  # the reranker builds its own retriever over the training texts


def aggregate(records: Sequence[Sequence[dict]], streams: Sequence[Sequence[int]],
              texts: Sequence[str], word_rule: str, add_bos: bool) -> dict[str, Any]:
    """Word and token perplexity from the same NLL sum (reference §3.6). Token level divides
    by the number of text tokens (the official dataset_len: token 0 included when it is
    unscored; an added BOS is not a text token)."""
    nll = float(sum(r["nll_sum"] for rs in records for r in rs))
    n_scored = int(sum(r["n_scored"] for rs in records for r in rs))
    n_tokens = int(sum(len(st) - (1 if add_bos and st else 0) for st in streams))
    n_words = int(sum(count_words(t, word_rule) for t in texts))
    n_ret = sum(1 for rs in records for r in rs if r.get("doc_rank") is not None)
    return {
        "ppl_word": get_metric("ppl_word").aggregate([(nll, n_words)]),
        "ppl_token": get_metric("ppl_token").aggregate([(nll, n_tokens)]),
        "nll_sum": nll, "n_scored_tokens": n_scored, "n_tokens": n_tokens, "n_words": n_words,
        "n_windows": int(sum(len(rs) for rs in records)), "n_windows_with_doc": int(n_ret),
        "n_texts": len(texts)}


def write_official_file(path: Path, lm: Any, streams: Sequence[Sequence[int]],
                        evaluators: Sequence[StreamEval], stream_mode: str) -> None:
    out = []
    for st, ev in zip(streams, evaluators):
        windows, plan = ev.plan_of(len(st))
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


def result_settings(cfg: DictConfig, s: EvalSettings, word_rule: str, stream_mode: str,
                    rfile: str | None, lm: Any) -> dict[str, Any]:
    """Everything that changes the number, for the results row."""
    return {
        "stride": s.stride, "retrieval_stride": s.retrieval_stride, "query_len": s.query_len,
        "query_clean_spaces": s.query_clean_spaces,
        "max_length": s.max_length, "doc_max_tokens": s.doc_max_tokens,
        "k": s.k if s.rerank != "none" else None, "rerank": s.rerank,
        "rerank_tokens": s.rerank_tokens if s.rerank == "zeroshot" else None,
        "scorer_model": (cfg.ralm.get("scorer_model") or cfg.model.name)
        if s.rerank == "zeroshot" else None,
        "word_count": word_rule, "stream": stream_mode, "add_bos": bool(lm.add_bos),
        "window_bos": s.window_bos, "retrieval_file": rfile,
        "forbidden_titles": str(cfg.ralm.get("forbidden_titles", "auto")),
        "corpus": (cfg.corpus.get("name") if s.rerank not in ("none", "gold") and not rfile
                   else None),
    }
