"""The RICHES paper's retrieve-then-read baselines (§5.4).

- dense_reader: retriever top-k + few-shot reader; k = the rounded mean number of keys of the
  matching RICHES run (`k: auto`) or a number.
- iterative: self-ask style follow-up questions, one retrieval (top-1) each, up to max_steps,
  then a forced answer.
Both copy retrieved passages, so they record no `keys_verbatim` (no decoded keys).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ragrepro import generation
from ragrepro.retrieval import Hit, Retriever
from ragrepro.tracking import Run, read_csv

from . import markers
from .beam import BeamConfig, HFStepModel, beam_search
from .constraint import KeyConstraint, vocab_size_of
from .index import SuffixIndex
from .inputs import Inputs
from .prompts import iterative_demo, reader_prompt
from .records import sample_record
from .settings import DenseSettings, IterativeSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowMatch:
    """The cells of the RICHES row a `k: auto` baseline takes its k from."""

    dataset: str
    model: str
    limit: int | None
    hops: int | None


def auto_k(csv_path: Path, match: RowMatch, default: int) -> tuple[int, str]:
    """k = rounded mean number of keys of the finished RICHES run on the same dataset and
    model in this experiment's CSV (the paper matches k to RICHES's mean, §5.4)."""
    if csv_path.exists():  # binary garbage: a DataError naming the CSV's line and the fix
        rows = [r for r in read_csv(csv_path) if r.get("riches_method") == "riches"
                and r.get("dataset") == match.dataset and r.get("model") == match.model
                and r.get("limit", "") == _csv_str(match.limit)
                and r.get("dataset_hops", "") == _csv_str(match.hops)]
        if rows and rows[-1].get("keys_per_answer"):
            return max(1, round(float(rows[-1]["keys_per_answer"]))), f"riches run {rows[-1]['run_id']}"
    log.warning("k=auto: no finished RICHES run in %s for this dataset/model; using k=%d",
                csv_path, default)
    return default, "default"


def _csv_str(v: Any) -> str:
    return "" if v is None else str(v)


def dense_k(dense: DenseSettings, csv_path: Path, match: RowMatch) -> tuple[int, str]:
    if str(dense.k) == "auto":
        return auto_k(csv_path, match, int(dense.k_default))
    return int(dense.k), "config"


def run_dense(run: Run, inputs: Inputs, retriever: Retriever, k: int,
              max_new_tokens: int) -> None:
    """Retrieve k passages per question, then read them with the few-shot reader prompt."""
    lm = inputs.lm
    with run.timed("retrieve"):
        all_hits = retriever.search([r.question for r in inputs.todo], k=k) if inputs.todo else []
    for rec, hits in tqdm(list(zip(inputs.todo, all_hits)), desc="dense_reader"):
        t0 = time.perf_counter()
        prompt = reader_prompt(inputs.prompt, inputs.corpus_text,
                               [(h.title, h.text) for h in hits], rec.question)
        ids = lm.encode(prompt)
        with run.timed("read"):
            out, finish = lm.generate_with_finish([ids], max_new_tokens=max_new_tokens)[0]
        text = lm.decode(out, skip_special_tokens=True)
        answer = text.split("\n")[0].strip()
        evidence = " ".join(f"{h.title}. {h.text}" for h in hits)
        run.add_sample(sample_record(rec, answer, evidence, [h.title for h in hits], {
            "n_keys": len(hits), "seconds": time.perf_counter() - t0,
            "hits": [{"pid": h.pid, "title": h.title, "score": h.score} for h in hits],
            "output": text,
            "generation": {"answer": generation.record(line_finish(finish, text), len(ids),
                                                       len(out), prediction=answer)}}))


def line_finish(finish: str, text: str) -> str:
    """The reader's answer is the first line of its output: a generation that ran on past
    that line's end was not cut off (`stop`), whatever the token budget did afterwards."""
    return "stop" if finish == "length" and "\n" in text else finish


@dataclass(frozen=True)
class LineReader:
    """Greedy decoding of one line after the self-ask demonstrations (no constraint)."""

    inputs: Inputs
    demo_ids: list[int]
    step_model: HFStepModel
    free: KeyConstraint
    line_cfg: BeamConfig
    records: list[dict[str, Any]] = field(default_factory=list)  # one per line, in order

    @classmethod
    def build(cls, inputs: Inputs, max_new_tokens: int) -> LineReader:
        lm = inputs.lm
        vocab = vocab_size_of(lm.tokenizer)
        free = KeyConstraint(index=SuffixIndex.build([[0]], vocab),
                             spec=markers.MarkerSpec((-1,), (-2,)), vocab_size=vocab,
                             start_at_word=False, enabled=False)
        line_cfg = BeamConfig(beam_size=1, adaptive=True, max_new_tokens=max_new_tokens,
                              stop_strings=("\n",))
        return cls(inputs, lm.encode(iterative_demo(inputs.prompt, inputs.corpus_text)),
                   HFStepModel(lm.model, lm.device), free, line_cfg)

    def line(self, history: str) -> str:
        lm = self.inputs.lm
        eos = [t for t in {lm.eos_id} if t is not None]
        ids = self.demo_ids + lm.encode(history, add_bos=False)
        hyp = beam_search(self.step_model, ids, self.free, self.line_cfg, lm.decode, eos, None,
                          len(self.demo_ids))[0]
        line = lm.decode([t for t in hyp.tokens if t not in eos]).split("\n")[0].strip()
        self.records.append(generation.record(hyp.reason, len(ids), len(hyp.tokens),
                                              prediction=line))
        return line


def ask_iteratively(reader: LineReader, retriever: Retriever, question: str,
                    max_steps: int) -> tuple[str, list[Hit], int, str]:
    """(answer, retrieved hits, follow-up steps, trace) of one question."""
    history = f"Question: {question}\n"
    hits: list[Hit] = []
    steps = 0
    while True:
        force = steps >= max_steps
        line = reader.line(history + ("Answer:" if force else ""))
        if force:
            return line, hits, steps, history
        if line.startswith("Answer:"):
            return line[len("Answer:"):].strip(), hits, steps, history
        query = line[len("Follow-up:"):].strip() if line.startswith("Follow-up:") else line
        found = retriever.search([query], k=1)[0] if query else []
        if not found:  # nothing to ask or nothing found: force the answer
            steps = max_steps
            continue
        hits.append(found[0])
        history += f"Follow-up: {query}\nEvidence: {found[0].title}. {found[0].text}\n"
        steps += 1


def run_iterative(run: Run, inputs: Inputs, retriever: Retriever,
                  it: IterativeSettings) -> None:
    reader = LineReader.build(inputs, it.max_new_tokens)
    for rec in tqdm(inputs.todo, desc="iterative"):
        t0 = time.perf_counter()
        reader.records.clear()
        answer, hits, steps, history = ask_iteratively(reader, retriever, rec.question,
                                                       it.max_steps)
        evidence = " ".join(f"{h.title}. {h.text}" for h in hits)
        run.add_sample(sample_record(rec, answer, evidence, [h.title for h in hits], {
            "n_keys": len(hits), "steps": steps,
            "trace": history, "seconds": time.perf_counter() - t0,
            **iterative_diagnostics(reader.records, answer)}))


def iterative_diagnostics(lines: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    """The answer line's generation record (the last line read) and how many follow-up
    lines hit the per-line budget."""
    if not lines:
        return {}
    last = dict(lines[-1], empty=not answer.strip())
    cut = sum(r["finish"] == "length" for r in lines[:-1])
    return {"generation": {"answer": last}, "diag": {"followups_cut": cut}}

