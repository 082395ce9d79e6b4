"""What backs each committed table: results/evidence/manifest.yaml, read and checked.

    ragrepro evidence status           # every committed table: its bundles, its inputs, or why none

A committed table is backed in one of three ways (`Entry.kind`):
- `bundles`: the evidence bundles it is rebuilt from on a fresh clone (`rebuild`);
- `inputs`: a measurement (benchmarks, a judge's per-item decisions, a plan check): the
  committed files it is rendered from;
- `pending`: built from runs whose evidence is not shipped; the entry names those experiments
  (`runs`), says why, how to regenerate them and what it costs, and readers that find no run
  of one say so (`pending_note`).
`problems` compares the manifest with the files: a committed table it does not list, a listed
file that is absent, a bundle that backs no table. It holds no method knowledge: the
manifest is data beside the committed results.
"""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .errors import DataError, RagreproError
from .evidence import bundle_path, bundles
from .io import atomic_write_text

MANIFEST = Path("evidence") / "manifest.yaml"
KINDS = ("bundles", "inputs", "pending")
# Files under results/ that are not tables a reader cites: the evidence folder itself.
NOT_TABLES = ("evidence/",)


@dataclass(frozen=True)
class Entry:
    table: str                      # relative to results/
    kind: str                       # one of KINDS
    bundles: tuple[str, ...] = ()   # experiments whose bundles rebuild the table
    inputs: tuple[str, ...] = ()    # committed files a measurement is rendered from
    rebuild: str = ""               # the command that builds the table from them
    pending: str = ""               # why no evidence ships
    runs: tuple[str, ...] = ()      # the experiments whose runs are not shipped
    regenerate: str = ""            # the command that makes the runs
    cost: str = ""                  # what regenerating costs on the development machine


def _entry(table: str, raw: Any, where: Path) -> Entry:
    if not isinstance(raw, Mapping):
        raise DataError(f"{where}: the entry of {table!r} is not a mapping.")
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        raise DataError(f"{where}: the entry of {table!r} needs exactly one of "
                        f"{', '.join(KINDS)} (has {', '.join(kinds) or 'none'}).")
    unknown = sorted(set(raw) - {*KINDS, "rebuild", "regenerate", "cost", "runs"})
    if unknown:
        raise DataError(f"{where}: the entry of {table!r} has unknown keys {unknown}.")
    kind = kinds[0]
    if kind == "pending" and not (raw.get("regenerate") and raw.get("cost") and raw.get("runs")):
        raise DataError(f"{where}: pending {table!r} must say `runs` (the experiments not "
                        f"shipped), `regenerate` and `cost`.")
    if kind != "pending" and "rebuild" not in raw:
        raise DataError(f"{where}: {table!r} must say `rebuild` (the command that builds it).")
    return Entry(table=table, kind=kind,
                 bundles=tuple(str(b) for b in raw.get("bundles") or ()),
                 inputs=tuple(str(i) for i in raw.get("inputs") or ()),
                 rebuild=str(raw.get("rebuild", "")),
                 pending=str(raw.get("pending", "")),
                 runs=tuple(str(r) for r in raw.get("runs") or ()),
                 regenerate=str(raw.get("regenerate", "")), cost=str(raw.get("cost", "")))


def load(results: Path) -> list[Entry]:
    """The manifest's entries, in file order; a damaged manifest is refused by name."""
    path = Path(results) / MANIFEST
    if not path.is_file():
        raise DataError(f"{path}: no evidence manifest (restore it from git: "
                        f"`git checkout -- results/{MANIFEST.as_posix()}`).")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise DataError(f"{path} is not valid YAML ({e}); restore it from git.") from e
    tables = (data or {}).get("tables") if isinstance(data, Mapping) else None
    if not isinstance(tables, Mapping):
        raise DataError(f"{path}: no `tables:` mapping at the top.")
    return [_entry(str(t), raw, path) for t, raw in tables.items()]


def _git_files(root: Path) -> list[str] | None:
    """The files under root git would commit (tracked, or new and not ignored), relative to
    root; None outside a git checkout. A run's own outputs (results/ralm/table1_ladder.md
    after a rerun) are ignored by .gitignore and are not committed tables."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "-z", "--", "."], cwd=root, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [n for n in out.stdout.decode("utf-8").split("\0") if n]


def committed_tables(results: Path) -> list[str]:
    """Every markdown file under results/ a reader cites (relative, sorted): what git would
    commit there, or every file when results/ is not in a git checkout."""
    root = Path(results)
    names = _git_files(root)
    if names is None:
        names = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(n for n in names if n.endswith(".md") and not n.startswith(NOT_TABLES))


def problems(results: Path, entries: list[Entry]) -> list[str]:
    """What the manifest and the files disagree on; empty when it is whole."""
    root = Path(results)
    out: list[str] = []
    listed = {e.table for e in entries}
    out += [f"{t}: a committed table the manifest does not list (add it to "
            f"results/{MANIFEST.as_posix()})" for t in committed_tables(root) if t not in listed]
    for e in entries:
        if not (root / e.table).is_file():
            out.append(f"{e.table}: listed, but no such file under results/")
        out += [f"{e.table}: its bundle evidence/{b}.jsonl.gz is missing (pack it: "
                f"`ragrepro evidence pack {b}`)" for b in e.bundles
                if not bundle_path(root, b).is_file()]
        out += [f"{e.table}: its input {i} is missing" for i in e.inputs
                if not (root / i).is_file()]
    used = {b for e in entries for b in e.bundles}
    out += [f"evidence/{b}.jsonl.gz backs no table in the manifest" for b in bundles(root)
            if b not in used]
    return out


def pending_note(results: Path, experiment: str) -> str:
    """For a reader that found no run of `experiment`: the committed tables built from it
    whose evidence is not shipped, why, and how to make it ('' when none is known)."""
    try:
        entries = load(results)
    except DataError:
        return ""
    hits = [e for e in entries if e.kind == "pending" and experiment in e.runs]
    return "".join(f" Its committed table results/{e.table} ships no evidence ({e.pending}); "
                   f"regenerate it with `{e.regenerate}` ({e.cost})." for e in hits)


STATUS = Path("evidence") / "status.md"


def _size(results: Path, bundles: tuple[str, ...]) -> str:
    paths = [bundle_path(results, b) for b in bundles]
    total = sum(p.stat().st_size for p in paths if p.is_file())
    return f"{total / 1e6:.2f}" if total else ""


def render(entries: list[Entry], results: Path) -> str:
    """results/evidence/status.md: table | backed by | MB of its bundles | how to check or
    regenerate it (the bundles' sizes read from the files, so the page cannot go stale
    unnoticed: a test compares it with the committed one)."""
    intro = ("Generated by `ragrepro evidence status --write` from results/evidence/"
             "manifest.yaml; MB = the bundles' size on disk (a bundle shared by two tables "
             "counts in both).")
    lines = ["# What backs each committed table", "", intro, "",
             "| table | backed by | MB | rebuild or regenerate |", "|---|---|---|---|"]
    for e in entries:
        size = ""
        if e.kind == "bundles":
            what, how, size = "bundles: " + ", ".join(e.bundles), e.rebuild, _size(results,
                                                                                   e.bundles)
        elif e.kind == "inputs":
            what = "measurement: " + (", ".join(e.inputs) or "(no committed input)")
            how = e.rebuild
        else:
            what = f"no evidence ({', '.join(e.runs)}): {e.pending}"
            how = f"{e.regenerate} ({e.cost})"
        lines.append(f"| {e.table} | {what} | {size} | {how} |")
    counts = {k: sum(e.kind == k for e in entries) for k in KINDS}
    shipped = bundles(results)
    total = sum(p.stat().st_size for p in shipped.values()) / 1e6
    summary = (f"{len(entries)} committed tables: {counts['bundles']} rebuilt from shipped "
               f"bundles, {counts['inputs']} measurements with their inputs, "
               f"{counts['pending']} without evidence. {len(shipped)} bundles, "
               f"{total:.2f} MB in all.")
    lines += ["", summary]
    return "\n".join(lines) + "\n"


def status(results: Path, write: bool = False) -> int:
    """Print what backs each committed table and what the manifest and the files disagree
    on; 2 when they disagree. write: also write the page to results/evidence/status.md
    (committed; docs/report.md includes its table)."""
    try:
        entries = load(results)
    except RagreproError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    text = render(entries, results)
    sys.stdout.write(text)
    if write:
        atomic_write_text(Path(results) / STATUS, text)
    found = problems(results, entries)
    for problem in found:
        sys.stderr.write(f"error: {problem}\n")
    return 2 if found else 0
