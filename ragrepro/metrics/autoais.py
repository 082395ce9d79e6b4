"""AutoAIS (Bohnet et al. 2022, Attributed-QA): is the answer attributable to the passage?

Canonical backend: the TRUE NLI model `google/t5_xxl_true_nli_mixture` (T5-XXL) with the input

    premise: {passage} hypothesis: The answer to the question '{question}' is '{answer}'

Attributed-QA counts a sample as attributed when the greedy decoded output is exactly "1"
(`mode="decode"`); its released ratings define `auto_ais` as `nli_score > 0.5`, with
nli_score = P("1") at the first decoder step (`mode="prob"`, the default here; both are
recorded per sample when `record_both=True`). AutoAIS = attributed / all questions: a missing
prediction or passage counts as not attributed.

Substitutes, never reported under the name `autoais`:
- `t5` with any model other than TRUE_MODEL (e.g. a tiny random T5 for tests): result key
  `autoais_substitute`, settings `autoais_substitute=t5:<model>`.
- `nli`: an AutoModelForSequenceClassification NLI model (entailment probability); the
  result key is `autoais_substitute` with settings `autoais_substitute=nli:<model>`.
- `llm-judge` (ragrepro/metrics/llm_judge.py): an offline yes/no judge with a causal LM (the
  run's own or a `judge_model`); result key `autoais_substitute`, settings
  `autoais_substitute=llm-judge:<model>` and `autoais_judge_accuracy` (its accuracy on the
  hand-checked set, ragrepro/metrics/judge_set.py).
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hydra.utils import instantiate

from ..errors import ConfigError

# the llm-judge lives in its own module; re-exported here, where callers have always found it
from .llm_judge import JUDGE_PROMPT, LLMJudgeScorer, judge_prompt  # noqa: F401

log = logging.getLogger(__name__)

TRUE_MODEL = "google/t5_xxl_true_nli_mixture"
HYPOTHESIS = "The answer to the question '{question}' is '{answer}'"
T5_INPUT = "premise: {premise} hypothesis: {hypothesis}"
PASSAGE_FORMATS = ("heading", "alce", "text")


# ---- pure helpers --------------------------------------------------------------------
def format_premise(title: str, text: str, passage_format: str = "heading") -> str:
    """`heading`: Attributed-QA's `f"{headings}. {passage}"` with the title as the heading;
    `alce`: ALCE's `"Title: {title}\\n{text}"`; `text`: the passage text alone."""
    if passage_format == "heading":
        return f"{title}. {text}" if title else text
    if passage_format == "alce":
        return f"Title: {title}\n{text}"
    if passage_format == "text":
        return text
    raise ConfigError(f"AutoAIS passage_format={passage_format!r}; use one of {PASSAGE_FORMATS}.")


def hypothesis(question: str, answer: str) -> str:
    return HYPOTHESIS.format(question=question, answer=answer)


def t5_input(premise: str, question: str, answer: str) -> str:
    """The exact TRUE / Attributed-QA input string."""
    return T5_INPUT.format(premise=premise, hypothesis=hypothesis(question, answer))


def decoded_is_entailment(decoded: str) -> bool:
    """Attributed-QA's rule: the decoded output (special tokens skipped) equals "1"."""
    return decoded == "1"


def autoais(nli_score: float | None, threshold: float = 0.5) -> float:
    """Per-sample attribution from the stored NLI score: 1 if score > threshold, 0 if the
    score is missing (no prediction or no passage)."""
    if nli_score is None or (isinstance(nli_score, float) and math.isnan(nli_score)):
        return 0.0
    return float(nli_score > threshold)


@dataclass(frozen=True)
class AttributionItem:
    """One question's prediction and the passage it should be attributable to."""

    question: str
    answer: str | None
    title: str | None = None
    passage: str | None = None

    @property
    def complete(self) -> bool:
        return bool(self.answer and self.answer.strip()) and bool(self.passage and self.passage.strip())


@dataclass
class AutoAISResult:
    per_sample: list[dict[str, Any]]
    metrics: dict[str, float]
    settings: dict[str, Any] = field(default_factory=dict)


# ---- backends ------------------------------------------------------------------------
def _batches(n: int, size: int) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, max(1, size))]


def entailment_token_id(tokenizer: Any) -> int:
    """The id of the "1" the TRUE model emits for entailment, read from the tokenizer (209 in
    T5's vocabulary; checked, not assumed)."""
    ids = tokenizer("1", add_special_tokens=False)["input_ids"]
    ids = [i for i in ids if tokenizer.decode([i]).strip() != ""]
    if len(ids) != 1 or tokenizer.decode(ids).strip() != "1":
        raise ConfigError(f"The AutoAIS tokenizer does not encode '1' as one token (got {ids}); "
                          f"the TRUE scorer needs a T5-style vocabulary.")
    return int(ids[0])


class T5NLIScorer:
    """TRUE-style seq2seq NLI: score = P("1") at the first decoder step, softmax over the full
    vocabulary, decoder_input_ids = [[decoder_start_token_id]]."""

    backend = "t5"

    def __init__(self, model: Any, tokenizer: Any, model_name: str = TRUE_MODEL,
                 mode: str = "prob", threshold: float = 0.5, batch_size: int = 8,
                 max_input_tokens: int | None = None, device: str = "cpu"):
        if mode not in ("prob", "decode"):
            raise ConfigError(f"AutoAIS mode={mode!r}; use 'prob' (P('1') > threshold) or "
                              f"'decode' (greedy output == '1', Attributed-QA's rule).")
        self.model, self.tokenizer, self.model_name = model, tokenizer, model_name
        self.mode, self.threshold, self.batch_size = mode, threshold, batch_size
        self.max_input_tokens, self.device = max_input_tokens, device
        self.one_id = entailment_token_id(tokenizer)
        start = getattr(model.config, "decoder_start_token_id", None)
        self.decoder_start = 0 if start is None else int(start)

    def settings(self) -> dict[str, Any]:
        return {"autoais_backend": self.backend, "autoais_model": self.model_name,
                "autoais_mode": self.mode, "autoais_threshold": self.threshold,
                "autoais_one_token_id": self.one_id,
                "autoais_max_input_tokens": self.max_input_tokens}

    def inputs(self, premises: Sequence[str], questions: Sequence[str],
               answers: Sequence[str]) -> list[str]:
        return [t5_input(p, q, a) for p, q, a in zip(premises, questions, answers)]

    def _encode(self, texts: Sequence[str]) -> Any:
        kw: dict[str, Any] = {"return_tensors": "pt", "padding": True}
        if self.max_input_tokens:
            kw.update(truncation=True, max_length=self.max_input_tokens)
        return self.tokenizer(list(texts), **kw).to(self.device)

    def score_texts(self, texts: Sequence[str]) -> list[dict[str, Any]]:
        """Per input: nli_score = P("1") at step 1, and, in decode mode, the decoded string."""
        import torch  # deferred: torch (the report CLI reads metrics without it)

        out: list[dict[str, Any]] = []
        with torch.no_grad():
            for idx in _batches(len(texts), self.batch_size):
                enc = self._encode([texts[i] for i in idx])
                start = torch.full((len(idx), 1), self.decoder_start, dtype=torch.long,
                                   device=enc["input_ids"].device)
                logits = self.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                    decoder_input_ids=start).logits[:, 0, :]
                probs = torch.softmax(logits.float(), dim=-1)[:, self.one_id].double().cpu().tolist()
                rows: list[dict[str, Any]] = [{"nli_score": p} for p in probs]
                if self.mode == "decode":
                    gen = self.model.generate(input_ids=enc["input_ids"],
                                              attention_mask=enc["attention_mask"],
                                              max_new_tokens=10, do_sample=False, num_beams=1)
                    for row, g in zip(rows, gen):
                        row["decoded"] = self.tokenizer.decode(g, skip_special_tokens=True)
                out += rows
        for row in out:
            row["attributed"] = (decoded_is_entailment(row["decoded"]) if self.mode == "decode"
                                 else row["nli_score"] > self.threshold)
        return out


class NLIClassifierScorer:
    """An NLI sequence classifier (premise, hypothesis) -> P(entailment). A substitute."""

    backend = "nli"

    def __init__(self, model: Any, tokenizer: Any, model_name: str, threshold: float = 0.5,
                 batch_size: int = 8, device: str = "cpu"):
        self.model, self.tokenizer, self.model_name = model, tokenizer, model_name
        self.threshold, self.batch_size, self.device = threshold, batch_size, device
        self.entail_idx = entailment_label(model.config)

    def settings(self) -> dict[str, Any]:
        return {"autoais_backend": self.backend, "autoais_substitute": f"nli:{self.model_name}",
                "autoais_threshold": self.threshold, "autoais_entail_label": self.entail_idx}

    def score_pairs(self, premises: Sequence[str], hyps: Sequence[str]) -> list[dict[str, Any]]:
        import torch  # deferred: torch (the report CLI reads metrics without it)

        out: list[dict[str, Any]] = []
        with torch.no_grad():
            for idx in _batches(len(premises), self.batch_size):
                enc = self.tokenizer([premises[i] for i in idx], [hyps[i] for i in idx],
                                     return_tensors="pt", padding=True,
                                     truncation=True).to(self.device)
                probs = torch.softmax(self.model(**enc).logits.float(), dim=-1)
                out += [{"nli_score": float(p)} for p in probs[:, self.entail_idx].tolist()]
        for row in out:
            row["attributed"] = row["nli_score"] > self.threshold
        return out


def entailment_label(config: Any) -> int:
    """Index of the label whose name contains "entail" (and not "not"/"non")."""
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    if not any("entail" in v.lower() for v in id2label.values()):
        id2label = {int(v): str(k) for k, v in (getattr(config, "label2id", None) or {}).items()}
    hits = [i for i, name in id2label.items() if "entail" in name.lower()
            and not any(neg in name.lower() for neg in ("not", "non", "contra"))]
    if len(hits) != 1:
        raise ConfigError(f"Cannot find the entailment label in id2label={id2label}; an NLI "
                          f"classifier for AutoAIS needs exactly one label containing 'entail'.")
    return hits[0]


# ---- the evaluator -------------------------------------------------------------------
class AutoAIS:
    """Batched AutoAIS over AttributionItems with any backend above."""

    def __init__(self, scorer: Any, passage_format: str = "heading"):
        format_premise("", "", passage_format)  # validates the name
        self.scorer, self.passage_format = scorer, passage_format

    @property
    def is_substitute(self) -> bool:
        """Only the TRUE checkpoint, by its hub name, may report `autoais`."""
        return self.scorer.backend != "t5" or self.scorer.model_name != TRUE_MODEL

    @property
    def result_key(self) -> str:
        return "autoais_substitute" if self.is_substitute else "autoais"

    def settings(self) -> dict[str, Any]:
        s = {**self.scorer.settings(), "autoais_passage_format": self.passage_format,
             "autoais_denominator": "all questions (missing = not attributed)"}
        if self.scorer.backend == "t5":
            s["autoais_canonical"] = not self.is_substitute
            if self.is_substitute:
                s["autoais_substitute"] = f"t5:{self.scorer.model_name}"
        return s

    def evaluate(self, items: Sequence[AttributionItem]) -> AutoAISResult:
        todo = [i for i, it in enumerate(items) if it.complete]
        premises = [format_premise(items[i].title or "", items[i].passage or "",
                                   self.passage_format) for i in todo]
        qs = [items[i].question for i in todo]
        ans = [items[i].answer or "" for i in todo]
        if not todo:
            scored: list[dict[str, Any]] = []
        elif self.scorer.backend == "t5":
            scored = self.scorer.score_texts(self.scorer.inputs(premises, qs, ans))
        elif self.scorer.backend == "nli":
            scored = self.scorer.score_pairs(premises, [hypothesis(q, a) for q, a in zip(qs, ans)])
        else:
            scored = self.scorer.score_prompts([judge_prompt(p, q, a)
                                                for p, q, a in zip(premises, qs, ans)])
        per: list[dict[str, Any]] = [{"nli_score": None, "attributed": False,
                                      "missing": "answer" if not (it.answer or "").strip()
                                      else "passage"} for it in items]
        for i, row in zip(todo, scored):
            per[i] = {**row, "attributed": bool(row["attributed"]), "missing": None}
        value = float(np.mean([p["attributed"] for p in per])) if per else float("nan")
        return AutoAISResult(per_sample=per, metrics={self.result_key: value},
                             settings=self.settings())


def load_autoais(backend: str = "t5", model: str = TRUE_MODEL, mode: str = "prob",
                 threshold: float = 0.5, batch_size: int = 8, dtype: str = "bfloat16",
                 device: str | None = "auto", passage_format: str = "heading",
                 lm: Any = None, device_map: str | None = None,
                 max_input_tokens: int | None = None, judge_model: Any = None,
                 judge_threshold: float | None = None, **_: Any) -> AutoAIS:
    """Build an AutoAIS evaluator. The 11B TRUE checkpoint is loaded in bfloat16, as ALCE does
    (45.5 GB in fp32). llm-judge: the judge is `judge_model` when given (a composed model
    node: a loaded LM, a partial that loads it, or its config), else `lm`, the run's own LM;
    it decides with `judge_threshold` (calibrated for that judge) when given, else
    `threshold`. t5/nli ignore both."""
    if backend == "llm-judge":
        judge = lm if judge_model is None else _judge_lm(judge_model)
        if judge is None:
            raise ConfigError("AutoAIS backend llm-judge needs a loaded LM (e.g. the embedded "
                              "smollm2-135m) or a judge_model.")
        cut = threshold if judge_threshold is None else float(judge_threshold)
        return AutoAIS(LLMJudgeScorer(judge, cut, batch_size), passage_format)
    if backend not in ("t5", "nli"):
        raise ConfigError(f"AutoAIS backend={backend!r}; use t5, nli or llm-judge.")
    # deferred: transformers and ragrepro.models (torch): the report CLI reads metrics
    from transformers import AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    from ..models.lm import DTYPES, pick_device
    from ..models.loading import load_pretrained, resolve_source

    path, local = resolve_source(model, "seq2seq" if backend == "t5" else "causal")
    dev = pick_device(device)
    cls = AutoModelForSeq2SeqLM if backend == "t5" else AutoModelForSequenceClassification
    tok, net = load_pretrained(cls, path, model, local, dev, DTYPES[dtype], device_map)
    if backend == "t5":
        return AutoAIS(T5NLIScorer(net, tok, model, mode, threshold, batch_size,
                                   max_input_tokens, dev), passage_format)
    return AutoAIS(NLIClassifierScorer(net, tok, model, threshold, batch_size, dev),
                   passage_format)


def _judge_lm(judge_model: Any) -> Any:
    """The judge LM from what Hydra composed: an LM, a partial (loaded only now, after the
    run's own decoding), or a plain config mapping with `_target_` (the legacy cfg path)."""
    if isinstance(judge_model, Mapping):
        judge_model = instantiate(dict(judge_model))
    return judge_model() if callable(judge_model) and not hasattr(judge_model, "encode") \
        else judge_model
