"""In-Context RALM open-domain QA (paper §5 / Table 4 / Fig. 8; official eval_qa.py).

For each question: the top `num_docs` documents (from the DPR file, or retrieved from the
corpus with the question as the query), the official prompt, left-truncation to
context_size - 10 tokens, greedy decoding of 10 new tokens, and the first line of the
generation as the answer. Scored with SQuAD exact match and `has_answer` (a gold answer
occurs in the prompt). samples.jsonl is the resume checkpoint: finished qids are skipped.

Where we differ from the official code, a switch (`qa.*`) keeps the official behaviour:
- `strip_prompt`: `tokens` (default) takes the new tokens only; `chars` decodes prompt +
  generation and cuts `len(prompt)` characters, as eval_qa.py does (which misaligns when the
  prompt was truncated or does not decode back to itself).
- `prompt_bos`: `tokenizer` (default, official: the tokenizer's own special tokens, i.e. BOS
  for LLaMA and Gemma, none for GPT-2/SmolLM2), `model` (the model config's BOS policy),
  `true` / `false`.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragrepro import shards
from ragrepro.data.records import QARecord
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError
from ragrepro.generation import check_budget, record, summarize
from ragrepro.metrics import get_metric
from ragrepro.pipeline import Result
from ragrepro.retrieval.base import Retriever, index_row
from ragrepro.tracking import Run

from .prompts import DEMONSTRATIONS, normalize_question, qa_prompt
from .settings import QASettings
from .sources import build_retriever

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)

# ---- pure pieces ---------------------------------------------------------------------
def left_truncate(ids: Sequence[int], max_tokens: int) -> tuple[list[int], bool]:
    """Keep the last `max_tokens` ids (official: input_ids[..., -(max_length - 10):])."""
    if max_tokens < 1:
        raise ConfigError(f"prompt budget {max_tokens} tokens: the model context is too short.")
    ids = list(ids)
    return (ids[-max_tokens:], True) if len(ids) > max_tokens else (ids, False)


def first_line(generation: str) -> str:
    """The answer is the first line of the generated text."""
    return generation.split("\n")[0]


def finish_of(reason: str, text: str) -> str:
    """Why a QA generation ended, as the pipeline reads it: the answer is the first line, so
    a newline is its stop string. A generation that filled max_new_tokens after its first
    line ended is `stop`, not `length` (the budget cut nothing the score reads); EOS stays
    `eos`."""
    if reason == "length" and "\n" in text:
        return "stop"
    return reason


def check_qa_budget(lm: LM, qa: QASettings) -> int:
    """Refuse a qa.max_new_tokens below the longest demonstration answer of the prompt,
    with this run's tokenizer (ragrepro.generation.check_budget). The official QA prompts
    (ralm.prompts) are zero-shot, so this holds for any budget until a prompt with
    demonstrations is added there."""
    return check_budget("qa.max_new_tokens", qa.max_new_tokens, DEMONSTRATIONS,
                        lambda t: lm.encode(t, add_bos=False))


def migrate_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A record written before the diagnostics kept the generated text under `generation`;
    that key now holds the per-stage diagnostics (ragrepro.generation), the text `output`."""
    if isinstance(sample.get("generation"), str):
        sample = dict(sample)
        sample["output"] = sample.pop("generation")
    return sample


def strip_by_chars(full_decoded: str, prompt: str) -> str:
    """Official eval_qa.py: generation_str[len(prompt):]."""
    return full_decoded[len(prompt):]


def encode_prompt(lm: LM, prompt: str, policy: str | bool) -> list[int]:
    policy = str(policy).lower()
    if policy == "tokenizer":  # tokenizer.encode(prompt) with default special tokens
        return list(lm.tokenizer(prompt)["input_ids"])
    if policy == "model":
        return lm.encode(prompt)
    return lm.encode(prompt, add_bos=(policy == "true"))


# ---- documents -----------------------------------------------------------------------
def pick_doc_source(records: Sequence[QARecord], qa: QASettings) -> str:
    if qa.num_docs == 0:
        return "none"
    if qa.doc_source != "auto":
        if qa.doc_source == "dataset" and not any(r.passages for r in records):
            raise ConfigError("qa.doc_source=dataset but the records carry no passages; use a "
                              "DPR retriever-results file or qa.doc_source=retrieve.")
        return qa.doc_source
    return "dataset" if all(r.passages for r in records) else "retrieve"


def retrieve_docs(retriever: Retriever, records: Sequence[QARecord], k: int, run: Run,
                  retriever_cfg: dict[str, Any],
                  corpus_name: str | None) -> tuple[list[list[tuple[str, str, str]]], dict[str, Any]]:
    """(per record [(pid, title, text)], settings) with the question as the query (as DPR
    and the official code do: the raw question, not the normalised one)."""
    with run.timed("retrieval"):
        hits = retriever.search([r.question for r in records], k=k)
    settings = {"retriever": retriever_cfg.get("name"), "corpus": corpus_name,
                "retrieval_query": "question", **index_row(retriever)}
    for key in ("k1", "b"):
        if key in retriever_cfg:
            settings[f"retriever_{key}"] = retriever_cfg[key]
    return [[(h.pid, h.title, h.text) for h in hs] for hs in hits], settings


def documents(run: Run, records: Sequence[QARecord], qa: QASettings, corpus: Deferred,
              retriever: Deferred) -> tuple[str, list, dict[str, Any]]:
    """(where the documents come from, per record its documents, row settings)."""
    source = pick_doc_source(records, qa)
    if source == "retrieve":
        docs, extra = retrieve_docs(build_retriever(retriever, corpus), records,
                                    qa.num_docs, run, retriever.config or {}, corpus.name)
        return source, docs, extra
    if source == "dataset":
        return source, [[(p.pid, p.title, p.text) for p in r.passages[:qa.num_docs]]
                        for r in records], {"retriever": "dataset-ctxs"}
    return source, [[] for _ in records], {}


# ---- the pipeline --------------------------------------------------------------------
def run(run: Run, *, lm: LM, records: list[QARecord], settings: QASettings,
        corpus: Deferred, retriever: Deferred) -> Result:
    """The pipeline (`pipeline._target_: ralm.qa.run`, wired in ralm/conf/ralm/qa.yaml)."""
    qa = settings
    check_qa_budget(lm, qa)
    source, docs, extra_settings = documents(run, records, qa, corpus, retriever)
    budget = lm.context_size - qa.context_margin
    done = {s["qid"]: migrate_sample(s) for s in run.repair_samples()}
    bsz = qa.batch_size
    # a shard (shard=i/n) answers whole batches of the unsharded run: the same generations;
    # every shard retrieves for all questions so its documents are the unsharded run's
    mine = shards.items_of(run, len(records), bsz)
    todo = [i for i in mine if records[i].qid not in done]
    if done:
        log.info("Resuming: %d of %d questions already done", len(done), len(mine))
    with run.timed("generate"), tqdm(total=len(todo), desc="qa", unit="q") as bar:
        for b in range(0, len(todo), bsz):
            idx = todo[b:b + bsz]
            for sample in answer_batch(lm, [records[i] for i in idx], [docs[i] for i in idx],
                                       qa, budget):
                run.add_sample(sample)
                done[sample["qid"]] = sample
            bar.update(len(idx))
    samples = [done[records[i].qid] for i in mine]
    row = {**qa.row(doc_source=source, prompt_max_tokens=budget, n_examples=len(records)),
           **extra_settings}
    metrics = aggregate(samples) if samples or shards.part_of(run) is None else {}
    return Result(metrics=metrics, settings=row,
                  extra={"example_prompt": samples[0].get("prompt") if samples else None})


def merge_shards(parts: Sequence[shards.Part], samples: list[dict[str, Any]],
                 out: Any) -> dict[str, Any]:
    """The run's metrics from its parts' samples (in question order): ragrepro/shards.py."""
    return aggregate(samples)


def answer_batch(lm: LM, records: Sequence[QARecord],
                 docs: Sequence[Sequence[tuple[str, str, str]]], qa: QASettings,
                 budget: int) -> list[dict[str, Any]]:
    em, has = get_metric("em_squad").fn, get_metric("has_answer").fn
    prompts, inputs, truncated = [], [], []
    for r, d in zip(records, docs):
        q = normalize_question(r.question) if qa.normalize_question else r.question
        prompt = qa_prompt(q, [(t, x) for _, t, x in d], num_docs=qa.num_docs)
        ids, cut = left_truncate(encode_prompt(lm, prompt, qa.prompt_bos), budget)
        prompts.append(prompt)
        inputs.append(ids)
        truncated.append(cut)
    t0 = time.perf_counter()
    new = lm.generate_with_finish(inputs, max_new_tokens=qa.max_new_tokens,
                                  do_sample=False, batch_size=len(inputs))
    per_q = (time.perf_counter() - t0) / len(inputs)
    out = []
    for r, d, prompt, ids, cut, (gen, reason) in zip(records, docs, prompts, inputs,
                                                      truncated, new):
        if qa.strip_prompt == "chars":
            text = strip_by_chars(lm.tokenizer.decode(ids + gen, skip_special_tokens=True,
                                                      clean_up_tokenization_spaces=False), prompt)
        else:
            text = lm.decode(gen, skip_special_tokens=True)
        pred = first_line(text)
        titles = [t for _, t, _ in d]
        out.append({
            "qid": r.qid, "question": r.question, "answers": r.answers, "hops": r.hops,
            "split": r.split, "gold_titles": r.gold_titles, "doc_pids": [p for p, _, _ in d],
            "doc_titles": titles,
            "gold_in_docs": (float(any(t in set(r.gold_titles) for t in titles))
                             if r.gold_titles and d else None),
            "prompt": prompt, "prompt_tokens": len(ids), "truncated": cut,
            "output": text, "prediction": pred,
            "generation": {"answer": record(finish_of(reason, text), len(ids), len(gen),
                                            truncated=cut, prediction=pred)},
            "em": em(pred, r.answers), "has_answer": has(prompt, r.answers),
            "seconds": round(per_q, 4)})
    return out


def aggregate(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """EM and has_answer over all questions, plus per-hop EM and gold-title recall."""
    if not samples:
        raise ConfigError("No QA samples to aggregate: the dataset is empty after `limit`.")
    mean = get_metric("em_squad").aggregate
    out: dict[str, Any] = {"em": mean([s["em"] for s in samples]),
                           "has_answer": mean([s["has_answer"] for s in samples]),
                           "num_examples": len(samples),
                           "too_long": int(sum(bool(s["truncated"]) for s in samples))}
    for h in sorted({s["hops"] for s in samples}):
        part = [s["em"] for s in samples if s["hops"] == h]
        if len(part) < len(samples):
            out[f"em_hops{h}"] = mean(part)
    recall = [s["gold_in_docs"] for s in samples if s.get("gold_in_docs") is not None]
    if recall:
        out["gold_title_recall"] = mean(recall)
    # finish reasons, empty predictions, left truncation (gen_answer_*): the row's flags
    out.update(summarize(samples))
    return out


# `ralm.qa.run` runs in shards (shard=i/n, whole batches of questions): ragrepro/shards.py
run = shards.shardable(merge_shards)(run)
