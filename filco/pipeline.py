"""FilCo experiments: the Full / Psg / FilCo / Silver comparison (Fig. 4, Table 5), the
per-measure comparison (Table 4), context statistics (Table 3, Fig. 6) and retrieval
statistics (Table 2). One run = one setting on one evaluation set = one CSV row."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from ragrepro.cache import cache_path, cached_json
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError
from ragrepro.generation import check_budget, record, summarize
from ragrepro.hashing import hash_obj
from ragrepro.metrics import get_metric
from ragrepro.metrics.qa import unigram_precision
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval.base import Retriever
from ragrepro.tracking import Run

from . import prompts
from .cxmi import CxmiScorer
from .data import QASet, load_examples
from .diagnostics import context_diag
from .measures import CXMI_THRESHOLD_NOTE, MeasureSpec
from .official import official_prediction
from .settings import SETTINGS, FilcoSettings, variant_label
from .silver import (
    Example,
    Silver,
    choose_output,
    ctx_train_target,
    eval_context,
    gen_train_context,
    psg_labels,
    silver_contexts,
)
from .split import split_sentences
from .tasks import Task, get_task
from .train import trained_lm

log = logging.getLogger(__name__)
# the `method` column of each setting: the baselines are named apart from FilCo itself
METHODS = {"full": "filco-full", "psg": "filco-psg", "filco": "filco", "silver": "filco-silver"}


# -- settings ------------------------------------------------------------------------------
def measure_spec(fc: FilcoSettings, task: Task) -> MeasureSpec:
    name = task.measure if fc.measure == "auto" else fc.measure
    return MeasureSpec.from_mode(name, fc.measure_mode, **fc.measure_overrides)


def task_of(fc: FilcoSettings, dataset_task: str) -> Task:
    """filco.task, or (auto) the evaluation dataset's `task` (its conf/dataset YAML)."""
    return get_task(dataset_task if fc.task == "auto" else fc.task)


@dataclass
class Ctx:
    """Everything a run needs, built once."""

    fc: FilcoSettings
    task: Task
    spec: MeasureSpec
    lm: LM
    split: Callable[[str], list[str]]
    seed: int
    # the CXMI scoring model, built only for measure=cxmi; empty = the generator's base model
    cxmi_scorer: Deferred = field(default_factory=Deferred)
    # budgets the rehearsal capped: dotted key -> configured value (rehearsal.uncapped)
    uncapped: Mapping[str, Any] | None = None

    def configured(self, key: str, value: int) -> int:
        """The budget `key` was configured with (the rehearsal's record of it, else `value`):
        under the rehearsal's cap the check still reads the budget a real run would use."""
        return int(self.uncapped[key]) if self.uncapped and key in self.uncapped else int(value)

    @property
    def k(self) -> int:
        return self.fc.k

    @property
    def ctx_answer_prefix(self) -> str:
        """get_inputs.py --answer_prefix of the M_ctx data (FEVER's label sentence)."""
        return self.fc.ctx_answer_prefix

    @cached_property
    def scorer_lm(self) -> LM:
        """CXMI's scoring model, built once: the `cxmi_scorer` component, else the base LM."""
        return self.cxmi_scorer.build() if self.cxmi_scorer else self.lm

    def cache_file(self, kind: str, key_obj: Any) -> Path:
        return cache_path("filco", kind, f"{hash_obj(key_obj, 20)}.json")


def examples_key(exs: Sequence[Example]) -> str:
    return hash_obj([[e.qid, e.question, list(e.answers), list(e.passages), e.task] for e in exs], 32)


def passage_retriever(fc: FilcoSettings, corpus: Deferred, retriever: Deferred) -> Retriever | None:
    """The retriever over the corpus, unless the passages come from the records only."""
    return retriever.build(corpus=corpus.build()) if fc.passages != "record" else None


# -- silver contexts -----------------------------------------------------------------------
def cxmi_scorer(c: Ctx) -> CxmiScorer:
    return CxmiScorer(c.scorer_lm, c.task, prompt=c.fc.cxmi.prompt, batch_size=c.fc.cxmi.batch_size,
                      max_input_tokens=c.fc.max_input_tokens)


def silvers(c: Ctx, exs: Sequence[Example]) -> list[Silver]:
    scorer = cxmi_scorer(c) if c.spec.name == "cxmi" else None
    key = {"examples": examples_key(exs), "spec": c.spec.as_dict(), "splitter": c.fc.splitter,
           "scorer": None if scorer is None else [scorer.lm.name, scorer.lm.revision,
                                                   scorer.prompt, scorer.max_input_tokens]}
    rows = cached_json(c.cache_file("silver", key), lambda: [
        s.__dict__ for s in silver_contexts(exs, c.spec, c.split, scorer)])
    return [Silver(**r) for r in rows]


# -- models --------------------------------------------------------------------------------
def _join(passages: Sequence[str]) -> str:
    return "\n".join(passages)


def gen_pairs(c: Ctx, exs: Sequence[Example], contexts: Sequence[str]) -> list[tuple[str, str]]:
    return [(prompts.gen_prompt(c.task, e.question, ctx),
             prompts.gen_target(c.task, choose_output(e.answers, e.passages)))
            for e, ctx in zip(exs, contexts)]


def train_contexts(c: Ctx, setting: str, exs: Sequence[Example], sil: Sequence[Silver]) -> list[str]:
    """M_gen training contexts: full passages (Full), the passages the measure drew from
    (Psg), or the silver sentences (FilCo and Silver share one generator)."""
    rule = c.fc.fallback.gen_train
    if setting == "full":
        return [_join(e.passages) for e in exs]
    if setting == "psg":
        return [_join([p for p, keep in zip(e.passages, psg_labels(s, len(e.passages))) if keep])
                or gen_train_context(Silver(""), e.passages, rule) for e, s in zip(exs, sil)]
    return [gen_train_context(s, e.passages, rule) for e, s in zip(exs, sil)]


def generator(c: Ctx, setting: str, exs: Sequence[Example], sil: Sequence[Silver]):
    role = "gen-full" if setting == "full" else "gen-psg" if setting == "psg" else "gen-silver"
    pairs = gen_pairs(c, exs, train_contexts(c, setting, exs, sil))
    return trained_lm(c.lm, pairs, c.fc.train.config("gen", c.seed), role)


def ctx_pairs(c: Ctx, exs: Sequence[Example], sil: Sequence[Silver]) -> list[tuple[str, str]]:
    """M_ctx training pairs: question + passages -> the silver context (fallback.ctx_target
    says what an empty one becomes; `drop` leaves the example out)."""
    pairs = []
    for e, s in zip(exs, sil):
        if not s.text and c.fc.fallback.ctx_target == "drop":
            continue
        pairs.append((prompts.ctx_prompt(c.task, e.question, e.passages, c.ctx_answer_prefix),
                      ctx_train_target(s, c.fc.fallback.ctx_target, e.passages)))
    return pairs


def ctx_filter(c: Ctx, exs: Sequence[Example], sil: Sequence[Silver]):
    return trained_lm(c.lm, ctx_pairs(c, exs, sil), c.fc.train.config("ctx", c.seed), "ctx")


def psg_filter(c: Ctx, exs: Sequence[Example], sil: Sequence[Silver]):
    pairs = [(prompts.psg_prompt(c.task, e.question, p), prompts.PSG_YES if keep else prompts.PSG_NO)
             for e, s in zip(exs, sil)
             for p, keep in zip(e.passages, psg_labels(s, len(e.passages)))]
    return trained_lm(c.lm, pairs, c.fc.train.config("psg", c.seed), "psg")


def generate_records(c: Ctx, lm: LM, sources: Sequence[str], max_new: int,
                     what: str) -> list[dict[str, Any]]:
    """{text, generation} per source: the decoded output and its generation record (finish
    reason, prompt/output tokens, truncation; ragrepro.generation.record)."""
    from tqdm import tqdm

    from .encoding import prompt_ids_truncated

    # `records: 2`: the cache holds records, not the bare texts of earlier versions
    key = {"model": [lm.name, lm.revision], "sources": hash_obj(list(sources), 32),
           "max_new": max_new, "max_in": c.fc.max_input_tokens, "records": 2}

    def compute() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        bs = c.fc.gen_batch_size
        for b in tqdm(range(0, len(sources), bs), desc=what, leave=False):
            enc = [prompt_ids_truncated(lm, s, c.fc.max_input_tokens) for s in sources[b:b + bs]]
            gen = lm.generate_with_finish([ids for ids, _ in enc], max_new_tokens=max_new,
                                          batch_size=bs)
            for (ids, cut), (new, finish) in zip(enc, gen):
                text = lm.decode(new, skip_special_tokens=True).strip()
                out.append({"text": text, "generation": record(finish, len(ids), len(new),
                                                               truncated=cut, prediction=text)})
        return out

    return cached_json(c.cache_file("generations", key), compute)


def generate_texts(c: Ctx, lm: LM, sources: Sequence[str], max_new: int, what: str) -> list[str]:
    return [r["text"] for r in generate_records(c, lm, sources, max_new, what)]


# -- budgets that fit ----------------------------------------------------------------------
# Each generation budget must hold the longest target its model is trained on, as it is
# trained on it: EOS included (a model that cannot emit its end token runs to the budget, and
# the row measures the harness), cut at the role's train max_target_tokens (a model never
# trained past that length cannot be cut off by a budget that reaches it; ELI5's long
# answers under the paper's 128). Checked before training; test generation uses the same.
def _target_encoder(c: Ctx, role: str) -> Callable[[str], list[int]]:
    from .encoding import target_ids

    cut = c.fc.train.config(role, c.seed).max_target_tokens
    return lambda text: target_ids(c.lm, text, cut)


def check_gen_budget(c: Ctx, train: Sequence[Example]) -> dict[str, int]:
    """M_gen's targets (`answer: ..` of the training questions) are known at start."""
    if c.fc.stage != "generate":
        return {}
    targets = [prompts.gen_target(c.task, choose_output(e.answers, e.passages)) for e in train]
    return {"filco.gen_max_new_tokens": check_budget(
        "filco.gen_max_new_tokens", c.configured("filco.gen_max_new_tokens",
                                                 c.fc.gen_max_new_tokens),
        targets, _target_encoder(c, "gen"), "M_gen training target")}


def check_ctx_budget(c: Ctx, setting: str, train: Sequence[Example],
                     sil_train: Sequence[Silver]) -> dict[str, int]:
    """M_ctx's targets are the silver contexts: known once the training set is labelled."""
    if setting != "filco" or c.fc.test_context != "predicted":
        return {}
    targets = [t for _, t in ctx_pairs(c, train, sil_train)]
    return {"filco.ctx_max_new_tokens": check_budget(
        "filco.ctx_max_new_tokens", c.configured("filco.ctx_max_new_tokens",
                                                 c.fc.ctx_max_new_tokens),
        targets, _target_encoder(c, "ctx"), "M_ctx training target (silver context)")}


# -- test-time contexts --------------------------------------------------------------------
@dataclass
class TestContexts:
    """Per test example: the setting's filtered context (before the test-time fallback),
    the context the generator reads, and the filter model's generation records (FilCo)."""

    filtered: list[str]
    contexts: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    filter_generation: list[dict[str, Any]] | None = None


def _fallback(c: Ctx, filtered: list[str], test: Sequence[Example], **kw: Any) -> TestContexts:
    return TestContexts(filtered, [eval_context(f, e.passages, c.fc.fallback.test)
                                   for f, e in zip(filtered, test)], **kw)


def contexts_for(c: Ctx, setting: str, train: Sequence[Example], test: Sequence[Example],
                 sil_train: Sequence[Silver], sil_test: Sequence[Silver]) -> TestContexts:
    """The context each test example's generator sees, and what produced it."""
    if setting == "full":
        full = [_join(e.passages) for e in test]
        return TestContexts(full, list(full))
    if setting == "silver" or (setting == "filco" and c.fc.test_context == "silver_as_released"):
        # silver_as_released: the released replace_context.py feeds the silver context copied
        # by query.py instead of the filter's predictions (issue #10)
        return _fallback(c, [s.text for s in sil_test], test)
    if setting == "psg":
        model, info = psg_filter(c, train, sil_train)
        sources = [prompts.psg_prompt(c.task, e.question, p) for e in test for p in e.passages]
        verdicts = iter(generate_texts(c, model, sources, 2, "psg filter"))
        kept = [_join([p for p in e.passages if next(verdicts).lower().startswith(prompts.PSG_YES)])
                for e in test]
        return _fallback(c, kept, test, info=info)
    if setting == "filco":
        model, info = ctx_filter(c, train, sil_train)
        sources = [prompts.ctx_prompt(c.task, e.question, e.passages, c.ctx_answer_prefix)
                   for e in test]
        recs = generate_records(c, model, sources, c.fc.ctx_max_new_tokens, "M_ctx")
        return _fallback(c, [r["text"] for r in recs], test, info=info,
                         filter_generation=[r["generation"] for r in recs])
    raise ConfigError(f"filco.setting={setting!r}; use one of {SETTINGS}.")


# -- the pipelines -------------------------------------------------------------------------
def _settings(c: Ctx, train: QASet, test: QASet, n_train: int, n_test: int,
              retriever: str | None, scorer: str | None) -> dict[str, Any]:
    fc, common = c.fc, c.fc.train.common
    return {**test.row(), "method": METHODS[fc.setting],
            "setting": fc.setting, "variant": variant_label(fc.setting, fc.fallback.switches()),
            "stage": fc.stage, "top_k": c.k, "family": c.lm.kind,
            "generator": c.lm.name,
            "generator_revision": c.lm.revision, "task": c.task.name, "k": c.k,
            "measure": c.spec.name, "measure_mode": c.spec.mode,
            "measure_threshold": c.spec.threshold, "splitter": fc.splitter,
            "eval_dataset": test.name, "eval_split": test.split, "eval_limit": test.limit,
            "train_dataset": train.name, "train_dataset_variant": train.variant,
            "train_split": train.split, "train_limit": train.limit,
            "n_train": n_train, "n_eval": n_test, "gen_format": fc.gen_format,
            "ctx_answer_prefix": c.ctx_answer_prefix, "cxmi_output": c.spec.cxmi_output,
            "test_context": fc.test_context, "fallback_test": fc.fallback.test,
            "fallback_gen_train": fc.fallback.gen_train,
            "fallback_ctx_target": fc.fallback.ctx_target,
            "cxmi_scorer": scorer or "generator-base",
            "cxmi_prompt": fc.cxmi.prompt, "retriever": retriever,
            "train_epochs": common["epochs"], "train_max_steps": common["max_steps"],
            "train_lr": common["lr"], "lora": common["lora"],
            "max_input_tokens": fc.max_input_tokens, "gen_max_new_tokens": fc.gen_max_new_tokens,
            "ctx_max_new_tokens": fc.ctx_max_new_tokens}


def context_record(c: Ctx, e: Example, context: str) -> dict[str, Any]:
    """Per-example context statistics: Table 3 (unigram precision of the context against the
    gold output, max over answers) and Fig. 6 (generator input tokens: query + context)."""
    from .encoding import count_tokens

    n_q, n_ctx = count_tokens(c.lm, [e.question, context])
    return {"qid": e.qid, "question": e.question, "answers": list(e.answers), "context": context,
            "context_empty": not context.strip(),
            "context_precision": max((unigram_precision(context, a) for a in e.answers),
                                     default=0.0),
            "input_tokens": n_q + n_ctx, "context_tokens": n_ctx}


def run(run: Run, *, lm: LM, train: QASet, test: QASet, task: str, settings: FilcoSettings,
        corpus: Deferred, retriever: Deferred, cxmi_scorer: Deferred, seed: int,
        uncapped: Mapping[str, Any] | None = None) -> Result:
    """One setting (filco.setting) on one evaluation set (`test`, the `dataset` node), the
    filter and the generator fine-tuned from `lm` on `train`. `task` is the dataset's (used
    when filco.task=auto); corpus and retriever are built unless filco.passages=record;
    filco.stage=context stops after building the contexts (Table 3 / Fig. 6 need no generator).
    `uncapped`: the configured generation budgets the rehearsal capped (their checks read it)."""
    fc = settings
    the_task = task_of(fc, task)
    c = Ctx(fc, the_task, measure_spec(fc, the_task), lm,
            partial(split_sentences, splitter=fc.splitter), seed, cxmi_scorer, uncapped)
    with run.timed("data"):
        source = passage_retriever(fc, corpus, retriever)
        train_exs, test_exs = (load_examples(qa, source, fc.k, the_task.name, fc.passages)
                               for qa in (train, test))
    records, extra, sil_train = evaluate(c, fc.setting, train_exs, test_exs, run)
    metrics: dict[str, Any] = _aggregate(records, c.task, fc.stage == "generate")
    metrics.update(summarize(records))  # gen_<stage>_* and diag_ctx_* rates
    if fc.setting != "full":  # Full needs no silver contexts
        metrics["silver_empty_train"] = sum(s.empty for s in sil_train) / max(1, len(sil_train))
    settings_row = _settings(c, train, test, len(train_exs), len(test_exs), retriever.name,
                             cxmi_scorer.name)
    return Result(metrics=metrics, settings=settings_row, extra=extra)


def evaluate(c: Ctx, setting: str, train: Sequence[Example], test: Sequence[Example],
             run: Run) -> tuple[list[dict], dict, list[Silver]]:
    """Contexts for `setting`, then (stage=generate) the generator's predictions and scores.
    Per-sample records go to run.add_sample (a rerun skips the ones already written)."""
    # FilCo's test silvers are a diagnostic (ctx_is_silver); the Silver setting reads them
    test_silver = setting in ("silver", "filco")
    budgets = check_gen_budget(c, train)
    with run.timed("silver"):
        sil_train = silvers(c, train) if setting != "full" else [Silver("")] * len(train)
        sil_test = silvers(c, test) if test_silver else [Silver("")] * len(test)
    budgets.update(check_ctx_budget(c, setting, train, sil_train))
    with run.timed("filter"):
        tc = contexts_for(c, setting, train, test, sil_train, sil_test)
    done = {r["qid"]: r for r in run.repair_samples()}
    records = [context_record(c, e, ctx) for e, ctx in zip(test, tc.contexts)]
    for i, (r, e) in enumerate(zip(records, test)):
        r["filtered_context"] = tc.filtered[i]
        r["diag"] = context_diag(tc.filtered[i], e.passages, e.answers, c.split,
                                 sil_test[i].text if test_silver else None)
        r["generation"] = {"filter": tc.filter_generation[i]} if tc.filter_generation else {}
    extra: dict[str, Any] = {"filter_train": tc.info, "budgets_needed": budgets,
                             "cxmi_threshold_note": CXMI_THRESHOLD_NOTE}
    if c.fc.stage == "generate":
        with run.timed("generator"):
            gen, gen_info = generator(c, setting, train, sil_train)
            extra["generator_train"] = gen_info
            _generate_and_record(c, gen, setting, test, tc.contexts, records, done, run)
    else:
        for r in records:
            if r["qid"] not in done:
                run.add_sample({"setting": setting, **r})
    return records, extra, list(sil_train)


def _generate_and_record(c: Ctx, gen: LM, setting: str, test: Sequence[Example],
                         contexts: Sequence[str], records: list[dict], done: dict[str, dict],
                         run: Run) -> None:
    """M_gen predictions, batch by batch; each finished batch is written at once, and examples
    already in samples.jsonl (a killed run) are taken from there instead of regenerated."""
    from tqdm import tqdm

    from .encoding import prompt_ids_truncated

    todo = []
    for i, r in enumerate(records):
        if "raw_output" in done.get(r["qid"], {}):
            r.update({k: done[r["qid"]][k] for k in ("raw_output", "prediction", "score",
                                                      "prediction_code", "score_code")
                      + (("generation",) if "generation" in done[r["qid"]] else ())})
        else:
            todo.append(i)
    bs = c.fc.gen_batch_size
    for b in tqdm(range(0, len(todo), bs), desc="M_gen", leave=False):
        idx = todo[b:b + bs]
        enc = [prompt_ids_truncated(gen, prompts.gen_prompt(
            c.task, test[i].question, contexts[i], c.fc.gen_format, c.ctx_answer_prefix),
            c.fc.max_input_tokens) for i in idx]
        outs = gen.generate_with_finish([ids for ids, _ in enc],
                                        max_new_tokens=c.fc.gen_max_new_tokens, batch_size=bs)
        for i, (ids, cut), (out_ids, finish) in zip(idx, enc, outs):
            r = records[i]
            raw = gen.decode(out_ids, skip_special_tokens=True)
            pred = prompts.clean_output(raw.strip())
            r["generation"] = {**r.get("generation", {}), "answer": record(
                finish, len(ids), len(out_ids), truncated=cut, prediction=pred)}
            # score_code: the prediction as the official scripts extract it (query.py or
            # query_llama.py, then eval.py's clean_output) under eval.py's metric
            pred_code = official_prediction(raw, gen.kind)
            r.update(raw_output=raw.strip(), prediction=pred,
                     score=get_metric(c.task.metric).fn(pred, r["answers"]),
                     prediction_code=pred_code,
                     score_code=get_metric(c.task.metric_code).fn(pred_code, r["answers"]))
            run.add_sample({"setting": setting, **r})


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else float("nan")


def _aggregate(records: Sequence[dict], task: Task, with_scores: bool) -> dict[str, Any]:
    """Means over the evaluated examples. `score`, `score_code`, `context_precision` are x100
    (filco.tables); the columns named after the metric (em_squad, em_filco_code, ...,
    unigram_precision) are fractions, the unit of conf/report/metrics.yaml."""
    m = {"context_precision": 100 * _mean([r["context_precision"] for r in records]),
         "unigram_precision": _mean([r["context_precision"] for r in records]),
         "input_tokens": _mean([r["input_tokens"] for r in records]),
         "context_tokens": _mean([r["context_tokens"] for r in records]),
         "context_empty": _mean([float(r["context_empty"]) for r in records])}
    if with_scores:
        m["score"] = 100 * _mean([r["score"] for r in records])
        m["score_code"] = 100 * _mean([r["score_code"] for r in records])
        m["metric"] = task.metric
        m["metric_code"] = task.metric_code
        # the same numbers under the metric's own name, for the report's paper tables
        m[task.metric] = _mean([r["score"] for r in records])
        m[task.metric_code] = _mean([r["score_code"] for r in records])
    return m
