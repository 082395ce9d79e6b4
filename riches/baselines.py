"""The RICHES paper's baselines (§5.4) and the per-question record every method writes.

- dense_reader: retriever top-k + few-shot reader; k = the rounded mean number of keys of the
  matching RICHES run (`k: auto`) or a number.
- iterative: self-ask style follow-up questions, one retrieval (top-1) each, up to max_steps,
  then a forced answer.
Both copy retrieved passages, so they record no `keys_verbatim` (no decoded keys).
"""
from __future__ import annotations

import csv
import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ragrepro.data.records import QARecord
from ragrepro.metrics.qa import em_squad, f1_squad

from . import markers
from .beam import BeamConfig, HFStepModel, beam_search
from .constraint import KeyConstraint, vocab_size_of
from .index import SuffixIndex
from .prompts import iterative_demo, reader_prompt

log = logging.getLogger(__name__)


def sample_record(rec: QARecord, answer: str, evidence: str, titles: list[str],
                  extra: dict) -> dict[str, Any]:
    gold = {t for t in rec.gold_titles}
    return {"qid": rec.qid, "question": rec.question, "answers": rec.answers, "hops": rec.hops,
            "gold_titles": rec.gold_titles, "prediction": answer, "evidence": evidence,
            "retrieved_titles": titles,
            "f1_squad": f1_squad(answer, rec.answers), "em_squad": em_squad(answer, rec.answers),
            "gold_title_recall": (len(gold & set(titles)) / len(gold)) if gold else None,
            **extra}


# -- baselines --------------------------------------------------------------------------------
def auto_k(cfg: DictConfig, default: int) -> tuple[int, str]:
    """k = rounded mean number of keys of the finished RICHES run on the same dataset and
    model in this experiment's CSV (the paper matches k to RICHES's mean, §5.4)."""
    from ragrepro.paths import results_dir

    path = Path(cfg.get("results_dir") or results_dir()) / f"{cfg.name}.csv"
    if path.exists():
        with open(path, newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r.get("riches_method") == "riches"
                    and r.get("dataset") == cfg.dataset.name and r.get("model") == cfg.model.name
                    and str(r.get("limit")) == str(cfg.get("limit"))
                    and r.get("dataset_hops", "") == _csv_str(cfg.dataset.get("hops"))]
        if rows and rows[-1].get("keys_per_answer"):
            return max(1, round(float(rows[-1]["keys_per_answer"]))), f"riches run {rows[-1]['run_id']}"
    log.warning("k=auto: no finished RICHES run in %s for this dataset/model; using k=%d",
                path, default)
    return default, "default"


def _csv_str(v: Any) -> str:
    return "" if v is None else str(v)


def run_dense(cfg, run, lm, docs, corpus_text, pcfg, records, done) -> dict[str, Any]:
    from tqdm import tqdm

    from ragrepro.retrieval import retriever_from_config

    rc = cfg.riches
    k, k_source = (auto_k(cfg, int(rc.dense.k_default)) if str(rc.dense.k) == "auto"
                   else (int(rc.dense.k), "config"))
    retriever = retriever_from_config(cfg)
    todo = [r for r in records if r.qid not in done]
    with run.timed("retrieve"):
        all_hits = retriever.search([r.question for r in todo], k=k) if todo else []
    for rec, hits in tqdm(list(zip(todo, all_hits)), desc="dense_reader"):
        t0 = time.perf_counter()
        prompt = reader_prompt(pcfg, corpus_text, [(h.title, h.text) for h in hits], rec.question)
        with run.timed("read"):
            out = lm.generate([lm.encode(prompt)], max_new_tokens=int(rc.reader_max_new_tokens))[0]
        answer = lm.decode(out, skip_special_tokens=True).split("\n")[0].strip()
        evidence = " ".join(f"{h.title}. {h.text}" for h in hits)
        run.add_sample(sample_record(rec, answer, evidence, [h.title for h in hits], {
            "n_keys": len(hits), "seconds": time.perf_counter() - t0,
            "hits": [{"pid": h.pid, "title": h.title, "score": h.score} for h in hits]}))
    return {"k": k, "k_source": k_source, "retriever": cfg.retriever.name}


def run_iterative(cfg, run, lm, docs, corpus_text, pcfg, records, done) -> dict[str, Any]:
    from tqdm import tqdm

    from ragrepro.retrieval import retriever_from_config

    rc = cfg.riches
    retriever = retriever_from_config(cfg)
    demo = iterative_demo(pcfg, corpus_text)
    demo_ids = lm.encode(demo)
    step_model = HFStepModel(lm.model, lm.device)
    free = KeyConstraint(index=SuffixIndex.build([[0]], vocab_size_of(lm.tokenizer)),
                         spec=markers.MarkerSpec((-1,), (-2,)), vocab_size=vocab_size_of(lm.tokenizer),
                         start_at_word=False, enabled=False)
    line_cfg = BeamConfig(beam_size=1, adaptive=True, max_new_tokens=int(rc.iterative.max_new_tokens),
                          stop_strings=("\n",))
    decode = lambda ids: lm.decode(ids)
    eos = [t for t in {lm.eos_id} if t is not None]
    for rec in tqdm([r for r in records if r.qid not in done], desc="iterative"):
        t0 = time.perf_counter()
        history = f"Question: {rec.question}\n"
        hits_all: list = []
        answer = ""
        steps = 0
        while True:
            force = steps >= int(rc.iterative.max_steps)
            tail = history + ("Answer:" if force else "")
            ids = demo_ids + lm.encode(tail, add_bos=False)
            hyp = beam_search(step_model, ids, free, line_cfg, decode, eos, None, len(demo_ids))[0]
            line = lm.decode([t for t in hyp.tokens if t not in eos]).split("\n")[0].strip()
            if force:
                answer = line
                break
            if line.startswith("Answer:"):
                answer = line[len("Answer:"):].strip()
                break
            query = line[len("Follow-up:"):].strip() if line.startswith("Follow-up:") else line
            if not query:
                steps = int(rc.iterative.max_steps)
                continue
            found = retriever.search([query], k=1)[0]
            if not found:
                steps = int(rc.iterative.max_steps)
                continue
            hit = found[0]
            hits_all.append(hit)
            history += f"Follow-up: {query}\nEvidence: {hit.title}. {hit.text}\n"
            steps += 1
        evidence = " ".join(f"{h.title}. {h.text}" for h in hits_all)
        run.add_sample(sample_record(rec, answer, evidence, [h.title for h in hits_all], {
            "n_keys": len(hits_all), "steps": steps,
            "trace": history, "seconds": time.perf_counter() - t0}))
    return {"k": 1, "retriever": cfg.retriever.name, "max_steps": int(rc.iterative.max_steps)}
