"""Learning curve of the mini predictive reranker (issue 17 item 6; Ram et al. §6.2).

    python -m scripts.reranker_curve --sizes 100,300,1000     (or `make reranker-curve`)
    python -m scripts.reranker_curve --from-evidence          (rebuild .csv and .md, no model)

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

Evidence: with each CSV row, one line goes to a gzip'd JSON-lines file beside the CSV,
`<csv stem>_heldout.jsonl.gz` (results/ralm/reranker_curve_heldout.jsonl.gz): a header
{"format": "ragrepro-reranker-curve", "version": 1}, then per n its n_train, steps, epochs,
train_s, label_s_per_example and, per held-out example, the LM's stride log-likelihoods, the
zero-shot, trained and untrained scores (k each) and the trained and untrained Eq. 9 losses:
every input of `summarise`. The CSV row itself is computed from that line, so
`--from-evidence` (reading only that file and the Hydra config, for the settings sentence;
pass the run's overrides) rewrites the .csv and .md byte for byte, without model or labels.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import io
import json
import logging
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_bytes, atomic_write_gzip

log = logging.getLogger("reranker_curve")

CURVE_VERSION = 1
EVIDENCE_FORMAT = "ragrepro-reranker-curve"
EVIDENCE_VERSION = 1
LINE_KEYS = ("n_train", "steps", "epochs", "train_s", "label_s_per_example", "heldout")
SCORE_KEYS = ("loglik", "zeroshot", "trained", "untrained")  # k floats per held-out example
LOSS_KEYS = ("loss_trained", "loss_untrained")  # one float per held-out example
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


def csv_cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()
            if k in FIELDS}


def append_row(csv_path: Path, row: dict[str, Any]) -> None:
    new = not csv_path.exists()
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(csv_cells(row))


def csv_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """The whole CSV as `append_row` writes it, row by row, into a new file."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS)
    w.writeheader()
    for row in rows:
        w.writerow(csv_cells(row))
    return buf.getvalue().encode("utf-8")


# -- per-example evidence: <csv stem>_heldout.jsonl.gz -------------------------------------
@dataclass(frozen=True)
class HeldoutScores:
    """A reranker's held-out output at one n: scores [examples, k] after and before training,
    and each example's Eq. 9 loss [examples] after and before."""
    trained: np.ndarray
    untrained: np.ndarray
    loss_trained: np.ndarray
    loss_untrained: np.ndarray


def evidence_path(csv_path: Path) -> Path:
    return csv_path.with_name(f"{csv_path.stem}_heldout.jsonl.gz")


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


def evidence_line(n_train: int, steps: int, epochs: float, train_s: float,
                  label_s_per_example: float, held: Sequence[dict],
                  scores: HeldoutScores, machine: str = "") -> dict[str, Any]:
    """One n's evidence: its settings and timings, and per held-out example every input of
    `summarise` (Python floats: JSON keeps them exactly)."""
    heldout = [{"loglik": _floats(e["loglik"]), "zeroshot": _floats(e["zeroshot"]),
                "trained": _floats(tr), "untrained": _floats(un),
                "loss_trained": float(lt), "loss_untrained": float(lu)}
               for e, tr, un, lt, lu in zip(held, scores.trained, scores.untrained,
                                            scores.loss_trained, scores.loss_untrained,
                                            strict=True)]
    line = {"n_train": n_train, "steps": steps, "epochs": epochs, "train_s": float(train_s),
            "label_s_per_example": float(label_s_per_example), "heldout": heldout}
    return {**line, "machine": machine} if machine else line


def row_from_evidence(line: dict[str, Any]) -> dict[str, Any]:
    """The CSV row of one evidence line: `summarise` of its stored arrays."""
    held = line["heldout"]

    def arr(key: str) -> np.ndarray:
        return np.array([e[key] for e in held], dtype=float)

    row: dict[str, Any] = summarise(held, arr("trained"), arr("untrained"),
                                    arr("loss_trained"), arr("loss_untrained"))
    row.update({k: line[k] for k in LINE_KEYS if k != "heldout"})
    return row


def heldout_labels(line: dict[str, Any]) -> list[dict[str, Any]]:
    """The held-out examples as the report reads them (`margin_note`: their loglik only)."""
    return [{"loglik": e["loglik"]} for e in line["heldout"]]


def _regenerate(path: Path) -> str:
    csv_path = path.with_name(path.name.removesuffix("_heldout.jsonl.gz") + ".csv")
    return (f"Restore it from git, or regenerate it: `make reranker-curve` writes it (move "
            f"{csv_path} aside first: a size already in the CSV is skipped and gets no "
            f"evidence line).")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _line_problem(line: Any) -> str | None:
    """What makes one evidence line unusable, or None."""
    if not isinstance(line, dict) or any(k not in line for k in LINE_KEYS):
        return f"a curve line needs the keys {', '.join(LINE_KEYS)}"
    if not all(type(line[k]) is int and line[k] > 0 for k in ("n_train", "steps")) or \
            not all(_is_number(line[k]) for k in ("epochs", "train_s", "label_s_per_example")):
        return "n_train and steps must be positive integers, the other fields numbers"
    held = line["heldout"]
    if not isinstance(held, list) or not held:
        return "no held-out examples"
    keys = SCORE_KEYS + LOSS_KEYS
    if not all(isinstance(e, dict) and all(k in e for k in keys) for e in held):
        return f"each held-out example needs the keys {', '.join(keys)}"
    first = held[0]["loglik"]
    k = len(first) if isinstance(first, list) else 0
    for i, e in enumerate(held):
        if k < 2 or not all(isinstance(e[s], list) and len(e[s]) == k
                            and all(_is_number(v) for v in e[s]) for s in SCORE_KEYS) \
                or not all(_is_number(e[s]) for s in LOSS_KEYS):
            return (f"held-out example {i}: {', '.join(SCORE_KEYS)} must be lists of the same "
                    f"k >= 2 finite numbers and {', '.join(LOSS_KEYS)} finite numbers")
    return None


def read_evidence(path: Path) -> list[dict[str, Any]]:
    """The curve lines of an evidence file (header checked); a missing or damaged file (not
    gzip, wrong header, a torn or malformed line, an n twice) is refused by name."""
    if not path.is_file():
        raise DataError(f"{path}: no reranker-curve evidence file. {_regenerate(path)}")
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise DataError(f"{path} is damaged: not a whole gzip file ({type(e).__name__}: "
                        f"{e}). {_regenerate(path)}") from e
    records = []
    for no, raw in enumerate(text.splitlines(), 1):
        try:
            records.append(json.loads(raw))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}: line {no} is torn or not JSON ({e}). "
                            f"{_regenerate(path)}") from e
    if not records or records[0] != {"format": EVIDENCE_FORMAT, "version": EVIDENCE_VERSION}:
        raise DataError(f"{path}: the first line is not the header {{\"format\": "
                        f"\"{EVIDENCE_FORMAT}\", \"version\": {EVIDENCE_VERSION}}} this code "
                        f"reads. {_regenerate(path)}")
    lines, seen = records[1:], set()
    for no, line in enumerate(lines, 2):
        problem = _line_problem(line) or (f"n_train={line['n_train']} a second time"
                                          if line["n_train"] in seen else None)
        if problem:
            raise DataError(f"{path}: line {no}: {problem}. {_regenerate(path)}")
        seen.add(line["n_train"])
    return lines


def write_evidence(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    """Header plus lines, keys sorted, gzip'd with time 0: the same lines give the same bytes."""
    header = {"format": EVIDENCE_FORMAT, "version": EVIDENCE_VERSION}
    atomic_write_gzip(path, "".join(json.dumps(x, sort_keys=True) + "\n"
                                    for x in [header, *lines]))


def record_evidence(path: Path, lines: list[dict[str, Any]], line: dict[str, Any]
                    ) -> list[dict[str, Any]]:
    """Append one n's line (replacing a line of the same n: one the CSV lost, now rerun)."""
    lines = [x for x in lines if x["n_train"] != line["n_train"]] + [line]
    write_evidence(path, lines)
    return lines


def warn_unrecorded(finished: set[int], lines: Sequence[dict[str, Any]], path: Path) -> None:
    missing = sorted(finished - {x["n_train"] for x in lines})
    if missing:
        log.warning("n=%s in the CSV have no line in %s (a CSV from before the evidence "
                    "file): --from-evidence cannot rebuild those rows; move the CSV aside and "
                    "rerun to record them", ",".join(map(str, missing)), path)


def rebuild_from_evidence(csv_path: Path, settings: str,
                          lines: Sequence[dict[str, Any]] | None = None) -> None:
    """Rewrite csv_path (rows in the evidence's order, as the run appended them) and its .md
    from the evidence file beside it alone; lines: that file, when already read."""
    from .reranker_curve_report import write_markdown

    path = evidence_path(csv_path)
    lines = read_evidence(path) if lines is None else lines
    if not lines:
        raise DataError(f"{path} holds no curve line. {_regenerate(path)}")
    with contextlib.suppress(OSError, KeyError, ValueError, csv.Error):
        gone = sorted(done_sizes(csv_path) - {x["n_train"] for x in lines})
        if gone:
            log.warning("%s: dropping n=%s, which %s does not record", csv_path,
                        ",".join(map(str, gone)), path)
    atomic_write_bytes(csv_path, csv_bytes([row_from_evidence(x) for x in lines]))
    write_markdown(csv_path, settings, heldout_labels(lines[-1]))
    log.info("rebuilt %s and %s from %s (%d rows)", csv_path, csv_path.with_suffix(".md"),
             path, len(lines))


def evidence_epochs(lines: Sequence[dict[str, Any]], default: float) -> float:
    """The epochs the settings sentence names: the evidence's, when every line agrees."""
    found = {x["epochs"] for x in lines}
    if len(found) == 1:
        return float(found.pop())
    log.warning("the evidence's lines used epochs %s; the settings sentence says %g",
                sorted(found), default)
    return default


# -- the curve -----------------------------------------------------------------------------
TrainEval = Callable[[list[dict], list[dict], int], HeldoutScores]


def run_curve(sizes: Sequence[int], cache: Path, csv_path: Path, heldout_chunks: int,
              max_chunks: int, label_chunk: Callable[[int], list[dict]],
              train_eval: TrainEval, epochs: float, batch_size: int,
              after_row: Callable[[], None] = lambda: None, machine: str = "") -> None:
    """For each n (ascending): label as far as needed, train, evaluate, append its evidence
    line and the CSV row computed from it. machine: where it ran, kept in each line (the
    timings and float noise belong to it; a rebuild elsewhere still names it)."""
    finished = done_sizes(csv_path)
    evidence = evidence_path(csv_path)
    lines = read_evidence(evidence) if evidence.exists() else []
    warn_unrecorded(finished, lines, evidence)
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
        scores = train_eval(pool[:n], held, steps)
        line = evidence_line(n, steps, epochs, time.perf_counter() - t0,
                             seconds_per_example(chunks), held, scores, machine)
        lines = record_evidence(evidence, lines, line)
        row = row_from_evidence(line)
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

    def train_eval(train_rows: list[dict], held: list[dict], steps: int) -> HeldoutScores:
        model = pr.Reranker(enc["source"], str(rc.arch), enc.get("pooling", "mean"),
                            int(rc.max_length))
        before = model_scores(model, held)
        losses = pr.train(model, pr.examples_from_json(train_rows), steps, int(rc.batch_size),
                          float(rc.lr), float(rc.weight_decay), float(rc.warmup_ratio),
                          str(rc.loss), float(rc.temperature), int(rc.seed))
        pr.finite_or_raise(losses, "reranker training")
        after = model_scores(model, held)
        return HeldoutScores(after, before, eq9_per_example(after, held),
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,600,1000")
    ap.add_argument("--heldout-chunks", type=int, default=4)
    ap.add_argument("--chunk-texts", type=int, default=25)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--out", default="results/ralm/reranker_curve.csv",
                    help="the CSV; the .md and the evidence (<stem>_heldout.jsonl.gz) beside it")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--report-only", action="store_true",
                      help="rewrite the .md from the .csv and the cached labels; train nothing")
    mode.add_argument("--from-evidence", action="store_true",
                      help="rewrite the .csv and .md from the evidence file alone (no model, "
                           "no label cache); pass the run's Hydra overrides for the settings")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. reranker.lr=2e-5")
    return ap.parse_args(argv)


def machine_line() -> str:
    """This process's CPU and torch threads, as the Markdown's settings sentence names them."""
    from ragrepro.metadata import machine

    info = machine()
    return f"{info.get('cpu', '?')}, {info.get('torch_threads', '?')} torch thread(s)"


def from_evidence(csv_path: Path, overrides: Sequence[str], epochs: float) -> None:
    """--from-evidence: the evidence is read (and refused if damaged) before Hydra composes
    the config that the settings sentence names."""
    from .reranker_curve_report import settings_line

    lines = read_evidence(evidence_path(csv_path))
    settings = settings_line(compose_cfg(overrides), evidence_epochs(lines, epochs),
                             str(lines[-1].get("machine", "not recorded")))
    rebuild_from_evidence(csv_path, settings, lines)


def curve(args: argparse.Namespace) -> None:
    from .reranker_curve_report import settings_line, write_markdown

    cfg = compose_cfg(args.overrides)
    csv_path, cache = Path(args.out), cache_path(cfg, args.chunk_texts)
    machine = machine_line()
    settings = settings_line(cfg, args.epochs, machine)

    def report() -> None:
        held = [e for c in read_chunks(cache)[:args.heldout_chunks] for e in c["examples"]]
        write_markdown(csv_path, settings, held)

    if not args.report_only:
        texts = corpus_texts(cfg)
        lm = training_inputs(cfg).label_model.build()
        label = chunk_labeller(cfg, lm, texts, args.chunk_texts)
        run_curve([int(x) for x in args.sizes.split(",")], cache, csv_path,
                  args.heldout_chunks, len(texts) // args.chunk_texts, label, trainer(cfg),
                  args.epochs, int(cfg.reranker.batch_size), after_row=report,
                  machine=machine)
    report()


def main(argv: list[str] | None = None) -> None:
    """A user error (a missing or damaged evidence file, a bad override) is one `error: ...`
    line on stderr and exit code 2, as for the ragrepro command."""
    from ragrepro.cli import user_errors_exit_2

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.from_evidence:
        user_errors_exit_2(lambda: from_evidence(Path(args.out), args.overrides, args.epochs))
    else:
        user_errors_exit_2(lambda: curve(args))


if __name__ == "__main__":
    main()
