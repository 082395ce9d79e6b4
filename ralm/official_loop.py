"""The official In-Context RALM evaluation loop (eval_lm.py), written out literally as a
reference implementation (reference §3.2-3.5).

It is deliberately slow and plain: batch 1 (one window per forward pass; `num_docs` rows when
reranking), a full forward pass with vocabulary logits at every position, `outputs.loss`
scaled by the target length, the retrieved document written over the first positions of the
window, and zero-shot/oracle ranking by the summed cross-entropy of one `[num_docs, L]` pass.
The production engine (ralm.engine) must give the same NLL sum; the equivalence test and the
throughput benchmark (benchmarks/ralm_throughput.py) both compare against this module.

Quirks kept on purpose: token 0 is never scored; the retrieval path computes its loss in the
model's dtype (no float32 cast); per-token losses of document-less windows are recomputed from
float32 logits as the official code does (it saves them), which is part of its cost.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

RANKING_STRATEGIES = ("first", "logprob", "oracle")


@dataclass
class OfficialResult:
    nll_sum: float
    window_nlls: list[float] = field(default_factory=list)
    chosen: list[int | None] = field(default_factory=list)  # doc index per window (None: none)
    n_scored: int = 0


def official_doc_ids(tokenizer: Any, doc: dict[str, Any], retrieval_max_length: int) -> list[int]:
    """`title + "\\n" + text` (or text), `tokenizer.encode` with its default special tokens,
    truncated (reference §3.4)."""
    doc_str = f"{doc['title']}\n{doc['text']}" if doc.get("title") else doc["text"]
    return list(tokenizer.encode(doc_str, max_length=retrieval_max_length, truncation=True))


@torch.no_grad()
def official_eval(model: Any, tokenizer: Any, ids: torch.Tensor, max_length: int, stride: int,
                  retrieval: Sequence[dict[str, Any]] | None = None,
                  ranking_strategy: str = "first", num_docs_to_rank: int = 1,
                  num_tokens_to_rank: int = 16, retrieval_max_length: int = 256,
                  encode_doc: Callable[[dict[str, Any]], list[int]] | None = None,
                  progress: Callable[[], None] | None = None) -> OfficialResult:
    """NLL sum over one token stream `ids` (shape [1, N]) as eval_lm.py computes it.

    `retrieval[idx]["retrieved_docs"]` are the candidate documents of window idx (the official
    retrieval file); None evaluates without retrieval. `encode_doc` overrides the document
    encoding (default: official_doc_ids with the tokenizer)."""
    if ranking_strategy not in RANKING_STRATEGIES:
        raise ValueError(f"ranking_strategy={ranking_strategy!r}; use one of "
                         f"{RANKING_STRATEGIES} (random is unseeded in the official code)")
    if encode_doc is None:
        def encode_doc(d: dict[str, Any]) -> list[int]:
            return official_doc_ids(tokenizer, d, retrieval_max_length)
    device = next(model.parameters()).device
    dataset_len = ids.size(1)
    res = OfficialResult(0.0)
    nlls = []
    prev_end_loc, idx = 0, 0
    for begin_loc in range(0, dataset_len, stride):
        end_loc = min(begin_loc + max_length, dataset_len)
        trg_len = end_loc - prev_end_loc  # may differ from stride on the last loop
        input_ids = ids[:, begin_loc:end_loc].to(device)
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        docs = retrieval[idx]["retrieved_docs"] if retrieval is not None else None
        if idx > 0 and docs:
            nll, chosen = _with_docs(model, input_ids, target_ids, trg_len, docs,
                                     ranking_strategy, num_docs_to_rank, num_tokens_to_rank,
                                     encode_doc)
        else:
            outputs = model(input_ids, labels=target_ids)
            if trg_len < max_length:
                nll = outputs.loss * trg_len
                logits, labels = outputs.logits[..., -trg_len - 1:-1, :], target_ids[..., -trg_len:]
            else:
                nll = outputs.loss * (max_length - 1)
                logits, labels = outputs.logits[..., :-1, :], target_ids[..., 1:]
            # the official code recomputes per-token losses from float32 logits and saves them
            torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                              labels.reshape(-1), reduction="none")
            chosen = None
        nlls.append(nll.float())
        res.window_nlls.append(float(nll))
        res.chosen.append(chosen)
        res.n_scored += trg_len if trg_len < max_length else max_length - 1
        prev_end_loc = end_loc
        idx += 1  # noqa: SIM113 -- the official loop, literally
        if progress is not None:
            progress()
        if end_loc == dataset_len:
            break
    res.nll_sum = float(torch.stack(nlls).sum())
    return res


def _with_docs(model: Any, input_ids: torch.Tensor, target_ids: torch.Tensor, trg_len: int,
               docs: Sequence[dict[str, Any]], strategy: str, num_docs_to_rank: int,
               num_tokens_to_rank: int, encode_doc: Callable[[dict[str, Any]], list[int]]
               ) -> tuple[torch.Tensor, int]:
    """evaluate_logprob_with_retrieved_docs (reference §3.4-3.5)."""
    num_docs = 1 if strategy == "first" else min(num_docs_to_rank, len(docs))
    input_ids = input_ids.repeat(num_docs, 1)
    target_ids = target_ids.repeat(num_docs, 1)
    for doc_id in range(num_docs):
        encoded = encode_doc(docs[doc_id])
        input_ids[doc_id, :len(encoded)] = torch.tensor(encoded, dtype=torch.long)
    lm_logits = model(input_ids).logits
    if num_docs > 1:
        labels = input_ids.clone()
        if strategy == "oracle":
            labels[:, :-trg_len] = -100
        else:  # logprob: the num_tokens_to_rank tokens before the target
            labels[:, :-trg_len - num_tokens_to_rank] = -100
            labels[:, -trg_len:] = -100
        labels = labels[:, 1:]
        ce = torch.nn.CrossEntropyLoss(reduction="none")
        ranking_loss = ce(lm_logits[..., :-1, :].reshape(-1, lm_logits.size(-1)),
                          labels.reshape(-1)).view(num_docs, -1)
        chosen = int(torch.argmin(ranking_loss.sum(-1)))
    else:
        chosen = 0
    logits = lm_logits[chosen, -trg_len - 1:-1]
    targets = target_ids[chosen, -trg_len:]
    return torch.nn.functional.cross_entropy(logits, targets, reduction="sum"), chosen
