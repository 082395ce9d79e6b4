"""Build (or reuse) the predictive reranker for an evaluation run.

Training data come from a TRAIN split, never from the evaluated text:
- `train_source: corpus` (mini scale): leads of retrieval-corpus articles (wiki-vital's
  held-out LM articles are not in the corpus), `train_texts` of them drawn with the seed; a
  training text never retrieves itself (its own title is excluded) and the run's forbidden
  titles stay excluded.
- `train_source: dataset` (paper scale): the dataset's `train_split` (WikiText-103 train).
Labels come from `label_model` (the paper labels with GPT-2 S for every GPT-2 size).
Data and weights are cached under hashes of their settings, so a second run trains nothing.
"""
from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm import tqdm

from ragrepro.data.records import LMDoc
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError
from ragrepro.hashing import hash_obj
from ragrepro.io import atomic_write_json, locked, read_json
from ragrepro.paths import cache_dir

from . import candidates
from . import official_format as off
from . import predictive as pr
from .documents import doc_encoder, forbidden_titles, hit_dict
from .settings import RalmSettings, RerankerSettings
from .sources import build_retriever
from .windows import query_span, query_text

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

log = logging.getLogger(__name__)

DATA_KEYS = ("train_source", "train_split", "train_texts", "examples_per_text", "min_prefix",
             "n_examples", "seed")
TRAIN_KEYS = ("arch", "max_length", "steps", "batch_size", "lr", "weight_decay",
              "warmup_ratio", "loss", "temperature", "heldout_fraction", "seed")
# torch threads while training, whatever the process runs at: the trained weights depend on
# the thread count (a weight gradient sums over the batch's tokens in per-thread parts; one
# thread against two differ in the last bits after a few steps, measured), so a fixed count
# gives one model on a machine of any size. 2: what the committed predictive rows used (made
# at torch's default on 2 cores). In the model's cache key, so no model trained at another
# count is reused.
TRAIN_THREADS = 2


@dataclass(frozen=True)
class TrainingInputs:
    """What training the reranker needs from the run: its settings, the evaluated LM, the
    labelling LM (the `label_model` node, else the evaluated model's; built only when it is
    another model and the training data are not cached), the dataset, corpus and retriever
    configs."""

    rc: RerankerSettings | None
    lm: LM
    label_model: Deferred
    dataset: Deferred
    corpus: Deferred
    retriever: Deferred
    ralm: RalmSettings
    batch_size: int

    @property
    def label_name(self) -> str:
        return self.label_model.name or self.lm.name


def training_texts(t: TrainingInputs) -> list[LMDoc]:
    rc = t.rc
    assert rc is not None
    rng = np.random.default_rng(int(rc.seed))
    if rc.train_source == "corpus":
        passages = list(t.corpus.build().passages)
        take = min(int(rc.train_texts), len(passages))
        idx = sorted(rng.choice(len(passages), size=take, replace=False).tolist())
        return [LMDoc(doc_id=passages[i].pid, title=passages[i].title,
                      text=f"{passages[i].title}\n\n{passages[i].text}\n\n") for i in idx]
    docs = list(t.dataset.build(split=rc.train_split, limit=None))
    if len(docs) > int(rc.train_texts):
        idx = sorted(rng.choice(len(docs), size=int(rc.train_texts), replace=False).tolist())
        docs = [docs[i] for i in idx]
    return docs


def data_key(t: TrainingInputs, label_model: dict) -> dict[str, Any]:
    """The training data's cache key (unchanged since version 1: cached data stay valid)."""
    r, rc = t.ralm, t.rc
    assert rc is not None
    return {"label_model": {k: label_model.get(k) for k in ("name", "source", "revision",
                                                            "add_bos", "dtype")},
            "corpus": t.corpus.config, "retriever": t.retriever.config,
            "dataset": t.dataset.config if rc.train_source == "dataset" else None,
            "forbidden": r.forbidden_titles,
            "max_length": int(r.max_length), "stride": int(r.stride),
            "query_len": int(r.query_len), "doc_max_tokens": int(r.doc_max_tokens),
            "query_clean_spaces": bool(r.query_clean_spaces),
            "k": int(r.k), "prefix_tokens": prefix_tokens(t),
            **{k: getattr(rc, k) for k in DATA_KEYS}, "version": 1}


def prefix_tokens(t: TrainingInputs) -> int:
    v = t.rc.prefix_tokens if t.rc is not None else None
    return int(v) if v is not None else int(t.ralm.query_len)


def pending_boundaries(t: TrainingInputs, lm: LM,
                       texts: list[LMDoc]) -> list[tuple[LMDoc, list[int], int]]:
    """(text, tokens, boundary) of every sampled retrieval boundary, capped at n_examples."""
    rc = t.rc
    assert rc is not None
    rng = np.random.default_rng(int(rc.seed))
    pending = []
    for doc in texts:
        toks = lm.encode(doc.text)
        for b in pr.sample_boundaries(len(toks), int(t.ralm.stride), int(rc.examples_per_text),
                                      rng, int(rc.min_prefix)):
            pending.append((doc, toks, b))
    return pending[: int(rc.n_examples)]


def label(lm: LM, rows: list, batch_size: int) -> list:
    lps = []
    for i in tqdm(range(0, len(rows), batch_size * 4), desc="label reranker data", unit="batch"):
        chunk = rows[i:i + batch_size * 4]
        lps += lm.score_targets([c[0] for c in chunk], [c[1] for c in chunk],
                                batch_size=batch_size)
    return lps


def make_examples(t: TrainingInputs, lm: LM, texts: list[LMDoc]) -> list[pr.Example]:
    """Prefix, top-k documents and the LM's log-likelihood of the next stride per document."""
    r = t.ralm
    k, s, L = int(r.k), int(r.stride), int(r.max_length)
    retriever = build_retriever(t.retriever, t.corpus)
    banned = forbidden_titles(r.forbidden_titles, t.dataset.name)
    pending = pending_boundaries(t, lm, texts)
    queries = [query_text(lm.decode(tk[slice(*query_span(b, int(r.query_len)))]),
                          bool(r.query_clean_spaces)) for _, tk, b in pending]
    # one extra hit, because the text's own article is dropped afterwards
    hits = candidates.search(retriever, queries, k + 1, banned)
    encode_doc = doc_encoder(lm, int(r.doc_max_tokens), bool(lm.add_bos))
    rows, kept = [], []
    for (doc, toks, b), hs in zip(pending, hits):
        ds = [hit_dict(h) for h in hs if h.title != doc.title][:k]
        if len(ds) < k:
            continue
        rows.extend(pr.label_rows(toks, b, s, L, [encode_doc(d) for d in ds]))
        kept.append((doc, toks, b, ds))
    lps = label(lm, rows, int(t.batch_size))
    out = []
    P = prefix_tokens(t)
    for j, (doc, toks, b, ds) in enumerate(kept):
        ll = tuple(float(np.sum(lp)) for lp in lps[j * k:(j + 1) * k])
        a, _ = query_span(b, P)
        out.append(pr.Example(prefix=lm.decode(toks[a:b]),
                              docs=tuple(off.doc_text(d) for d in ds),
                              titles=tuple(d["title"] for d in ds), loglik=ll))
    log.info("Reranker training data: %d examples (k=%d) from %d texts", len(out), k, len(texts))
    return out


def model_key(t: TrainingInputs) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the trained model's key, the training data's key): the cache folders' hashes."""
    rc = t.rc
    assert rc is not None
    dkey = data_key(t, t.label_model.config or {})
    enc = rc.encoder
    mkey = {"data": dkey, "encoder": {k: enc.get(k) for k in ("name", "source", "revision",
                                                              "pooling")},
            **{k: getattr(rc, k) for k in TRAIN_KEYS}, "train_threads": TRAIN_THREADS}
    return mkey, dkey


def training_examples(t: TrainingInputs, dkey: dict[str, Any]) -> tuple[list[pr.Example], str]:
    """The labelled examples, from the cache or made now (loads the labelling LM if needed)."""
    data_path = cache_dir() / "ralm-reranker-data" / f"{hash_obj(dkey, 16)}.json"
    if data_path.exists():
        return pr.examples_from_json(read_json(data_path)), str(data_path)
    label_lm = t.label_model.build() if t.label_name != t.lm.name else t.lm
    examples = make_examples(t, label_lm, training_texts(t))
    data_path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(data_path, pr.examples_to_json(examples))
    return examples, str(data_path)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch at n threads inside the block, the process's count again after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_reranker(t: TrainingInputs, mkey: dict[str, Any], dkey: dict[str, Any]):
    """Train on the examples, report held-out loss before and after, save under the key."""
    rc = t.rc
    assert rc is not None
    examples, data_file = training_examples(t, dkey)
    n_held = round(float(rc.heldout_fraction) * len(examples))
    held, train_ex = examples[:n_held], examples[n_held:]
    model = pr.Reranker(rc.encoder["source"], str(rc.arch), rc.encoder.get("pooling", "mean"),
                        int(rc.max_length))
    before = pr.evaluate(model, held, str(rc.loss), float(rc.temperature))
    with torch_threads(TRAIN_THREADS):
        losses = pr.train(model, train_ex, int(rc.steps), int(rc.batch_size), float(rc.lr),
                          float(rc.weight_decay), float(rc.warmup_ratio), str(rc.loss),
                          float(rc.temperature), int(rc.seed))
    pr.finite_or_raise(losses, "reranker training")
    after = pr.evaluate(model, held, str(rc.loss), float(rc.temperature))
    report = {"n_train": len(train_ex), "n_heldout": len(held), "heldout_before": before,
              "heldout_after": after, "first_loss": losses[:5], "last_loss": losses[-5:],
              "data_file": data_file}
    log.info("Reranker trained: held-out %s -> %s", before, after)
    pr.save(model, pr.model_dir(mkey), mkey, report)
    return model, report


def get_reranker(t: TrainingInputs):
    """(predict(prefix_text, docs) -> scores, info). Trains once per training config."""
    rc = t.rc
    if rc is None:
        raise ConfigError("ralm/rerank=predictive needs a `reranker` config (e.g. "
                          "reranker=minilm-l6).")
    mkey, dkey = model_key(t)
    folder = pr.model_dir(mkey)
    info = {"model_dir": str(folder), "model_key": hash_obj(mkey, 16),
            "data_key": hash_obj(dkey, 16), "prefix_tokens": prefix_tokens(t),
            "label_model": t.label_name, "encoder": rc.encoder.get("name")}
    # A second process (a parallel sweep, a joblib or Slurm cell beside this one) waits for
    # the first one's training and reuses it rather than training the same model again.
    with locked(folder, waiting=f"Waiting for another process training the reranker {folder}"):
        if (folder / "model.safetensors").exists():
            log.info("Reusing the trained reranker %s", folder)
            model = pr.load(folder, rc.encoder["source"], str(rc.arch),
                            rc.encoder.get("pooling", "mean"), int(rc.max_length))
            info["report"] = read_json(folder / "config.json").get("report")
        else:
            model, info["report"] = train_reranker(t, mkey, dkey)

    def predict(prefix: str, docs: list[dict]) -> list[float]:
        with torch.no_grad():
            return model([prefix], [[off.doc_text(d) for d in docs]])[0].tolist()

    return predict, info
