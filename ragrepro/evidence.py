"""Evidence bundles: the finished runs behind a committed table, small enough to keep in git.

    ragrepro evidence pack ralm/table1      # results/evidence/ralm/table1.jsonl.gz
    ragrepro evidence unpack ralm/table1 --results-dir DIR
    (the command line: ragrepro.evidence_cli)

A bundle is one gzip'd JSON-lines file: a header line, then one line per finished run of the
experiment holding the text of its run files (metrics.json with its settings and metadata,
config.json, code.json, samples.jsonl, retrievals.jsonl, ...; not W&B's folder, not files
over `MAX_FILE_BYTES`, not RALM's official-format retrieval.json). Packing is deterministic (runs and names sorted, gzip time 0), so the
same runs give the same bytes. Unpacking writes the run folders and their CSV rows (rebuilt
from each metrics.json, as `tracking.restore_row` does) under a results folder, where every
reader (`ragrepro table`, `samples`, `compare`, the report) finds them as if computed there.
Bundles live under results/evidence/, which no run writes to, so a committed bundle never
makes `make reproduce-table1` skip its work.

Readers use a bundle on their own (ragrepro.report.runs): an experiment with no finished run
folder of its own is read from its bundle, unpacked once into the cache folder
(`<RAGREPRO_CACHE>/evidence/<digest>/`, keyed by the bundle's bytes), never into results/,
where a finished folder would make the runner skip the run.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from .errors import DataError
from .io import atomic_write_gzip, atomic_write_text
from .paths import REPO_ROOT, cache_dir
from .tracking import Run, append_csv_row, folder_row

log = logging.getLogger(__name__)

FORMAT = "ragrepro-evidence"
VERSION = 1
MAX_FILE_BYTES = 1 << 20
SKIPPED_DIRS = frozenset({"wandb"})
SUFFIX = ".jsonl.gz"
# Marks an unpacked cache folder as whole: a reader killed while unpacking leaves none.
COMPLETE_FILE = ".complete"
# RALM's retrieval.json is the official code's format of what retrievals.jsonl records
# (ralm/lm_eval.py write_official_file): the same documents a second time, 47% of a bundle.
SKIPPED_FILES = frozenset({"retrieval.json"})


def bundle_path(root: Path, experiment: str) -> Path:
    return root / "evidence" / f"{experiment}{SUFFIX}"


def bundles(root: Path) -> dict[str, Path]:
    """experiment -> its bundle under root/evidence/ (the file's place names the experiment,
    as `bundle_path` writes it)."""
    base = Path(root) / "evidence"
    if not base.is_dir():
        return {}
    return {p.relative_to(base).as_posix()[: -len(SUFFIX)]: p
            for p in sorted(base.rglob(f"*{SUFFIX}")) if p.is_file()}


def shown(path: Path) -> str:
    """A path as a reader of this checkout types it: relative to the repository (or the
    current folder) when inside it, so logs and generated text name no machine's layout."""
    path = Path(path).absolute()
    for base in (REPO_ROOT, Path.cwd()):
        try:
            return path.relative_to(base.absolute()).as_posix()
        except ValueError:
            continue
    return str(path)


def finished_run_dirs(root: Path, experiment: str) -> list[Path]:
    """The experiment's finished run folders (`<run_id>/` holding metrics.json; never tmp_)."""
    base = root / experiment
    return sorted(p.parent for p in base.glob("*/metrics.json")
                  if not p.parent.name.startswith("tmp_"))


def run_files(run_dir: Path) -> tuple[dict[str, str], list[str]]:
    """({relative name: text} of the run's files, [names left out and why])."""
    files: dict[str, str] = {}
    left: list[str] = []
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if not path.is_file() or rel.parts[0] in SKIPPED_DIRS or rel.name.startswith("."):
            continue
        if str(rel) in SKIPPED_FILES:
            left.append(f"{rel} (a copy of retrievals.jsonl in the official format)")
            continue
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            left.append(f"{rel} ({size} bytes > {MAX_FILE_BYTES})")
            continue
        try:
            files[str(rel)] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            left.append(f"{rel} (not text)")
    return files, left


def pack(root: Path, experiment: str, out: Path | None = None) -> Path:
    """Write the experiment's bundle; returns its path."""
    dirs = finished_run_dirs(root, experiment)
    if not dirs:
        raise DataError(f"No finished runs under {root / experiment}: run "
                        f"`ragrepro -m experiment={experiment}` first, then pack.")
    lines = [json.dumps({"format": FORMAT, "version": VERSION, "experiment": experiment,
                         "runs": len(dirs)}, sort_keys=True)]
    for d in dirs:
        files, left = run_files(d)
        if left:
            log.info("%s: not in the bundle: %s", d.name, "; ".join(left))
        lines.append(json.dumps({"run_id": d.name, "files": files, "left_out": left},
                                sort_keys=True, ensure_ascii=False))
    path = out or bundle_path(root, experiment)
    atomic_write_gzip(path, "\n".join(lines) + "\n")
    log.info("Wrote %s: %d runs, %d bytes", path, len(dirs), path.stat().st_size)
    return path


def read_bundle(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, run entries) of a bundle; a damaged one is refused by name."""
    if not path.is_file():
        raise DataError(f"{path}: no evidence bundle. Pack one with `ragrepro evidence pack "
                        f"<experiment>` after the runs finished.")
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is damaged ({type(e).__name__}: {e}). Restore it from git "
                        f"(`git checkout -- {path}`) or pack it again from the runs.") from e
    if not entries or entries[0].get("format") != FORMAT:
        raise DataError(f"{path} is not a ragrepro evidence bundle (no header line).")
    header, runs = entries[0], entries[1:]
    if header.get("version") != VERSION or header.get("runs") != len(runs):
        raise DataError(f"{path}: header says version {header.get('version')} with "
                        f"{header.get('runs')} runs, the file holds {len(runs)} (this code "
                        f"reads version {VERSION}); restore it from git or pack it again.")
    return header, runs


def unpack(path: Path, root: Path) -> list[Path]:
    """Write the bundle's run folders and CSV rows under `root`; returns the folders. A run
    folder already there is left as it is (a run computed here wins over the bundle)."""
    header, runs = read_bundle(path)
    experiment = str(header["experiment"])
    out = []
    for entry in runs:
        run = Run(experiment, str(entry["run_id"]), root)
        metrics_path = run.final_dir / "metrics.json"
        if not metrics_path.exists():
            for name, text in entry["files"].items():
                atomic_write_text(run.final_dir / name, text)
            _stamp(run.final_dir)
            data = json.loads(metrics_path.read_text(encoding="utf-8"))
            append_csv_row(run.csv_path, folder_row(run, data, metrics_path.stat().st_mtime))
        out.append(run.final_dir)
    return out


def unpacked(path: Path, experiment: str, cache: Path | None = None) -> Path:
    """A results folder holding the bundle's runs (`<it>/<experiment>/<run_id>/` and
    `<it>/<experiment>.csv`): the bundle unpacked once under `cache` (default: the cache
    folder's evidence/), in a folder named by a digest of its bytes, so an edited bundle is
    unpacked afresh and an unchanged one never again. A damaged bundle, or one holding another
    experiment than its place names, is refused by name."""
    data = path.read_bytes() if path.is_file() else b""
    dest = (cache or cache_dir() / "evidence") / hashlib.sha256(data).hexdigest()[:16]
    done = dest / COMPLETE_FILE
    if done.is_file() and done.read_text(encoding="utf-8").strip() == experiment:
        return dest
    header, _runs = read_bundle(path)  # damage: DataError naming the bundle
    if header.get("experiment") != experiment:
        raise DataError(f"{path} holds the runs of {header.get('experiment')!r}, but its place "
                        f"names {experiment!r}; move it to "
                        f"evidence/{header.get('experiment')}{SUFFIX} or pack it again.")
    # Unpacked beside its final place and renamed whole: two readers unpacking at once each
    # build their own copy, the first rename wins and the other copy is dropped.
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    unpack(path, tmp)
    (tmp / COMPLETE_FILE).write_text(f"{experiment}\n", encoding="utf-8")
    try:
        os.replace(tmp, dest)
    except OSError:  # another reader finished first (a non-empty folder is not replaced)
        shutil.rmtree(tmp, ignore_errors=True)
        if not (dest / COMPLETE_FILE).is_file():
            raise
    return dest


def _stamp(run_dir: Path) -> None:
    """Give metrics.json the run's own finishing time (readers order runs by it)."""
    data = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    started = (data.get("metadata") or {}).get("started_at")
    if isinstance(started, (int, float)):
        done = float(started) + sum(float(v) for v in (data.get("timings_s") or {}).values())
        os.utime(run_dir / "metrics.json", (done, done))
