"""FilCo silver labelling split across launcher jobs (experiment=filco/silver_shards).

Part `shard=i/n` labels a contiguous block of the examples; `shard=merge` joins the parts into
the very cache file one process writes (filco/resources.py `Labeller.silvers`: the same path,
the same bytes), so the FilCo run that follows finds its labels and labels nothing:

    ragrepro -m experiment=filco/silver_shards filco.measure=cxmi shard=0/4,1/4,2/4,3/4 \\
        hydra/launcher=slurm
    ragrepro experiment=filco/silver_shards filco.measure=cxmi shard=merge
    ragrepro experiment=filco/table4 filco.measure=cxmi ...   # reads the merged labels

The unit is a chunk of `SILVER_CHUNK` examples (filco/silver.py), the group one process scores
together: parts are cut between chunks, so every CXMI batch is the one a single process runs
and the labels are equal, not merely close. A part appends one line per finished chunk to its
checkpoint `<labels>.part-<i>-of-<n>.jsonl` beside the labels file (flushed and fsynced: a
kill loses at most the chunk being scored; a torn line is skipped and its chunk labelled
again). Chunks are found in every part file of the label set whatever its `n`, so a rerun (of
the same part, or with another `n`) labels only the chunks no part holds, and a deleted part
file is relabelled alone.
"""
from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragrepro.cache import cached_json
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError, DataError
from ragrepro.io import append_line
from ragrepro.models.lm import LM
from ragrepro.pipeline import Result
from ragrepro.retrieval.sharding import parse_shard, part_files
from ragrepro.tracking import Run

from .data import QASet, load_examples
from .pipeline import passage_retriever
from .resources import Labeller, Setup, cache_file, examples_key
from .settings import FilcoSettings
from .silver import SILVER_CHUNK, Example, silver_contexts

log = logging.getLogger(__name__)
_PART = re.compile(r"\.part-(\d+)-of-(\d+)\.jsonl$")
Rows = list[dict[str, Any]]


def labels_file(labeller: Labeller, exs: Sequence[Example]) -> Path:
    """The cache file `Labeller.silvers(exs)` reads and writes (the same content key)."""
    s, scorer = labeller.setup, labeller.scorer()
    key = {"examples": examples_key(exs), "spec": s.spec.as_dict(), "splitter": s.fc.splitter,
           "scorer": None if scorer is None else [scorer.lm.name, scorer.lm.revision,
                                                   scorer.prompt, scorer.max_input_tokens]}
    return cache_file("silver", key)


def chunk_labeller(labeller: Labeller) -> Callable[[Sequence[Example]], Rows]:
    """Labels one chunk as `Labeller.silvers` labels it (rows as its cache file holds them)."""
    s, scorer = labeller.setup, labeller.scorer()

    def label(block: Sequence[Example]) -> Rows:
        return [x.__dict__ for x in silver_contexts(block, s.spec, s.split, scorer,
                                                    chunk=SILVER_CHUNK)]

    return label


def n_chunks(n_examples: int, chunk: int = SILVER_CHUNK) -> int:
    return -(-n_examples // chunk)


def part_path(labels: Path, part: int, parts: int) -> Path:
    return labels.with_name(f"{labels.stem}.part-{part}-of-{parts}.jsonl")


def part_paths(labels: Path) -> list[Path]:
    """Every part file of this label set (any n), in name order."""
    return sorted(p for p in labels.parent.glob(f"{labels.stem}.part-*-of-*.jsonl")
                  if _PART.search(p.name))


def read_part(path: Path) -> Rows:
    """The lines of a part file that parse. A torn line (a job killed mid-write) is skipped
    with a warning, and its chunk labelled again; nothing is rewritten, since the part's job
    may still be appending."""
    if not path.exists():
        return []
    out, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            bad += line.strip() != ""
    if bad:
        log.warning("%s: skipped %d torn line(s) left by a killed job; their chunks are "
                    "labelled again", path, bad)
    return out


def end_line(path: Path) -> None:
    """Close a torn last line, so that the next append starts a line of its own."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        if torn:
            append_line(path, "")


def done_chunks(labels: Path, n_examples: int, chunk: int = SILVER_CHUNK) -> dict[int, Rows]:
    """chunk index -> its silver rows, from every part file of the label set."""
    out: dict[int, Rows] = {}
    for path in part_paths(labels):
        for line in read_part(path):
            c, rows = int(line["chunk"]), line["rows"]
            want = len(range(c * chunk, min(n_examples, (c + 1) * chunk)))
            if len(rows) != want:
                raise DataError(f"{path}: chunk {c} holds {len(rows)} labels, not {want}: the "
                                f"file belongs to other examples or chunk size; delete it.")
            out.setdefault(c, rows)
    return out


def label_part(exs: Sequence[Example], label: Callable[[Sequence[Example]], Rows],
               labels: Path, part: int, parts: int, chunk: int = SILVER_CHUNK) -> dict[str, int]:
    """Label the chunks of part `part` of `parts` that no part file holds yet, appending one
    line per chunk to this part's file; `label(examples) -> rows` labels one chunk."""
    total = n_chunks(len(exs), chunk)
    mine = part_files(total, part, parts)
    if labels.exists():
        log.info("Silver labels %s are complete already: part %d/%d has nothing to do",
                 labels, part, parts)
        return {"chunks": len(mine), "labelled": 0, "examples": 0}
    done = done_chunks(labels, len(exs), chunk)
    todo = [c for c in mine if c not in done]
    log.info("Part %d/%d: chunks %s of %d (%d examples each), %d to label, %d already done",
             part, parts, f"{mine.start}-{mine.stop - 1}" if len(mine) else "none", total,
             chunk, len(todo), len(mine) - len(todo))
    out = part_path(labels, part, parts)
    end_line(out)
    n = 0
    for c in todo:
        block = exs[c * chunk:(c + 1) * chunk]
        append_line(out, json.dumps({"chunk": c, "rows": label(block)}, ensure_ascii=False))
        n += len(block)
    return {"chunks": len(mine), "labelled": len(todo), "examples": n}


def merge(labels: Path, n_examples: int, chunk: int = SILVER_CHUNK,
          rerun: str = "shard=i/n") -> Rows:
    """The labels of all parts in example order, written to `labels` as one process writes it
    (ragrepro.cache.cached_json); a ConfigError names the missing chunks and the fix."""
    total = n_chunks(n_examples, chunk)
    if labels.exists():
        log.info("Silver labels %s exist already; nothing to merge", labels)
    else:
        done = done_chunks(labels, n_examples, chunk)
        missing = [c for c in range(total) if c not in done]
        if missing:
            raise ConfigError(
                f"Cannot merge the silver labels: chunks {_ranges(missing)} of {total} "
                f"({chunk} examples each) are in no part file next to {labels}. Rerun the part "
                f"jobs with the same settings ({rerun}; finished runs are skipped, so add "
                f"overwrite=true for a part whose run finished before its file was lost).")
        rows = [r for c in range(total) for r in done[c]]
        cached_json(labels, lambda: rows)
        log.info("Merged %d part file(s) into %s (%d examples)", len(part_paths(labels)),
                 labels, n_examples)
    return cached_json(labels, list)  # read back (the file exists): JSON types


def _ranges(xs: Sequence[int]) -> str:
    out, start = [], xs[0]
    for a, b in zip(xs, [*xs[1:], None]):
        if b != a + 1:
            out.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)


def run(run: Run, *, base_model: Deferred, train: QASet, test: QASet, task: str,
        settings: FilcoSettings, corpus: Deferred, retriever: Deferred, cxmi_scorer: Deferred,
        seed: int, shard: str, labels: str, lm: None = None,
        uncapped: Mapping[str, Any] | None = None) -> Result:
    """Part `shard` (i/n) of the silver labels of the `labels` split (train | test) of the
    FilCo run with these settings, or `shard=merge`. `base_model` (the FilCo run's `lm`) is
    built only when CXMI scores with it; `lm` is None (the FilCo pipeline node's eager model,
    switched off) and `uncapped` (the rehearsal's budgets) unused: labelling generates
    nothing."""
    if labels not in ("train", "test"):
        raise ConfigError(f"labels={labels!r}: label the FilCo run's `train` or `test` "
                          f"examples.")
    fc = settings
    probe = Setup.of(fc, task, None, seed)  # type: ignore[arg-type]  (no model yet)
    needs_base = probe.spec.name == "cxmi" and not cxmi_scorer
    base: LM | None = base_model.build() if needs_base else None
    setup = Setup.of(fc, task, base, seed)  # type: ignore[arg-type]
    labeller = Labeller(setup, cxmi_scorer)
    with run.timed("data"):
        qa = train if labels == "train" else test
        exs = load_examples(qa, passage_retriever(fc, corpus, retriever), fc.k,
                            setup.task.name, fc.passages)
    path = labels_file(labeller, exs)
    settings_row: Mapping[str, Any] = {
        "shard": str(shard), "labels": labels, "measure": setup.spec.name,
        "measure_mode": setup.spec.mode, "n_examples": len(exs), "chunk": SILVER_CHUNK,
        "labels_file": str(Path(*path.parts[-3:]))}  # relative: filco/silver/<hash>.json
    if str(shard) == "merge":
        rows = merge(path, len(exs), rerun="shard=0/N,...,N-1/N")
        return Result(metrics={"examples": len(rows),
                               "silver_empty": sum(not r["text"] for r in rows) / max(1, len(rows))},
                      settings=dict(settings_row))
    part, parts = parse_shard(str(shard))
    with run.timed("silver"):
        counts = label_part(exs, chunk_labeller(labeller), path, part, parts)
    return Result(metrics=counts, settings=dict(settings_row))
