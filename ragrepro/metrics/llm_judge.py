"""The offline `llm-judge` substitute for AutoAIS: a causal LM answers yes/no.

score = P(" yes") / (P(" yes") + P(" no")) after `JUDGE_PROMPT`; attributed iff > threshold.
Never reported as `autoais` (docs/autoais.md). How far to trust each judge is measured on
the hand-checked set (ragrepro.metrics.judge_set, `make judge-eval`), and that accuracy is
recorded next to every number the judge produces (`autoais_judge_accuracy`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models.lm import LM

JUDGE_PROMPT = ("Passage: {premise}\n\nQuestion: {question}\nProposed answer: {answer}\n\n"
                "Does the passage support the proposed answer to the question? "
                "Answer yes or no.\nAnswer:")
JUDGE_YES, JUDGE_NO = " yes", " no"
# Accuracy of each llm-judge on the hand-checked set (docs/autoais.md), as `make judge-eval`
# measured it (results/judge/judge_eval.csv; tests/metrics/test_judge_set.py keeps the two
# equal): (judge model, dtype, threshold) -> label. Threshold 0.5 is the plain rule; the other
# threshold of a judge is the one chosen on all items, labelled with its 5-fold
# cross-validated accuracy. Printed next to every autoais_substitute number (setting
# `autoais_judge_accuracy`).
JUDGE_ACCURACY: dict[tuple[str, str, float], str] = {
    ("smollm2-135m", "float32", 0.5):
        "50.0% [40.8, 59.2] on 120 hand-checked items",
    ("smollm2-135m", "float32", 0.0998):
        "53.3% [44.2, 62.5] on 120 hand-checked items (threshold chosen by 5-fold CV)",
    ("gemma3-270m", "float32", 0.5):
        "50.0% [40.8, 59.2] on 120 hand-checked items",
    ("gemma3-270m", "float32", 0.8412):
        "51.7% [42.5, 60.8] on 120 hand-checked items (threshold chosen by 5-fold CV)",
    ("qwen2.5-coder-1.5b", "bfloat16", 0.5):
        "63.3% [54.2, 71.7] on 120 hand-checked items",
    ("qwen2.5-coder-1.5b", "bfloat16", 0.8706):
        "94.2% [90.0, 97.5] on 120 hand-checked items (threshold chosen by 5-fold CV)",
    ("qwen2.5-coder-0.5b", "float32", 0.5):
        "69.2% [60.8, 77.5] on 120 hand-checked items",
    ("qwen2.5-coder-0.5b", "float32", 0.469):
        "65.8% [57.5, 74.2] on 120 hand-checked items (threshold chosen by 5-fold CV)",
    ("qwen2.5-coder-1.5b", "float32", 0.5):
        "63.3% [54.2, 71.7] on 120 hand-checked items",
    ("qwen2.5-coder-1.5b", "float32", 0.8766):
        "94.2% [90.0, 97.5] on 120 hand-checked items (threshold chosen by 5-fold CV)",
}


def judge_prompt(premise: str, question: str, answer: str) -> str:
    return JUDGE_PROMPT.format(premise=premise, question=question, answer=answer)


class LLMJudgeScorer:
    """Offline substitute: a causal LM answers yes/no; score = P(yes | yes or no) from the
    log-probabilities of " yes" and " no" after `JUDGE_PROMPT`. Not AutoAIS."""

    backend = "llm-judge"

    def __init__(self, lm: LM, threshold: float = 0.5, batch_size: int = 8):
        self.lm, self.threshold, self.batch_size = lm, threshold, batch_size

    def settings(self) -> dict[str, Any]:
        return {"autoais_backend": self.backend, "autoais_substitute": f"llm-judge:{self.lm.name}",
                "autoais_threshold": self.threshold, "autoais_judge_prompt": JUDGE_PROMPT,
                "autoais_judge_accuracy": judge_accuracy(self.lm, self.threshold)}

    def score_prompts(self, prompts: Sequence[str]) -> list[dict[str, Any]]:
        """log P(" yes") and log P(" no") after each prompt. When both answers are one token
        appended to the prompt's own tokens, one forward pass of the prompt gives both (the
        same numbers as scoring the two continuations, at half the cost); otherwise each
        continuation is scored on its own."""
        rows, starts, fast = [], [], {}
        for i, p in enumerate(prompts):
            prefix = self.lm.encode(p)
            fulls = [self.lm.encode(p + cand) for cand in (JUDGE_YES, JUDGE_NO)]
            if hasattr(self.lm, "model") and all(
                    len(f) == len(prefix) + 1 and f[:-1] == prefix for f in fulls):
                fast[i] = next_token_logprobs(self.lm, prefix, [f[-1] for f in fulls])
                continue
            for full in fulls:
                # score the continuation tokens (tokenisation of the boundary may merge)
                rows.append(full)
                starts.append(max(1, _common_prefix(prefix, full)))
        lps = iter(self.lm.score_targets(rows, starts, batch_size=self.batch_size) if rows else [])
        out = []
        for i in range(len(prompts)):
            yes, no = fast[i] if i in fast else (float(next(lps).sum()), float(next(lps).sum()))
            score = 1.0 / (1.0 + math.exp(no - yes))
            out.append({"nli_score": score, "logp_yes": yes, "logp_no": no,
                        "attributed": score > self.threshold})
        return out


def judge_accuracy(lm: LM, threshold: float) -> str:
    """The judge's measured accuracy on the hand-checked set, or why there is none."""
    model = getattr(lm, "model", None)
    dtype = str(getattr(model, "dtype", "unknown")).removeprefix("torch.")
    return JUDGE_ACCURACY.get((lm.name, dtype, float(threshold)),
                              f"not measured ({lm.name}, {dtype}, threshold {threshold}; "
                              f"see `make judge-eval`)")


def next_token_logprobs(lm: LM, prefix: Sequence[int], token_ids: Sequence[int]) -> list[float]:
    """log P(token | prefix) for each token, from one forward pass that computes the
    vocabulary logits at the last position only (the model's own head, soft-capping
    included)."""
    import torch  # deferred: torch (the report CLI reads metrics without it)

    with torch.no_grad():
        ids = torch.tensor([list(prefix)], dtype=torch.long, device=lm.device)
        logits = lm.model(input_ids=ids, logits_to_keep=1).logits[0, -1]
        logp = torch.log_softmax(logits.float(), dim=-1).double().cpu()
    return [float(logp[t]) for t in token_ids]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
