"""RICHES experiments: `run(cfg, run)` for RICHES and its baselines (§5.4).

riches.method:
- riches: constrained interleaved decoding (this package's beam search).
- no_retrieval: the same prompt and decoder with nothing constrained; its "keys" are
  hallucinated, so their verbatim rate is reported, not assumed.
- dense_reader, iterative: the retrieve-then-read baselines (riches/baselines.py); they
  decode no keys, so their rows have no verbatim rate.

Per-sample records go to samples.jsonl first (the resume checkpoint); AutoAIS and the
aggregates are computed from them at the end.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ragrepro.data.records import Passage, QARecord
from ragrepro.errors import ConfigError
from ragrepro.paths import cache_dir
from ragrepro.pipeline import Result

from . import markers
from .baselines import run_dense, run_iterative, sample_record
from .beam import BeamConfig, BeamStats, HFStepModel, beam_search
from .constraint import KeyConstraint, key_token_ids, vocab_size_of
from .index import SuffixIndex, build_or_load
from .keys import KeyCorpus, build_keys, document_frequencies, tfidf_rank
from .prompts import (
    RichesPrompt,
    example_propositions,
    load_prompt,
    parse_answer,
)
from .provenance import provenance, sample_articles

log = logging.getLogger(__name__)
METHODS = ("riches", "no_retrieval", "dense_reader", "iterative")
DECODED_KEYS = ("riches", "no_retrieval")  # methods whose keys are decoded by the LM


# -- setup ---------------------------------------------------------------------------------
def load_records(cfg: DictConfig) -> list[QARecord]:
    from hydra.utils import instantiate

    return list(instantiate(cfg.dataset))


def load_docs(cfg: DictConfig) -> list[Passage]:
    from ragrepro.retrieval import build_corpus

    return list(build_corpus(cfg.corpus).passages)


def prompt_name(rc: DictConfig, records: Sequence[QARecord]) -> str:
    if rc.prompt != "auto":
        return str(rc.prompt)
    return "multi_hop" if any(r.hops > 1 for r in records) else "single_hop"


def proposition_docs(kc: DictConfig, docs: list[Passage]) -> list[Passage]:
    """Mini scale: the articles whose propositions the LM generates, a seeded random sample
    of `n_articles` corpus articles chosen without looking at any question (see
    riches/provenance.py; generation is the slow part on a CPU)."""
    if kc.get("articles", "sample") != "sample":
        raise ConfigError(f"riches.key.articles={kc.get('articles')!r}; mini-scale propositions "
                          f"support 'sample' (a seeded random sample of n_articles articles).")
    chosen = sample_articles([p.title for p in docs], kc.get("n_articles"), int(kc.get("seed", 0)))
    return [docs[i] for i in chosen]


def build_key_corpus(kc: DictConfig, docs: list[Passage], lm: Any,
                     prompt_cfgs: Sequence[dict]) -> tuple[KeyCorpus, dict[str, Any]]:
    """The keys of the index and their provenance (row columns)."""
    if kc.unit != "proposition":
        kcorp = cached_keys(kc.unit, docs)
        return kcorp, provenance(kcorp, "corpus", "all", None)
    if kc.source == "factoid-wiki":
        from .propositions import read_factoid_wiki

        kcorp = build_keys("proposition", docs, propositions=read_factoid_wiki(kc.paths, docs))
        return kcorp, provenance(kcorp, "factoid-wiki", "file", None)
    if kc.source != "lm":
        raise ConfigError(f"riches.key.source={kc.source!r}; use 'lm' (mini) or "
                          f"'factoid-wiki' (paper, with riches.key.paths).")
    from .propositions import lm_propositions

    subset = proposition_docs(kc, docs)
    facts = lm_propositions(lm, subset, load_prompt("propositions"),
                            cache_dir() / "riches" / "propositions" / f"{lm.name}.jsonl",
                            max_new_tokens=int(kc.generation_max_new_tokens),
                            min_overlap=float(kc.min_overlap))
    pos = {p.pid: i for i, p in enumerate(docs)}
    by_title = {p.title: i for i, p in enumerate(docs)}
    pairs = [(f, pos[p.pid]) for p in subset for f, _ in facts.get(p.pid, [])]
    n_rewritten = sum(how == "rewrite" for p in subset for _, how in facts.get(p.pid, []))
    demo = list(dict.fromkeys((text, by_title[t]) for pcfg in prompt_cfgs  # hand-written
                              for text, t in example_propositions(pcfg) if t in by_title))
    pairs = list(dict.fromkeys(pairs + demo))
    log.info("Proposition keys: %d over %d sampled articles (seed %s; LM-derived, %d rewritten, "
             "the rest kept as sentences; mini scale) + the demonstrations' hand-written ones",
             len(pairs), len(subset), kc.get("seed", 0), n_rewritten)
    kcorp = build_keys("proposition", docs, propositions=pairs)
    return kcorp, {**provenance(kcorp, "lm", "sample", int(kc.get("seed", 0))),
                   "keys_n_sampled": len(subset), "keys_n_demo": len(demo)}


def cached_keys(unit: str, docs: list[Passage]) -> KeyCorpus:
    """Key texts of a corpus unit, cached (sentence splitting the corpus takes a minute)."""
    import hashlib
    import json

    from ragrepro.io import atomic_write_json

    h = hashlib.sha256(unit.encode())
    for p in docs:
        h.update(f"{p.pid}\x1f{p.title}\x1f{p.text}\x1e".encode())
    path = cache_dir() / "riches" / "keys" / f"{unit}-{h.hexdigest()[:16]}.json"
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))
        return KeyCorpus(unit, data["keys"], data["key_doc"], docs)
    kcorp = build_keys(unit, docs)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"keys": kcorp.keys, "key_doc": kcorp.key_doc})
    return kcorp


def build_index(kcorp: KeyCorpus, lm: Any, corpus_name: str, kc: DictConfig) -> SuffixIndex:
    tok = lm.tokenizer
    return build_or_load(kcorp.keys, kcorp.key_doc, lambda texts: key_token_ids(tok, texts),
                         vocab_size_of(tok),
                         {"corpus": corpus_name, "key_type": kc.name, "tokenizer": lm.name,
                          "tokenizer_revision": lm.revision, "leading": " "})


# -- one RICHES answer -----------------------------------------------------------------------
@dataclass
class KeyHit:
    text: str
    closed: bool
    n_matches: int
    verbatim: bool
    doc_indices: list[int]


def analyse_keys(tokens: list[int], constraint: KeyConstraint, kcorp: KeyCorpus,
                 decode, at_key_start: bool) -> list[KeyHit]:
    """Every key span of a generation: its text, whether the index and the corpus text both
    contain it verbatim, and the documents it points to."""
    out = []
    for s, e, closed in markers.spans(constraint.spec, tokens):
        ids = tokens[s:e]
        text = decode(ids).strip()
        index = constraint.index
        span = index.find(ids, at_key_start)
        n = 0 if span is None else span.count
        docs: list[int] = []
        in_text = False
        if n:
            hits = index.locate(span, max_hits=50)
            docs = list(dict.fromkeys(d for _, d, _ in hits))
            in_text = any(text in kcorp.keys[k] for k, _, _ in hits)
        out.append(KeyHit(text, closed, n, bool(n and in_text and text), docs))
    return out


def evidence_text(hits: list[KeyHit], kcorp: KeyCorpus, mode: str, question: str,
                  df) -> tuple[str, list[str]]:
    """The AutoAIS premise (concatenated keys, §5.2) and the titles the keys point to."""
    titles: list[str] = []
    parts: list[str] = []
    for h in hits:
        cand = h.doc_indices
        if mode == "document" and cand:
            order = tfidf_rank(question, [kcorp.docs[i].text for i in cand], df, len(kcorp.docs))
            best = kcorp.docs[cand[order[0]]]
            parts.append(f"{best.title}. {best.text}")
            titles.append(best.title)
        else:
            if h.text:
                parts.append(h.text)
            titles.extend(dict.fromkeys(kcorp.docs[i].title for i in cand[:1]))
    return " ".join(parts), titles


# -- the runner entry ---------------------------------------------------------------------
def run(cfg: DictConfig, run: Any) -> Result:
    from hydra.utils import instantiate

    rc = cfg.riches
    if rc.method not in METHODS:
        raise ConfigError(f"riches.method={rc.method!r}; use one of {list(METHODS)}.")
    records = load_records(cfg)
    done = {r["qid"]: r for r in run.repair_samples()}
    lm = instantiate(cfg.model)
    docs = load_docs(cfg)
    corpus_text = {}
    for p in docs:
        corpus_text.setdefault(p.title, p.text)
    pcfg = load_prompt(prompt_name(rc, records))
    settings: dict[str, Any] = {"riches_method": rc.method, "prompt": pcfg.get("name"),
                                "n_questions": len(records), "corpus": cfg.corpus.name,
                                "dataset_hops": cfg.dataset.get("hops")}
    if rc.method in ("riches", "no_retrieval"):
        settings.update(_run_riches(cfg, run, lm, docs, corpus_text, pcfg, records, done))
    elif rc.method == "dense_reader":
        settings.update(run_dense(cfg, run, lm, docs, corpus_text, pcfg, records, done))
    else:
        settings.update(run_iterative(cfg, run, lm, docs, corpus_text, pcfg, records, done))
    samples = {r["qid"]: r for r in run.done_samples()}
    ordered = [samples[r.qid] for r in records if r.qid in samples]
    metrics, ais_settings = aggregate(cfg, run, lm, ordered)
    settings.update(ais_settings)
    return Result(metrics=metrics, settings=settings)


def _beam_cfg(rc: DictConfig, max_new_tokens: int, stop: Sequence[str]) -> BeamConfig:
    return BeamConfig(beam_size=int(rc.beam_size), adaptive=bool(rc.adaptive),
                      max_new_tokens=max_new_tokens, renormalize=bool(rc.renormalize),
                      length_penalty=float(rc.length_penalty), stop_strings=tuple(stop))


def _run_riches(cfg, run, lm, docs, corpus_text, pcfg, records, done) -> dict[str, Any]:
    from tqdm import tqdm

    rc, kc = cfg.riches, cfg.riches.key
    constrained = rc.method == "riches"
    # all demonstration propositions go into the index, so one index serves both prompts;
    # the shipped prompts come first, so the key order (and keys_hash) is the same whichever
    # prompt this run uses (a custom prompt's extra propositions come last)
    kcorp, origin = build_key_corpus(kc, docs, lm, [load_prompt(n) for n in
                                                    ("single_hop", "multi_hop")] + [pcfg])
    index = build_index(kcorp, lm, cfg.corpus.name, kc)
    constraint = KeyConstraint.for_tokenizer(
        index, lm.tokenizer, rc.markers.open, rc.markers.close, start=kc.start, end=kc.end,
        min_key_tokens=int(kc.min_key_tokens), start_at_word=bool(kc.start_at_word),
        enabled=constrained)
    at_start = kc.start == "key"
    prompt = RichesPrompt(pcfg, kc.unit, bool(rc.thoughts),
                          encode=lambda s: lm.encode(s, add_bos=False),
                          key_ids=lambda s: key_token_ids(lm.tokenizer, [s])[0],
                          open_ids=constraint.spec.open, close_ids=constraint.spec.close,
                          corpus_text=corpus_text, bos=lm.bos_id if lm.add_bos else None,
                          demo=str(kc.get("demo", "unit")))
    check_demo_keys(prompt, index, at_start, kc.end == "key", lm)
    max_new = int(rc.max_new_tokens or kc.max_new_tokens)
    bcfg = _beam_cfg(rc, max_new, pcfg["stop"])
    step_model = HFStepModel(lm.model, lm.device)
    decode = lambda ids: lm.decode(ids)
    df = document_frequencies(kcorp.docs)
    eos = [t for t in {lm.eos_id} if t is not None]
    for rec in tqdm([r for r in records if r.qid not in done], desc=f"riches:{rc.method}"):
        t0 = time.perf_counter()
        ids, shared = prompt.build(rec.question)
        stats = BeamStats()
        with run.timed("decode"):
            hyps = beam_search(step_model, ids, constraint, bcfg, decode, eos, stats, shared)
        best = hyps[0]
        gen = [t for t in best.tokens if t not in eos]
        text = lm.decode(gen)
        hits = analyse_keys(gen, constraint, kcorp, decode, at_start)
        evidence, titles = evidence_text(hits, kcorp, kc.evidence if constrained else "key",
                                         rec.question, df)
        answer = parse_answer(text, pcfg["answer_prefix"])
        run.add_sample(sample_record(rec, answer, evidence, titles, {
            "generation": text, "finish": best.reason, "score": best.score,
            "keys": [h.__dict__ for h in hits], "n_keys": len(hits),
            "keys_verbatim": sum(h.verbatim for h in hits), "beam_steps": stats.steps,
            "max_live": stats.max_live, "seconds": time.perf_counter() - t0}))
    return {"key_type": kc.name, "key_start": kc.start, "key_demo": str(kc.get("demo", "unit")), "key_end": kc.end,
            "min_key_tokens": int(kc.min_key_tokens), "beam_size": int(rc.beam_size),
            "adaptive": bool(rc.adaptive), "thoughts": bool(rc.thoughts),
            "renormalize": bool(rc.renormalize), "length_penalty": float(rc.length_penalty),
            "max_new_tokens": max_new, "n_index_keys": len(kcorp.keys),
            "index_tokens": index.n, "index_bytes_per_token": index.bytes_per_token(),
            "evidence": kc.evidence if constrained else "key", **origin}


def check_demo_keys(prompt: RichesPrompt, index: SuffixIndex, at_start: bool, full: bool, lm) -> None:
    """Every demonstration key must be decodable under the constraint."""
    for key in prompt.demo_keys():
        ids = prompt.key_ids(key)
        ok = index.is_full_key(ids) if full else index.count(ids, at_start) > 0
        if not ok:
            raise ConfigError(f"few-shot key {key!r} is not a {'whole ' if full else ''}key of "
                              f"the index: demonstrations must be verbatim corpus keys.")


# -- aggregates ---------------------------------------------------------------------------------
def sample_metrics(samples: list[dict], decoded_keys: bool) -> dict[str, Any]:
    """Means over the per-question records. `verbatim_rate` (share of decoded keys found
    verbatim in the corpus) exists only for methods that decode keys (RICHES and its
    no-retrieval ablation); the retrieve-then-read baselines copy passages, so the column
    is left out for them (not applicable), never set to 1."""
    n = len(samples)
    keys = sum(s.get("n_keys", 0) for s in samples)
    recalls = [s["gold_title_recall"] for s in samples if s.get("gold_title_recall") is not None]
    metrics: dict[str, Any] = {
        "f1_squad": float(np.mean([s["f1_squad"] for s in samples])) if n else float("nan"),
        "em_squad": float(np.mean([s["em_squad"] for s in samples])) if n else float("nan"),
        "keys_per_answer": keys / n if n else float("nan"),
        "gold_title_recall": float(np.mean(recalls)) if recalls else float("nan"),
        "seconds_per_question": float(np.mean([s.get("seconds", 0.0) for s in samples])) if n else 0.0,
        "n": n,
    }
    if decoded_keys:
        verb = sum(s.get("keys_verbatim", 0) for s in samples)
        metrics["verbatim_rate"] = verb / keys if keys else float("nan")
    return metrics


def aggregate(cfg: DictConfig, run: Any, lm: Any, samples: list[dict]) -> tuple[dict, dict]:
    metrics = sample_metrics(samples, decoded_keys=cfg.riches.method in DECODED_KEYS)
    ais, ais_settings = attribution(cfg, run, lm, samples)
    metrics.update(ais)
    return metrics, ais_settings


def attribution(cfg: DictConfig, run: Any, lm: Any, samples: list[dict]) -> tuple[dict, dict]:
    """AutoAIS over (question, prediction, concatenated evidence); the offline judge is
    reported as `autoais_substitute`, never as `autoais`."""
    ac = cfg.riches.autoais
    if not ac.enabled:
        return {}, {"autoais_backend": "disabled"}
    from ragrepro.io import atomic_write_text
    from ragrepro.metrics.autoais import AttributionItem, load_autoais

    kw = OmegaConf.to_container(ac, resolve=True)
    kw.pop("enabled", None)
    evaluator = load_autoais(lm=lm, **kw)
    items = [AttributionItem(question=s["question"], answer=s["prediction"], title=None,
                             passage=s["evidence"]) for s in samples]
    with run.timed("autoais"):
        res = evaluator.evaluate(items)
    import json

    atomic_write_text(run.path("autoais.jsonl"), "".join(
        json.dumps({"qid": s["qid"], **p}, default=float) + "\n"
        for s, p in zip(samples, res.per_sample)))
    metrics = dict(res.metrics)
    # RICHES app. 10.2 averages the calibrated NLI score (missing = 0) instead of thresholding
    metrics[f"{evaluator.result_key}_mean_score"] = soft_score(res.per_sample)
    settings = dict(res.settings)
    # the metric is also called autoais_substitute: keep the scorer's name in its own column
    if "autoais_substitute" in settings:
        settings["autoais_scorer"] = settings.pop("autoais_substitute")
    return metrics, settings


def soft_score(per_sample: Sequence[dict]) -> float:
    """Mean NLI score over all questions, a missing prediction or passage counting 0."""
    if not per_sample:
        return float("nan")
    return float(np.mean([p.get("nli_score") or 0.0 for p in per_sample]))
