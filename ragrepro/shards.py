"""One evaluation cell split into shards (`shard=i/n`) and merged into one run.

A cell's `shard=i/n` runs part i of n of its evaluation units (perplexity: blocks of windows;
QA, RICHES, FilCo: batches of questions) as its own job, through any launcher:

    ragrepro -m experiment=ralm/table1 model=smollm2-135m shard=0/4,1/4,2/4,3/4 \
        hydra/launcher=slurm

Every part has the run id of the unsharded cell (`shard` is left out of the id unless the
pipeline takes it as an argument, as experiment=core/encode_shards does:
ragrepro.tracking.run_id_of), so the parts, the merged run and an unsharded run of the same
cell are one run. A part writes into the run's working folder, under
`results/<experiment>/tmp_<run_id>/shards/<i>of<n>/`: its samples (the resume checkpoint, as
in an unsharded run) and, when it finished, `part.json` (its partial metrics, row settings,
metadata and config). The part that finds all n `part.json` present merges them under the
run's writer lock (ragrepro.runlock); `shard=merge` or `ragrepro shards merge <experiment>`
does it too. The merged run is committed as an unsharded run is (CSV row, then the rename
to `<run_id>/`), without the parts.

Units are cut into contiguous ranges of whole blocks (`block_range`), a block being what the
unsharded run computes in one batch, so a part computes exactly the batches the unsharded
run computes and its numbers are the same floats. The method decides its units and merges
its metrics (a `Merger`, attached to its pipeline function with `@shardable`); the core
never imports a method.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from hydra.utils import get_object

from . import runlock
from .codeversion import CODE_FILE, check_resume, mixed
from .errors import ConfigError, DataError
from .io import atomic_write_json, atomic_write_text
from .paths import results_dir
from .run_files import read_records, read_run_json
from .tracking import Run, scrub_secrets

log = logging.getLogger(__name__)

SHARDS_DIR = "shards"
PART_FILE = "part.json"
SAMPLES = "samples.jsonl"
MERGE = "merge"
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_FOLDER = re.compile(r"^(\d+)of(\d+)$")
# written by each part for itself; the merged run gets its own
_NOT_COPIED = frozenset({PART_FILE, CODE_FILE, SAMPLES})


# -- the spec ---------------------------------------------------------------------------------
def parse_shard(spec: str) -> tuple[int, int]:
    """'2/8' -> (2, 8): part 2 of 8, counted from 0."""
    match = _SPEC.match(str(spec))
    if match is None:
        raise ConfigError(f"shard={spec!r}: write it as i/n (part i of n, i from 0 to n-1), "
                          f"e.g. shard=0/4, or shard=merge to join the parts.")
    i, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"shard={spec!r}: need 0 <= i < n, e.g. shard=0/{max(n, 1)} ... "
                          f"shard={max(n, 1) - 1}/{max(n, 1)}.")
    return i, n


def cell_shard(resolved: Mapping[str, Any]) -> str | None:
    """The cell's `shard` value when it splits the cell (None: not sharded). A pipeline that
    takes `shard` as an argument (experiment=core/encode_shards) owns the key instead."""
    value = resolved.get("shard")
    pipeline = resolved.get("pipeline")
    if value is None or (isinstance(pipeline, Mapping) and "shard" in pipeline):
        return None
    return str(value)


# -- partition (pure) -------------------------------------------------------------------------
def block_range(n_items: int, block: int, part: int, parts: int) -> range:
    """Items [lo, hi) of part `part` of `parts`: contiguous, made of whole blocks of `block`
    items (the last block may be short), the blocks shared as evenly as possible (part p gets
    blocks p*B//n .. (p+1)*B//n - 1). Parts beyond the number of blocks are empty."""
    if block < 1:
        raise ConfigError(f"a shard block must hold at least one item (got {block}).")
    if n_items < 0 or not 0 <= part < parts:
        raise ConfigError(f"part {part} of {parts} over {n_items} items: need 0 <= i < n.")
    blocks = -(-n_items // block)
    lo, hi = part * blocks // parts, (part + 1) * blocks // parts
    return range(min(lo * block, n_items), min(hi * block, n_items))


def spans(lengths: Sequence[int], block: int) -> list[tuple[int, int, int]]:
    """The blocks of several sequences in order, as (sequence, start, end): a block never
    spans two sequences (perplexity: the blocks of windows of each text)."""
    return [(s, b, min(b + block, n)) for s, n in enumerate(lengths) for b in range(0, n, block)]


def selected(units: Sequence[tuple[int, int, int]], rng: range) -> dict[int, range]:
    """Per sequence, the item range the units `units[rng]` cover (contiguous in each)."""
    out: dict[int, range] = {}
    for s, a, b in (units[i] for i in rng):
        prev = out.get(s)
        out[s] = range(prev.start if prev is not None else a, b)
    return out


# -- a part as a run --------------------------------------------------------------------------
@dataclass
class PartRun(Run):
    """Part `part` of `parts` of a run: the run's id and CSV, its own folder
    `tmp_<run_id>/shards/<i>of<n>/` (samples, part.json); never committed on its own."""

    part: int = 0
    parts: int = 1

    @property
    def folder(self) -> Path:
        return shards_root(self) / f"{self.part}of{self.parts}"

    @property
    def work_dir(self) -> Path:  # type: ignore[override]
        return self.folder

    @property
    def final_dir(self) -> Path:  # type: ignore[override]
        return self.folder

    @property
    def label(self) -> str:
        return f"part {self.part}/{self.parts} of {self.experiment}/{self.run_id}"

    def is_finished(self) -> bool:
        return (self.folder / PART_FILE).is_file()

    def start(self, overwrite: bool = False, code: dict[str, Any] | None = None,
              allow_code_change: bool = False) -> None:
        """Create (or reopen) the part's folder; overwrite=true starts the part over (and
        only it: the run's row and the other parts stay)."""
        if overwrite:
            shutil.rmtree(self.folder, ignore_errors=True)
        if code is not None:
            self.code_versions = check_resume(self.folder, code, allow_code_change)
        self.folder.mkdir(parents=True, exist_ok=True)

    def lock_run(self) -> Run:
        """The run whose writer lock guards this part: `<run_id>.shard-<i>of<n>.writer`, so
        the parts run in parallel while two copies of one part do not."""
        return Run(self.experiment, f"{self.run_id}.shard-{self.part}of{self.parts}", self.root)

    def commit(self) -> Path:
        raise AssertionError("a part is merged into its run, never committed on its own")


def shards_root(run: Run) -> Path:
    return run.root / run.experiment / f"tmp_{run.run_id}" / SHARDS_DIR


def part_of(run: Run) -> tuple[int, int] | None:
    """(i, n) when `run` is a part of a sharded run, else None."""
    return (run.part, run.parts) if isinstance(run, PartRun) else None


def items_of(run: Run, n_items: int, block: int = 1) -> range:
    """The items (in the unsharded order) this run computes: all of them, or its part's."""
    where = part_of(run)
    if where is None:
        return range(n_items)
    rng = block_range(n_items, block, *where)
    log.info("Shard %d/%d: units [%d, %d) of %d (whole blocks of %d)%s", where[0], where[1],
             rng.start, rng.stop, n_items, block, "" if rng else ": none, an empty part")
    return rng


# -- what a method provides -------------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """A finished part as the merge reads it: its part.json and its samples."""

    index: int
    folder: Path
    record: dict[str, Any]
    samples: list[dict[str, Any]]

    @property
    def metrics(self) -> dict[str, Any]:
        return dict(self.record.get("metrics") or {})

    @property
    def settings(self) -> dict[str, Any]:
        """The row settings in the order the part's pipeline gave them (part.json is
        written with sorted keys; the CSV's columns follow this order)."""
        settings = dict(self.record.get("settings") or {})
        order = [k for k in self.record.get("settings_order") or [] if k in settings]
        return {**{k: settings[k] for k in order}, **settings}


# (the parts in order, the merged samples in the unsharded order, the merged run's working
# folder, where the other files are already merged) -> the run's metrics
Merger = Callable[[Sequence[Part], list[dict[str, Any]], Path], dict[str, Any]]
F = TypeVar("F", bound=Callable[..., Any])


def shardable(merger: Merger) -> Callable[[F], F]:
    """Mark a pipeline function as able to run in shards, merged by `merger`."""
    def mark(fn: F) -> F:
        fn.shard_merge = merger  # type: ignore[attr-defined]
        return fn
    return mark


def merger_of(fn: Any, target: str) -> Merger:
    merge = getattr(fn, "shard_merge", None)
    if merge is None:
        raise ConfigError(f"The pipeline {target} cannot be split into shards (shard=i/n): "
                          f"it has no merge. Shardable: In-Context RALM perplexity and QA, "
                          f"RICHES and FilCo evaluation (docs/cluster.md, 'Sharding one "
                          f"cell'). Run the cell without shard=.")
    return merge


# -- writing a part ---------------------------------------------------------------------------
def write_part(part: PartRun, *, target: str, config: dict[str, Any], metrics: dict[str, Any],
               settings: dict[str, Any], metadata: dict[str, Any], command: list[str]) -> Path:
    """part.json, written last and atomically: the part's finished marker."""
    path = part.folder / PART_FILE
    atomic_write_json(path, {
        "experiment": part.experiment, "run_id": part.run_id, "part": part.part,
        "parts": part.parts, "target": target, "metrics": metrics, "settings": settings,
        "settings_order": list(settings),
        "metadata": scrub_secrets(metadata), "timings_s": dict(part.timings),
        "config": scrub_secrets(config), "command": list(command),
        "host": socket.gethostname(), "pid": os.getpid(), "finished_at": time.time(),
        "code_versions": list(part.code_versions)})
    log.info("Finished %s (%d samples)", part.label, len(read_records(part.samples_path, True)))
    return path


def rerun_command(command: Sequence[str], part: int, parts: int) -> str:
    """The command that runs only part `part`: the cell's overrides, shard=part/parts."""
    kept = [a for a in command if not a.lstrip("+").startswith("shard=")]
    return " ".join(["ragrepro", *kept, f"shard={part}/{parts}"])


# -- finding and reading parts ----------------------------------------------------------------
def part_counts(run: Run) -> dict[int, list[int]]:
    """n -> the parts i (finished or not) whose folders `<i>of<n>` exist for the run."""
    out: dict[int, list[int]] = {}
    root = shards_root(run)
    for p in sorted(root.iterdir()) if root.is_dir() else []:
        m = _FOLDER.match(p.name)
        if p.is_dir() and m:
            out.setdefault(int(m.group(2)), []).append(int(m.group(1)))
    return {n: sorted(v) for n, v in out.items()}


def finished_parts(run: Run, parts: int) -> list[int]:
    return [i for i in range(parts) if (shards_root(run) / f"{i}of{parts}" / PART_FILE).is_file()]


def missing_error(run: Run, parts: int, missing: Sequence[int],
                  command: Sequence[str]) -> ConfigError:
    lines = "; ".join(f"`{rerun_command(command, i, parts)}`" for i in missing)
    return ConfigError(
        f"Cannot merge {run.experiment}/{run.run_id}: part(s) {', '.join(map(str, missing))} "
        f"of {parts} have not finished (no {PART_FILE} under {shards_root(run)}/). Rerun only "
        f"them (the finished parts are kept): {lines}; the last one to finish merges.")


def load_parts(run: Run, parts: int, command: Sequence[str] = ()) -> list[Part]:
    missing = [i for i in range(parts) if i not in finished_parts(run, parts)]
    if missing:
        raise missing_error(run, parts, missing, command or _command_of(run, parts))
    out = []
    for i in range(parts):
        folder = shards_root(run) / f"{i}of{parts}"
        record = read_run_json(folder / PART_FILE, {"metrics": dict, "settings": dict,
                                                    "metadata": dict, "config": dict})
        if (record.get("run_id"), record.get("part"), record.get("parts")) != (run.run_id, i, parts):
            raise DataError(f"{folder / PART_FILE} names run {record.get('run_id')} part "
                            f"{record.get('part')}/{record.get('parts')}, not {run.run_id} part "
                            f"{i}/{parts}: delete {folder}/ and rerun that part.")
        out.append(Part(i, folder, record, read_records(folder / SAMPLES, finished=True)))
    return out


def _command_of(run: Run, parts: int) -> list[str]:
    for i in finished_parts(run, parts):
        path = shards_root(run) / f"{i}of{parts}" / PART_FILE
        try:
            return list(json.loads(path.read_text(encoding="utf-8")).get("command") or [])
        except (OSError, ValueError):
            continue
    return [f"experiment={run.experiment}", "<the cell's overrides>"]


# -- merging (pure helpers) -------------------------------------------------------------------
def same_settings(parts: Sequence[Part]) -> dict[str, Any]:
    """The row settings every part shares; parts that differ (another device, another
    revision) cannot make one row, and the keys that differ are named."""
    first = parts[0].settings
    for p in parts[1:]:
        other = p.settings
        diff = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
        if diff:
            shown = ", ".join(f"{k}: {first.get(k)!r} vs {other.get(k)!r}" for k in diff[:5])
            raise DataError(f"Parts 0 and {p.index} of the run in {p.folder.parent} differ in "
                            f"their row settings ({shown}): they cannot make one run. Rerun "
                            f"part {p.index} where part 0 ran (delete {p.folder}/), or rerun "
                            f"the cell unsharded.")
    return first


def summed_timings(parts: Iterable[Part]) -> dict[str, float]:
    """Stage -> seconds, over all parts (the compute the run cost, whatever ran in parallel)."""
    out: dict[str, float] = {}
    for p in parts:
        for k, v in (p.record.get("timings_s") or {}).items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def code_versions(parts: Iterable[Part]) -> list[dict[str, Any]]:
    """The code versions the parts ran, each once, in order of first use."""
    out: list[dict[str, Any]] = []
    for p in parts:
        for v in p.record.get("code_versions") or []:
            if v not in out:
                out.append(v)
    return out


def first_by_key(records: Iterable[dict[str, Any]],
                 key: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """The records with each key once, the first occurrence kept, in order."""
    seen: set[Any] = set()
    out = []
    for r in records:
        k = key(r)
        if k not in seen:
            seen.add(k)
            out.append(r)
    return out


def _jsonl(records: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, default=float) + "\n" for r in records)


# -- merging (I/O) ----------------------------------------------------------------------------
def merge_files(parts: Sequence[Part], out: Path) -> list[dict[str, Any]]:
    """Into `out`: samples.jsonl and every other JSONL file concatenated in part order (the
    unsharded order, the parts being contiguous), any other file of part 0 copied; the
    method's merger rewrites what needs more. Returns the merged samples."""
    out.mkdir(parents=True, exist_ok=True)
    samples = [s for p in parts for s in p.samples]
    atomic_write_text(out / SAMPLES, _jsonl(samples))
    names = sorted({f.name for p in parts for f in p.folder.iterdir() if f.is_file()})
    for name in names:
        if name in _NOT_COPIED:
            continue
        if name.endswith(".jsonl"):
            lines = [r for p in parts for r in read_records(p.folder / name, finished=True)]
            atomic_write_text(out / name, _jsonl(lines))
        elif (parts[0].folder / name).is_file():
            shutil.copyfile(parts[0].folder / name, out / name)
    return samples


def merge_run(run: Run, parts: Sequence[Part], merger: Merger,
              writer: runlock.WriterLock) -> dict[str, Any]:
    """Merge finished parts into the run and commit it (the caller holds its writer lock)."""
    settings = same_settings(parts)
    out = run.work_dir
    samples = merge_files(parts, out)
    metrics = merger(parts, samples, out)
    versions = code_versions(parts)
    atomic_write_json(out / CODE_FILE, {"versions": versions})
    first = parts[0].record
    metadata = {**first["metadata"], "code_versions_mixed": mixed(versions),
                "started_at": min(float(p.record["metadata"].get("started_at") or 0.0)
                                  for p in parts),
                "shards": {"parts": len(parts),
                           "hosts": sorted({str(p.record.get("host") or "?") for p in parts}),
                           "samples": [len(p.samples) for p in parts],
                           "finished_at": [p.record.get("finished_at") for p in parts]}}
    # the unsharded run's config: `shard` at its root default (the id never hashed it)
    config = {**first["config"], "shard": None}
    run.timings = summed_timings(parts)
    run.write_results(config, metrics, settings, metadata)
    writer.check_held()  # a copy that took the run over commits it, not this one
    final = run.commit()
    shutil.rmtree(final / SHARDS_DIR, ignore_errors=True)  # the run is whole: parts go
    log.info("Merged %d parts into %s/%s (%d samples)", len(parts), run.experiment,
             run.run_id, len(samples))
    return metrics


def merge_if_complete(run: Run, parts: int, merger: Merger, writer_settings: Any,
                      command: Sequence[str] = (), required: bool = False
                      ) -> dict[str, Any] | None:
    """Merge when every part finished (or raise naming the missing ones if `required`);
    None when a part is missing, another copy is merging, or nothing is left to do."""
    done = finished_parts(run, parts)
    if len(done) < parts:
        if required:
            raise missing_error(run, parts, [i for i in range(parts) if i not in done],
                                command or _command_of(run, parts))
        log.info("%d of %d parts of %s/%s finished; the last one merges.", len(done), parts,
                 run.experiment, run.run_id)
        return None
    with runlock.writing(run, runlock.WriterSettings.of(writer_settings)) as writer:
        if writer is None:
            return None  # another part (or a merge command) is merging it now
        if run.is_finished() and not shards_root(run).is_dir():
            return None  # merged meanwhile
        return merge_run(run, load_parts(run, parts, command), merger, writer)


def parts_of_run(run: Run) -> int:
    """The n of a run's shard folders; refused when none or several n are present."""
    counts = part_counts(run)
    if not counts:
        raise ConfigError(f"{run.experiment}/{run.run_id} has no shard parts under "
                          f"{shards_root(run)}/: run the parts first, e.g. `ragrepro -m "
                          f"experiment={run.experiment} <overrides> shard=0/N,...,N-1/N`.")
    if len(counts) > 1:
        raise ConfigError(f"{shards_root(run)}/ holds parts of {sorted(counts)} shards at once "
                          f"(folders <i>of<n>): keep the parts of one n (delete the other "
                          f"folders) and merge again.")
    return next(iter(counts))


def merger_from_record(record: Mapping[str, Any]) -> Merger:
    """The merge of the pipeline a part ran (imported by its target, as the runner does)."""
    target = str(record.get("target") or "")
    try:
        fn = get_object(target)
    except Exception as e:
        raise ConfigError(f"The parts ran pipeline `{target}`, which cannot be imported "
                          f"({e}): merge with the code that ran them.") from e
    return merger_of(fn, target)


# -- ragrepro shards ... ----------------------------------------------------------------------
def sharded_runs(root: Path, experiment: str) -> list[Run]:
    base = root / experiment
    return [Run(experiment, d.name[len("tmp_"):], root)
            for d in sorted(base.glob("tmp_*")) if (d / SHARDS_DIR).is_dir()
            and not d.name.endswith(".replaced")]


def main(argv: Sequence[str]) -> int:
    """`ragrepro shards merge|status <experiment> [--run RUN_ID] [--results-dir DIR]`."""
    parser = argparse.ArgumentParser(prog="ragrepro shards", description=(
        "Merge the finished parts of sharded runs (shard=i/n), or list their parts."))
    parser.add_argument("action", choices=("merge", "status"))
    parser.add_argument("experiment")
    parser.add_argument("--run", default=None, help="one run id (default: every sharded run)")
    parser.add_argument("--results-dir", default=None)
    args = parser.parse_args(list(argv))
    root = Path(args.results_dir) if args.results_dir else results_dir()
    runs = ([Run(args.experiment, args.run, root)] if args.run
            else sharded_runs(root, args.experiment))
    if not runs:
        raise ConfigError(f"No sharded run of {args.experiment} under {root}/ (folders "
                          f"tmp_<run_id>/{SHARDS_DIR}/).")
    for run in runs:
        if run.is_finished() and not shards_root(run).is_dir():
            sys.stdout.write(f"{run.experiment}/{run.run_id}: finished\n")
            continue
        parts = parts_of_run(run)
        done = finished_parts(run, parts)
        if args.action == "status":
            sys.stdout.write(f"{run.experiment}/{run.run_id}: {len(done)} of {parts} parts "
                             f"finished{'' if len(done) == parts else ', missing ' + ', '.join(str(i) for i in range(parts) if i not in done)}\n")
            continue
        first = load_parts(run, parts)[0].record
        merged = merge_if_complete(run, parts, merger_from_record(first),
                                   (first.get("config") or {}).get("writer"), required=True)
        state = "merged" if merged is not None else "being merged by another process"
        sys.stdout.write(f"{run.experiment}/{run.run_id}: {state}\n")
    return 0
