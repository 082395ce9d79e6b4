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

import logging
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ragrepro.data.records import LMDoc
from ragrepro.errors import ConfigError
from ragrepro.hashing import hash_obj
from ragrepro.io import atomic_write_json, read_json
from ragrepro.named_configs import group_config, load_model, model_config
from ragrepro.paths import cache_dir

from . import official_format as off
from . import predictive as pr
from .documents import doc_encoder, forbidden_titles, hit_dict

log = logging.getLogger(__name__)


def encoder_cfg(name: str) -> dict[str, Any]:
    return dict(OmegaConf.to_container(group_config("encoder", name), resolve=True))


def training_texts(cfg: DictConfig, rc: DictConfig) -> list[LMDoc]:
    rng = np.random.default_rng(int(rc.seed))
    if rc.train_source == "corpus":
        from ragrepro.retrieval import build_corpus

        passages = list(build_corpus(cfg.corpus).passages)
        take = min(int(rc.train_texts), len(passages))
        idx = sorted(rng.choice(len(passages), size=take, replace=False).tolist())
        return [LMDoc(doc_id=passages[i].pid, title=passages[i].title,
                      text=f"{passages[i].title}\n\n{passages[i].text}\n\n") for i in idx]
    if rc.train_source == "dataset":
        from hydra.utils import instantiate

        docs = list(instantiate(cfg.dataset, _convert_="all", split=rc.train_split, limit=None))
        if len(docs) > int(rc.train_texts):
            idx = sorted(rng.choice(len(docs), size=int(rc.train_texts), replace=False).tolist())
            docs = [docs[i] for i in idx]
        return docs
    raise ConfigError(f"reranker.train_source={rc.train_source!r}; use corpus or dataset.")


def data_key(cfg: DictConfig, rc: DictConfig, label_model: dict) -> dict[str, Any]:
    r = cfg.ralm
    return {"label_model": {k: label_model.get(k) for k in ("name", "source", "revision",
                                                            "add_bos", "dtype")},
            "corpus": OmegaConf.to_container(cfg.corpus, resolve=True),
            "retriever": OmegaConf.to_container(cfg.retriever, resolve=True),
            "dataset": OmegaConf.to_container(cfg.dataset, resolve=True)
            if rc.train_source == "dataset" else None,
            "forbidden": r.get("forbidden_titles"),
            "max_length": int(r.max_length), "stride": int(r.stride),
            "query_len": int(r.query_len), "doc_max_tokens": int(r.doc_max_tokens),
            "query_clean_spaces": bool(r.get("query_clean_spaces", True)),
            "k": int(r.k), "prefix_tokens": prefix_tokens(cfg),
            **{k: rc.get(k) for k in ("train_source", "train_split", "train_texts",
                                      "examples_per_text", "min_prefix", "n_examples", "seed")},
            "version": 1}


def prefix_tokens(cfg: DictConfig) -> int:
    v = cfg.reranker.get("prefix_tokens")
    return int(v) if v is not None else int(cfg.ralm.query_len)


def make_examples(cfg: DictConfig, lm: Any, texts: list[LMDoc]) -> list[pr.Example]:
    """Prefix, top-k documents and the LM's log-likelihood of the next stride per document."""
    from tqdm import tqdm

    from ragrepro.retrieval import retriever_from_config

    from .windows import query_span, query_text

    rc, r = cfg.reranker, cfg.ralm
    k, s, L = int(r.k), int(r.stride), int(r.max_length)
    rng = np.random.default_rng(int(rc.seed))
    retriever = retriever_from_config(cfg)
    banned = forbidden_titles(cfg)
    pending = []  # (text, tokens, boundary)
    for doc in texts:
        toks = lm.encode(doc.text)
        for b in pr.sample_boundaries(len(toks), s, int(rc.examples_per_text), rng,
                                      int(rc.min_prefix)):
            pending.append((doc, toks, b))
    pending = pending[: int(rc.n_examples)]
    clean = bool(r.get("query_clean_spaces", True))
    queries = [query_text(lm.decode(t[slice(*query_span(b, int(r.query_len)))]), clean)
               for _, t, b in pending]
    # one extra hit, because the text's own article is dropped afterwards
    hits = retriever.search(queries, k + 1, exclude_titles=banned)
    encode_doc = doc_encoder(lm, int(r.doc_max_tokens), bool(lm.add_bos))
    rows, kept = [], []
    for (doc, toks, b), hs in zip(pending, hits):
        ds = [hit_dict(h) for h in hs if h.title != doc.title][:k]
        if len(ds) < k:
            continue
        rows.extend(pr.label_rows(toks, b, s, L, [encode_doc(d) for d in ds]))
        kept.append((doc, toks, b, ds))
    lps = []
    bs = int(cfg.batch_size)
    for i in tqdm(range(0, len(rows), bs * 4), desc="label reranker data", unit="batch"):
        chunk = rows[i:i + bs * 4]
        lps += lm.score_targets([c[0] for c in chunk], [c[1] for c in chunk], batch_size=bs)
    out = []
    P = prefix_tokens(cfg)
    for j, (doc, toks, b, ds) in enumerate(kept):
        ll = tuple(float(np.sum(lp)) for lp in lps[j * k:(j + 1) * k])
        a, _ = query_span(b, P)
        out.append(pr.Example(prefix=lm.decode(toks[a:b]),
                              docs=tuple(off.doc_text(d) for d in ds),
                              titles=tuple(d["title"] for d in ds), loglik=ll))
    log.info("Reranker training data: %d examples (k=%d) from %d texts", len(out), k, len(texts))
    return out


def get_reranker(cfg: DictConfig, lm: Any, _source: Any = None):
    """(predict(prefix_text, docs) -> scores, info). Trains once per training config."""
    rc = cfg.get("reranker")
    if rc is None:
        raise ConfigError("ralm.rerank=predictive needs a `reranker` config (e.g. "
                          "reranker=minilm-l6).")
    label_name = rc.get("label_model") or cfg.model.name
    if label_name == cfg.model.name:
        label_lm = lm
        label_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    else:
        label_lm = None
        try:
            label_cfg = model_config(str(label_name), str(cfg.dtype), str(cfg.device))
        except ConfigError as e:
            raise ConfigError(f"reranker.label_model={label_name!r}: {e}") from None
    enc = encoder_cfg(str(rc.encoder))
    dkey = data_key(cfg, rc, label_cfg)
    train_keys = ("arch", "max_length", "steps", "batch_size", "lr", "weight_decay",
                  "warmup_ratio", "loss", "temperature", "heldout_fraction", "seed")
    mkey = {"data": dkey, "encoder": {k: enc.get(k) for k in ("name", "source", "revision",
                                                              "pooling")},
            **{k: rc.get(k) for k in train_keys}}
    folder = pr.model_dir(mkey)
    info = {"model_dir": str(folder), "model_key": hash_obj(mkey, 16),
            "data_key": hash_obj(dkey, 16), "prefix_tokens": prefix_tokens(cfg),
            "label_model": label_name, "encoder": enc.get("name")}
    if (folder / "model.safetensors").exists():
        log.info("Reusing the trained reranker %s", folder)
        model = pr.load(folder, enc["source"], str(rc.arch), enc.get("pooling", "mean"),
                        int(rc.max_length))
        info["report"] = read_json(folder / "config.json").get("report")
    else:
        data_path = cache_dir() / "ralm-reranker-data" / f"{hash_obj(dkey, 16)}.json"
        if data_path.exists():
            examples = pr.examples_from_json(read_json(data_path))
        else:
            if label_lm is None:
                label_lm, _ = load_model(str(label_name), str(cfg.dtype), str(cfg.device))
            examples = make_examples(cfg, label_lm, training_texts(cfg, rc))
            data_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(data_path, pr.examples_to_json(examples))
        n_held = round(float(rc.heldout_fraction) * len(examples))
        held, train_ex = examples[:n_held], examples[n_held:]
        model = pr.Reranker(enc["source"], str(rc.arch), enc.get("pooling", "mean"),
                            int(rc.max_length))
        before = pr.evaluate(model, held, str(rc.loss), float(rc.temperature))
        losses = pr.train(model, train_ex, int(rc.steps), int(rc.batch_size), float(rc.lr),
                          float(rc.weight_decay), float(rc.warmup_ratio), str(rc.loss),
                          float(rc.temperature), int(rc.seed))
        pr.finite_or_raise(losses, "reranker training")
        after = pr.evaluate(model, held, str(rc.loss), float(rc.temperature))
        report = {"n_train": len(train_ex), "n_heldout": len(held), "heldout_before": before,
                  "heldout_after": after, "first_loss": losses[:5], "last_loss": losses[-5:],
                  "data_file": str(data_path)}
        log.info("Reranker trained: held-out %s -> %s", before, after)
        pr.save(model, folder, mkey, report)
        info["report"] = report

    import torch

    def predict(prefix: str, docs: list[dict]) -> list[float]:
        with torch.no_grad():
            return model([prefix], [[off.doc_text(d) for d in docs]])[0].tolist()

    return predict, info
