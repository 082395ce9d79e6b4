"""The predictive reranker of §6.2, which the official code lacks (its issue #2).

Training data: sample a prefix from a training text, retrieve its top-k documents with the
retrieval query, and label each document with the frozen LM's log-likelihood of the next
stride given [doc; prefix]. A reranker f(prefix, doc) (cross- or bi-encoder) is trained with
the loss of Eq. 9,

    L = -log sum_i p_rank(d_i | x) * p_LM(y | [d_i; x]),   p_rank = softmax_i f(x, d_i)  (Eq. 7)

computed in log space with log-sum-exp (raw stride probabilities underflow). `loss: kl` is an
alternative (not the paper's): KL(softmax(LM log-likelihoods / T) || p_rank).
The trained weights are saved as safetensors under a hash of the whole training config.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from ragrepro.errors import ConfigError, DataError
from ragrepro.hashing import hash_obj
from ragrepro.io import private_tmp, publish_dir
from ragrepro.models.loading import resolve_source
from ragrepro.paths import cache_dir

log = logging.getLogger(__name__)

LOSSES = ("eq9", "kl")
ARCHS = ("cross", "bi")


# -- losses (pure) ----------------------------------------------------------------------
def eq9_loss(scores: torch.Tensor, loglik: torch.Tensor) -> torch.Tensor:
    """Paper Eq. 9, batch mean. scores, loglik: [B, k] (loglik = summed log p of the stride)."""
    return -torch.logsumexp(torch.log_softmax(scores, dim=-1) + loglik, dim=-1).mean()


def kl_loss(scores: torch.Tensor, loglik: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """KL(softmax(loglik / T) || softmax(scores)), batch mean (a distillation alternative)."""
    target = torch.log_softmax(loglik / temperature, dim=-1)
    pred = torch.log_softmax(scores, dim=-1)
    return (target.exp() * (target - pred)).sum(-1).mean()


def loss_fn(name: str, temperature: float = 1.0):
    if name == "eq9":
        return eq9_loss
    if name == "kl":
        return lambda s, ll: kl_loss(s, ll, temperature)
    raise ConfigError(f"reranker.loss={name!r}; use one of {LOSSES}.")


# -- model ------------------------------------------------------------------------------
class Reranker(torch.nn.Module):
    """f(prefix, doc) -> score. cross: one encoder pass over the pair and a linear head;
    bi: a learned scale times the cosine of separately pooled prefix and doc vectors."""

    def __init__(self, encoder_source: str, arch: str = "cross", pooling: str = "mean",
                 max_length: int = 256):
        super().__init__()
        # transformers takes seconds to import: deferred to the first reranker built, so
        # the pipeline modules (and the cells that never rerank) import without it
        from transformers import AutoModel, AutoTokenizer

        if arch not in ARCHS:
            raise ConfigError(f"reranker.arch={arch!r}; use one of {ARCHS}.")
        if pooling not in ("mean", "cls"):
            raise ConfigError(f"reranker pooling {pooling!r}; use mean or cls.")
        path, _local = resolve_source(encoder_source, kind="encoder")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.encoder = AutoModel.from_pretrained(path)
        self.arch, self.pooling, self.max_length = arch, pooling, max_length
        hidden = self.encoder.config.hidden_size
        self.head = torch.nn.Linear(hidden, 1)
        self.scale = torch.nn.Parameter(torch.tensor(20.0))

    def _pool(self, enc: dict) -> torch.Tensor:
        h = self.encoder(**enc).last_hidden_state
        if self.pooling == "cls":
            return h[:, 0]
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        return (h * m).sum(1) / m.sum(1).clamp(min=1.0)

    def forward(self, prefixes: Sequence[str], docs: Sequence[Sequence[str]]) -> torch.Tensor:
        """[B, k] scores; every example has the same number k of documents."""
        k = len(docs[0])
        if any(len(d) != k for d in docs):
            raise DataError("every reranker example needs the same number of documents")
        dev = self.head.weight.device
        if self.arch == "cross":
            a = [p for p in prefixes for _ in range(k)]
            b = [d for ds in docs for d in ds]
            enc = self.tokenizer(a, b, padding=True, truncation="only_second",
                                 max_length=self.max_length, return_tensors="pt").to(dev)
            return self.head(self._pool(enc)).view(len(prefixes), k)
        q = self.tokenizer(list(prefixes), padding=True, truncation=True,
                           max_length=self.max_length, return_tensors="pt").to(dev)
        d = self.tokenizer([x for ds in docs for x in ds], padding=True, truncation=True,
                           max_length=self.max_length, return_tensors="pt").to(dev)
        qv = torch.nn.functional.normalize(self._pool(q), dim=-1)
        dv = torch.nn.functional.normalize(self._pool(d), dim=-1).view(len(prefixes), k, -1)
        return self.scale * torch.einsum("bh,bkh->bk", qv, dv)


# -- training data ----------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    prefix: str
    docs: tuple[str, ...]
    titles: tuple[str, ...]
    loglik: tuple[float, ...]


def sample_boundaries(n_tokens: int, stride: int, n: int, rng: np.random.Generator,
                      min_prefix: int) -> list[int]:
    """Up to n distinct retrieval boundaries b with a prefix of >= min_prefix tokens and a
    full next stride (b + stride <= n_tokens), in increasing order."""
    lo, hi = max(min_prefix, 1), n_tokens - stride
    if hi < lo:
        return []
    choices = np.arange(lo, hi + 1)
    take = min(n, len(choices))
    return sorted(int(x) for x in rng.choice(choices, size=take, replace=False))


def label_rows(tokens: Sequence[int], b: int, stride: int, max_length: int,
               docs: Sequence[Sequence[int]]) -> list[tuple[list[int], int]]:
    """[doc; prefix trimmed from the left to fit max_length; next stride], target start."""
    rows = []
    for d in docs:
        room = max_length - len(d) - stride
        if room < 1:
            raise ConfigError("document longer than the window: lower ralm.doc_max_tokens.")
        ctx = list(tokens[max(0, b - room):b])
        rows.append((list(d) + ctx + list(tokens[b:b + stride]), len(d) + len(ctx)))
    return rows


def examples_to_json(ex: Sequence[Example]) -> list[dict]:
    return [{"prefix": e.prefix, "docs": list(e.docs), "titles": list(e.titles),
             "loglik": list(e.loglik)} for e in ex]


def examples_from_json(rows: Sequence[dict]) -> list[Example]:
    return [Example(r["prefix"], tuple(r["docs"]), tuple(r["titles"]), tuple(r["loglik"]))
            for r in rows]


# -- training ---------------------------------------------------------------------------
def lr_at(step: int, total: int, warmup: int, lr: float) -> float:
    """Linear warmup to lr, then linear decay to 0 (the transformers default schedule)."""
    if warmup and step < warmup:
        return lr * (step + 1) / warmup
    return lr * max(0.0, (total - step) / max(1, total - warmup))


def train(model: Reranker, examples: Sequence[Example], steps: int, batch_size: int, lr: float,
          weight_decay: float, warmup_ratio: float, loss: str, temperature: float,
          seed: int, grad_clip: float = 1.0) -> list[float]:
    """AdamW over random batches (an epoch-wise shuffle); returns the loss per step."""
    if not examples:
        raise DataError("no training examples for the predictive reranker")
    fn = loss_fn(loss, temperature)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    warmup = round(warmup_ratio * steps)
    order: list[int] = []
    losses = []
    model.train()
    for step in tqdm(range(steps), desc="train reranker", unit="step"):
        if len(order) < batch_size:
            order += list(rng.permutation(len(examples)))
        idx, order = order[:batch_size], order[batch_size:]
        batch = [examples[i] for i in idx]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, warmup, lr)
        scores = model([e.prefix for e in batch], [list(e.docs) for e in batch])
        ll = torch.tensor([list(e.loglik) for e in batch], dtype=torch.float32,
                          device=scores.device)
        value = fn(scores, ll)
        opt.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        losses.append(value.detach().item())
    model.eval()
    return losses


@torch.no_grad()
def evaluate(model: Reranker, examples: Sequence[Example], loss: str, temperature: float,
             batch_size: int = 16) -> dict[str, float]:
    """Mean loss, top-1 agreement with the LM's best document, and the expected stride NLL
    of the chosen document minus that of the first one (negative = reranking helps)."""
    if not examples:
        return {}
    fn = loss_fn(loss, temperature)
    total, agree, gain = 0.0, 0, 0.0
    for b in range(0, len(examples), batch_size):
        batch = examples[b:b + batch_size]
        scores = model([e.prefix for e in batch], [list(e.docs) for e in batch])
        ll = torch.tensor([list(e.loglik) for e in batch], dtype=torch.float32)
        total += float(fn(scores, ll)) * len(batch)
        pick = scores.argmax(-1)
        agree += int((pick == ll.argmax(-1)).sum())
        gain += float((ll[:, 0] - ll[torch.arange(len(batch)), pick]).sum())
    n = len(examples)
    return {"loss": total / n, "top1_agreement": agree / n, "nll_chosen_minus_first": gain / n}


# -- persistence ------------------------------------------------------------------------
def model_dir(key: dict[str, Any]) -> Path:
    return cache_dir() / "ralm-reranker" / hash_obj(key, 16)


def save(model: Reranker, folder: Path, key: dict[str, Any], report: dict[str, Any]) -> None:
    tmp = private_tmp(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"))
    (tmp / "config.json").write_text(json.dumps({"key": key, "report": report}, indent=1,
                                                default=str))
    publish_dir(tmp, folder)


def load(folder: Path, encoder_source: str, arch: str, pooling: str, max_length: int) -> Reranker:
    model = Reranker(encoder_source, arch, pooling, max_length)
    model.load_state_dict(load_file(str(folder / "model.safetensors")))
    model.eval()
    return model


def finite_or_raise(values: Sequence[float], what: str) -> None:
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{what} diverged (non-finite loss): lower reranker.lr.")
