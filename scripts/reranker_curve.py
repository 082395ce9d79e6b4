"""Learning curve of the mini predictive reranker (issue 17 item 6; Ram et al. §6.2).

    python -m scripts.reranker_curve --sizes 100,300,1000     (or `make reranker-curve`)

Training data are wiki-vital corpus leads, labelled exactly as the harness labels them
(`ralm.reranker.make_examples`: sampled boundaries, BM25 top-k with the text's own article
and the held-out LM titles excluded, SmolLM2's log-likelihood of the next stride per
document). The evaluated test articles are not in the corpus; the pool drops the forbidden
titles again so that this holds whatever the corpus config says.

The pool is a seeded permutation of the corpus leads, labelled in chunks of `--chunk-texts`
texts appended to one JSONL file under .cache/ragrepro/ralm-reranker-data/ (one line per
chunk), so a larger n reuses the smaller n's labels and a killed run resumes. The first
`--heldout-chunks` chunks are the held-out set (split by text, never trained on); training
uses the first n examples of the remaining chunks. In the same LM pass as the labels, the
last s' (= ralm.rerank_tokens) prefix tokens are scored too: the zero-shot reranker of Eq. 6
(argmin NLL of the prefix's last s' tokens given [doc; earlier prefix]) on the SAME examples.

Per n: a fresh cross-encoder trained with `ralm.predictive.train` for `--epochs` passes,
evaluated on the held-out set; one CSV row per n, written as soon as it is done (a rerun skips
finished rows). Reported with 95% bootstrap CIs over held-out examples (ragrepro.stats): top-1
agreement with the LM's best document (trained, untrained, zero-shot, BM25-first), the chance
rate 1/k, the held-out Eq. 9 loss, and the paired difference trained - zero-shot.
"""
from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("reranker_curve")

CURVE_VERSION = 1
FIELDS = ("n_train", "steps", "epochs", "train_s", "n_heldout", "k",
          "agree_trained", "agree_trained_lo", "agree_trained_hi",
          "loss_trained", "loss_trained_lo", "loss_trained_hi",
          "agree_untrained", "agree_untrained_lo", "agree_untrained_hi",
          "loss_untrained", "agree_zeroshot", "agree_zeroshot_lo", "agree_zeroshot_hi",
          "agree_first", "agree_first_lo", "agree_first_hi", "chance",
          "trained_minus_zeroshot", "trained_minus_zeroshot_lo", "trained_minus_zeroshot_hi",
          "trained_minus_zeroshot_p", "label_s_per_example")


# -- pure pieces ---------------------------------------------------------------------------
def train_pool(titles: Sequence[str], forbidden: Sequence[str], seed: int) -> list[int]:
    """Indices of corpus passages in a seeded random order, forbidden titles (the evaluated
    articles) removed: the order in which texts are labelled."""
    banned = set(forbidden)
    order = np.random.default_rng(seed).permutation(len(titles)).tolist()
    return [i for i in order if titles[i] not in banned]


def top1_agreement(scores: np.ndarray, loglik: np.ndarray) -> np.ndarray:
    """1 where the highest score picks the document the LM likes best (first on ties)."""
    return (np.argmax(scores, axis=1) == np.argmax(loglik, axis=1)).astype(float)


def first_agreement(loglik: np.ndarray) -> np.ndarray:
    """1 where the retriever's first document is the LM's best (BM25-first baseline)."""
    return (np.argmax(loglik, axis=1) == 0).astype(float)


def split_tap(logprobs: np.ndarray, lead: int) -> tuple[float, float]:
    """(sum of the first `lead` log-probs, sum of the rest): zero-shot score and label."""
    return float(np.sum(logprobs[:lead])), float(np.sum(logprobs[lead:]))


def steps_for(n: int, epochs: float, batch_size: int) -> int:
    return max(1, math.ceil(epochs * n / batch_size))


def done_sizes(csv_path: Path) -> set[int]:
    if not csv_path.exists():
        return set()
    with csv_path.open() as f:
        return {int(r["n_train"]) for r in csv.DictReader(f)}


# -- chunked, resumable label cache ----------------------------------------------------------
def read_chunks(path: Path) -> list[dict]:
    """Chunks in order; a torn last line (killed while writing) is dropped."""
    out: list[dict] = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break
        if rec["chunk"] != len(out):
            break
        out.append(rec)
    return out


def ensure_chunks(path: Path, n_chunks: int, label_chunk: Callable[[int], list[dict]]
                  ) -> list[dict]:
    """The first n_chunks chunks, labelling (and appending) only the missing ones."""
    chunks = read_chunks(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if chunks:  # rewrite without a torn tail before appending
        path.write_text("".join(json.dumps(c) + "\n" for c in chunks))
    while len(chunks) < n_chunks:
        t0 = time.perf_counter()
        rows = label_chunk(len(chunks))
        rec = {"chunk": len(chunks), "examples": rows, "seconds": time.perf_counter() - t0}
        with path.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        chunks.append(rec)
        log.info("labelled chunk %d: %d examples in %.0f s", rec["chunk"], len(rows),
                 rec["seconds"])
    return chunks


def chunks_for(n_train: int, heldout_chunks: int, chunks: list[dict]) -> bool:
    """True when the chunks after the held-out ones hold at least n_train examples."""
    return sum(len(c["examples"]) for c in chunks[heldout_chunks:]) >= n_train


def label_until(path: Path, n_train: int, heldout_chunks: int, max_chunks: int,
                label_chunk: Callable[[int], list[dict]]) -> list[dict]:
    chunks = ensure_chunks(path, heldout_chunks, label_chunk)
    while not chunks_for(n_train, heldout_chunks, chunks) and len(chunks) < max_chunks:
        chunks = ensure_chunks(path, len(chunks) + 1, label_chunk)
    return chunks


def seconds_per_example(chunks: Sequence[dict]) -> float:
    n = sum(len(c["examples"]) for c in chunks)
    return sum(c["seconds"] for c in chunks) / max(1, n)


# -- statistics ----------------------------------------------------------------------------
def ci(values: np.ndarray, what: str) -> tuple[float, float, float]:
    from ragrepro.stats import bootstrap_ci, mean_units

    iv = bootstrap_ci(mean_units(range(len(values)), values, unit="held-out examples"))
    return iv.estimate, iv.low, iv.high


def summarise(held: Sequence[dict], trained: np.ndarray, untrained: np.ndarray,
              loss_trained: np.ndarray, loss_untrained: np.ndarray) -> dict[str, float]:
    """Every reported number of one curve row from the held-out examples' scores."""
    from ragrepro.stats import mean_units, paired_test

    ll = np.array([e["loglik"] for e in held], dtype=float)
    zs = np.array([e["zeroshot"] for e in held], dtype=float)
    a_tr, a_un, a_zs = (top1_agreement(s, ll) for s in (trained, untrained, zs))
    row: dict[str, float] = {"n_heldout": len(held), "k": ll.shape[1], "chance": 1 / ll.shape[1],
                             "loss_untrained": float(np.mean(loss_untrained))}
    for name, v in (("agree_trained", a_tr), ("agree_untrained", a_un),
                    ("agree_zeroshot", a_zs), ("agree_first", first_agreement(ll)),
                    ("loss_trained", loss_trained)):
        row[name], row[name + "_lo"], row[name + "_hi"] = ci(v, name)
    keys = range(len(held))
    pt = paired_test(mean_units(keys, a_tr), mean_units(keys, a_zs))
    row.update(trained_minus_zeroshot=pt.estimate, trained_minus_zeroshot_lo=pt.low,
               trained_minus_zeroshot_hi=pt.high, trained_minus_zeroshot_p=pt.p_value)
    return row


def append_row(csv_path: Path, row: dict[str, Any]) -> None:
    new = not csv_path.exists()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()
                    if k in FIELDS})


# -- the curve -----------------------------------------------------------------------------
TrainEval = Callable[[list[dict], list[dict], int], dict[str, Any]]


def run_curve(sizes: Sequence[int], cache: Path, csv_path: Path, heldout_chunks: int,
              max_chunks: int, label_chunk: Callable[[int], list[dict]],
              train_eval: TrainEval, epochs: float, batch_size: int,
              after_row: Callable[[], None] = lambda: None) -> None:
    """For each n (ascending): label as far as needed, train, evaluate, append a row."""
    finished = done_sizes(csv_path)
    for n in sorted(sizes):
        if n in finished:
            log.info("n=%d already in %s", n, csv_path)
            continue
        chunks = label_until(cache, n, heldout_chunks, max_chunks, label_chunk)
        held = [e for c in chunks[:heldout_chunks] for e in c["examples"]]
        pool = [e for c in chunks[heldout_chunks:] for e in c["examples"]]
        if len(pool) < n:
            log.warning("only %d training examples (asked %d); stopping", len(pool), n)
            return
        steps = steps_for(n, epochs, batch_size)
        t0 = time.perf_counter()
        row = train_eval(pool[:n], held, steps)
        row.update(n_train=n, steps=steps, epochs=epochs, train_s=time.perf_counter() - t0,
                   label_s_per_example=seconds_per_example(chunks))
        append_row(csv_path, row)
        after_row()
        log.info("n=%d: agreement %.3f [%.3f, %.3f], zero-shot %.3f", n, row["agree_trained"],
                 row["agree_trained_lo"], row["agree_trained_hi"], row["agree_zeroshot"])


# -- the harness at the edges ----------------------------------------------------------------
def compose_cfg(overrides: Sequence[str]):
    from hydra import compose, initialize_config_dir

    from ragrepro.paths import CONF_DIR

    base = ["experiment=ralm/table1", "model=smollm2-135m", "wandb.mode=disabled",
            "reranker.n_examples=1000000"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=base + list(overrides))


class ZeroShotTap:
    """The label LM, with score_targets widened by `lead` tokens to the left: make_examples
    gets its stride labels unchanged (same rows, same batches), and the lead's log-probs (the
    last s' prefix tokens given [doc; earlier prefix]) are kept as the zero-shot score."""

    def __init__(self, lm: Any, lead: int):
        self._lm, self._lead, self.zeroshot = lm, lead, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lm, name)

    def score_targets(self, inputs, target_starts, batch_size: int = 8):
        wide = [max(1, s - self._lead) for s in target_starts]
        out = []
        for lp, s, w in zip(self._lm.score_targets(inputs, wide, batch_size=batch_size),
                            target_starts, wide):
            zs, _ = split_tap(lp, s - w)
            self.zeroshot.append(zs)
            out.append(lp[s - w:])
        return out


def training_inputs(cfg, lm: Any = None):
    """The TrainingInputs an evaluation run hands to ralm.reranker, built from the same
    pipeline node (so cache keys match the harness's); lm: the label LM, when loaded."""
    from hydra.utils import instantiate

    from ralm.reranker import TrainingInputs

    p = cfg.pipeline
    return TrainingInputs(instantiate(p.reranker, _convert_="all"), lm,
                          instantiate(p.label_model), instantiate(p.dataset),
                          instantiate(p.corpus), instantiate(p.retriever),
                          instantiate(p.settings, _convert_="all"), int(cfg.batch_size))


def chunk_labeller(cfg, lm: Any, texts: list, chunk_texts: int) -> Callable[[int], list[dict]]:
    from ralm import predictive as pr
    from ralm.reranker import make_examples

    k, lead = int(cfg.ralm.k), int(cfg.ralm.rerank_tokens)
    t = training_inputs(cfg, lm)

    def label(i: int) -> list[dict]:
        part = texts[i * chunk_texts:(i + 1) * chunk_texts]
        tap = ZeroShotTap(lm, lead)
        rows = pr.examples_to_json(make_examples(t, tap, part))
        for j, r in enumerate(rows):
            r["zeroshot"] = tap.zeroshot[j * k:(j + 1) * k]
        return rows

    return label


def corpus_texts(cfg) -> list:
    """Corpus leads as training texts (the LMDoc form of ralm.reranker.training_texts), in
    the pool's order, the forbidden (evaluated) titles removed."""
    from ragrepro.data.records import LMDoc
    from ragrepro.retrieval import build_corpus
    from ralm.documents import forbidden_titles

    passages = list(build_corpus(cfg.corpus).passages)
    banned = forbidden_titles(cfg.ralm.forbidden_titles, cfg.dataset.name)
    order = train_pool([p.title for p in passages], banned, int(cfg.reranker.seed))
    return [LMDoc(doc_id=passages[i].pid, title=passages[i].title,
                  text=f"{passages[i].title}\n\n{passages[i].text}\n\n") for i in order]


def model_scores(model: Any, examples: Sequence[dict], batch_size: int = 16) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for b in range(0, len(examples), batch_size):
            batch = examples[b:b + batch_size]
            out.append(model([e["prefix"] for e in batch], [e["docs"] for e in batch]).numpy())
    return np.concatenate(out)


def eq9_per_example(scores: np.ndarray, held: Sequence[dict]) -> np.ndarray:
    import torch

    from ralm import predictive as pr

    return np.array([float(pr.eq9_loss(torch.tensor(s[None], dtype=torch.float32),
                                       torch.tensor([e["loglik"]], dtype=torch.float32)))
                     for s, e in zip(scores, held)])


def trainer(cfg) -> TrainEval:
    from ralm import predictive as pr
    rc = training_inputs(cfg).rc
    enc = rc.encoder

    def train_eval(train_rows: list[dict], held: list[dict], steps: int) -> dict[str, Any]:
        model = pr.Reranker(enc["source"], str(rc.arch), enc.get("pooling", "mean"),
                            int(rc.max_length))
        before = model_scores(model, held)
        losses = pr.train(model, pr.examples_from_json(train_rows), steps, int(rc.batch_size),
                          float(rc.lr), float(rc.weight_decay), float(rc.warmup_ratio),
                          str(rc.loss), float(rc.temperature), int(rc.seed))
        pr.finite_or_raise(losses, "reranker training")
        after = model_scores(model, held)
        return summarise(held, after, before, eq9_per_example(after, held),
                         eq9_per_example(before, held))

    return train_eval


def cache_path(cfg, chunk_texts: int) -> Path:
    from omegaconf import OmegaConf

    from ragrepro.hashing import hash_obj
    from ragrepro.paths import cache_dir
    from ralm.reranker import data_key

    t = training_inputs(cfg)
    key = data_key(t, t.label_model.config or {})
    for k in ("train_texts", "n_examples"):
        key.pop(k, None)
    key.update(curve=CURVE_VERSION, chunk_texts=chunk_texts,
               zeroshot_tokens=int(cfg.ralm.rerank_tokens),
               pool="seeded permutation of corpus leads, forbidden titles removed")
    log.info("label cache key: %s", json.dumps(OmegaConf.to_container(OmegaConf.create(key))))
    return cache_dir() / "ralm-reranker-data" / f"curve-{hash_obj(key, 16)}.jsonl"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,600,1000")
    ap.add_argument("--heldout-chunks", type=int, default=4)
    ap.add_argument("--chunk-texts", type=int, default=25)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--out", default="results/ralm/reranker_curve.csv")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the .md from the .csv and the cached labels; train nothing")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. reranker.lr=2e-5")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from .reranker_curve_report import settings_line, write_markdown

    cfg = compose_cfg(args.overrides)
    csv_path, cache = Path(args.out), cache_path(cfg, args.chunk_texts)
    settings = settings_line(cfg, args.epochs)

    def report() -> None:
        held = [e for c in read_chunks(cache)[:args.heldout_chunks] for e in c["examples"]]
        write_markdown(csv_path, settings, held)

    if not args.report_only:
        texts = corpus_texts(cfg)
        lm = training_inputs(cfg).label_model.build()
        label = chunk_labeller(cfg, lm, texts, args.chunk_texts)
        run_curve([int(x) for x in args.sizes.split(",")], cache, csv_path,
                  args.heldout_chunks, len(texts) // args.chunk_texts, label, trainer(cfg),
                  args.epochs, int(cfg.reranker.batch_size), after_row=report)
    report()


if __name__ == "__main__":
    main()
