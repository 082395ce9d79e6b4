"""`ragrepro verify --runs EXPERIMENT`: this machine's finished runs against the committed
evidence bundle (results/evidence/<experiment>.jsonl.gz), run by run and record by record.

`ragrepro verify TABLE.md` answers "does my table print the committed digits?"; this answers
the question under it: are the outputs the same ones, and where they are not bit-identical,
is the difference float noise (another CPU sums in another order) or a different output (a
reranker that picked another document, a generation that took another token)? Per run id:

- every number of metrics.json's metrics and of every per-sample record (samples.jsonl,
  retrievals.jsonl, autoais.jsonl) is compared with the committed one: equal bits, within
  `noise` (relative, default 1e-5; absolute 1e-9 near zero), or beyond it;
- every other value (text, choices, integers, flags) must be equal: one that is not is a
  different output, named by its file, record and field;
- wall-clock fields (seconds, timings) are skipped: they never repeat.

A run is `same bits`, `float noise` or `differs`; a committed run id with no finished run here
is `not run here`, a run here that the bundle lacks is `not committed`. The CPU of each side
is read from the runs' metadata (`machine.cpu`, recorded since this check exists; older runs
say only the architecture).
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import RagreproError
from .evidence import bundle_path, finished_run_dirs, read_bundle

DEFAULT_NOISE = 1e-5
STATUSES = ("same bits", "float noise", "numbers beyond noise", "differs", "not run here",
            "not committed")
ABS_FLOOR = 1e-9
RECORD_FILES = ("samples.jsonl", "retrievals.jsonl", "autoais.jsonl")
# Wall-clock fields: measured, never reproduced.
TIMED = frozenset({"seconds", "seconds_per_question", "timings_s", "heartbeat_at",
                   "started_at", "finished_at", "elapsed_s"})


@dataclass(frozen=True)
class Field:
    """One numeric field (its path without record indices): how many values, how many equal
    in bits, within noise, beyond it, and the largest absolute and relative difference."""

    n: int = 0
    noisy: int = 0
    beyond: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0

    def __add__(self, other: Field) -> Field:
        return Field(self.n + other.n, self.noisy + other.noisy, self.beyond + other.beyond,
                     max(self.max_abs, other.max_abs), max(self.max_rel, other.max_rel))


MAX_NAMED = 5


@dataclass(frozen=True)
class Tally:
    """What comparing two JSON values found: numeric fields by name, and the other values
    that differ (a text, a choice, an integer; the first `MAX_NAMED` named)."""

    fields: tuple[tuple[str, Field], ...] = ()
    changed: tuple[str, ...] = ()
    n_changed: int = 0

    def __add__(self, other: Tally) -> Tally:
        merged = dict(self.fields)
        for name, f in other.fields:
            merged[name] = merged.get(name, Field()) + f
        return Tally(tuple(sorted(merged.items())), (self.changed + other.changed)[:MAX_NAMED],
                     self.n_changed + other.n_changed)

    def total(self) -> Field:
        return sum((f for _, f in self.fields), Field())


def relative(a: float, b: float) -> float:
    """|a - b| relative to the larger magnitude, or to 1 below it: noise in a sum of
    log-probabilities is absolute per term, so a sum near zero is not held to a tighter
    absolute bound than one near 1 (0 for equal values, inf for NaN against a number)."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1.0)


def _field_name(path: str) -> str:
    return re.sub(r"\[\d+\]", "", path)


def compare_values(here: Any, committed: Any, path: str, noise: float) -> Tally:
    """Walk two JSON values side by side. A float (or an int beside a float) is a number,
    counted under its field; ints, strings, booleans and None must be equal; mappings and
    lists are compared key by key and item by item."""
    if isinstance(here, Mapping) and isinstance(committed, Mapping):
        out = Tally()
        for key in sorted(set(here) | set(committed)):
            if key in TIMED:
                continue
            if key not in here or key not in committed:
                where = "here" if key in here else "committed"
                out += Tally(changed=(f"{path}.{key} (only {where})",), n_changed=1)
                continue
            out += compare_values(here[key], committed[key], f"{path}.{key}", noise)
        return out
    if isinstance(here, list) and isinstance(committed, list):
        if len(here) != len(committed):
            return Tally(changed=((f"{path} ({len(here)} items here, {len(committed)} "
                                  f"committed)"),), n_changed=1)
        out = Tally()
        for i, (a, b) in enumerate(zip(here, committed)):
            out += compare_values(a, b, f"{path}[{i}]", noise)
        return out
    if _number(here) and _number(committed) and isinstance(here, float) | isinstance(committed,
                                                                                   float):
        a, b = float(here), float(committed)
        rel = relative(a, b)
        diff = abs(a - b) if math.isfinite(rel) else math.inf
        field = Field(1, int(0 < rel <= noise), int(rel > noise), diff, rel)
        return Tally(fields=((_field_name(path), field),))
    if here == committed and type(here) is type(committed):
        return Tally()
    return Tally(changed=(f"{path} ({_short(here)} here, {_short(committed)} committed)",),
                 n_changed=1)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _short(v: Any) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _records(text: str) -> list[Any]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@dataclass(frozen=True)
class RunCheck:
    """One run id's verdict."""

    run_id: str
    status: str  # same bits | float noise | differs | not run here | not committed
    records: int = 0
    tally: Tally = Tally()
    cpu_here: str = ""
    cpu_committed: str = ""

    def line(self) -> str:
        if self.status in ("not run here", "not committed"):
            return f"{self.run_id}: {self.status}"
        t = self.tally
        total = t.total()
        parts = [f"{self.run_id}: {self.status}", f"{self.records} records",
                 (f"{total.n} numbers ({total.n - total.noisy - total.beyond} equal, "
                 f"{total.noisy} within noise, {total.beyond} beyond"
                 + (f"; largest relative difference {total.max_rel:.2g})" if total.noisy
                    and not total.beyond else ")"))]
        beyond = [f"{name} {f.beyond}/{f.n} (largest difference {f.max_abs:.2g})"
                  for name, f in t.fields if f.beyond]
        if beyond:
            parts.append("beyond noise: " + "; ".join(beyond))
        if t.n_changed:
            parts.append(f"{t.n_changed} other values differ: " + "; ".join(t.changed)
                         + (" ..." if t.n_changed > len(t.changed) else ""))
        return ", ".join(parts)


def check_run(here: Mapping[str, str], committed: Mapping[str, str], run_id: str,
              noise: float = DEFAULT_NOISE) -> RunCheck:
    """Compare one run's files ({name: text}, as a bundle holds them) with the committed ones."""
    m_here, m_comm = json.loads(here["metrics.json"]), json.loads(committed["metrics.json"])
    tally = compare_values(m_here.get("metrics", {}), m_comm.get("metrics", {}), "metrics",
                           noise)
    records = 0
    for name in RECORD_FILES:
        if name not in here and name not in committed:
            continue
        if name not in here or name not in committed:
            where = "here" if name in here else "committed"
            tally += Tally(changed=(f"{name} (only {where})",), n_changed=1)
            continue
        a, b = _records(here[name]), _records(committed[name])
        records += len(b)
        tally += compare_values(a, b, name.split(".")[0], noise)
    total = tally.total()
    if tally.n_changed:
        status = "differs"
    elif total.beyond:
        status = "numbers beyond noise"
    elif total.noisy:
        status = "float noise"
    else:
        status = "same bits"
    return RunCheck(run_id, status, records, tally, cpu_of(m_here), cpu_of(m_comm))


def cpu_of(metrics: Mapping[str, Any]) -> str:
    info = (metrics.get("metadata") or {}).get("machine") or {}
    name = info.get("gpu") or info.get("cpu") or info.get("processor") or "?"
    threads = info.get("torch_threads")
    return f"{name}, {threads} torch threads" if threads else str(name)


def local_files(run_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(run_dir.iterdir())
            if p.is_file() and (p.name == "metrics.json" or p.name in RECORD_FILES)}


def check_experiment(root: Path, experiment: str,
                     noise: float = DEFAULT_NOISE) -> list[RunCheck]:
    """Every run id of the committed bundle and of the finished local runs, in id order."""
    bundle = bundle_path(root, experiment)
    if not bundle.is_file():
        raise RagreproError(f"{experiment}: no committed evidence bundle ({bundle.name} under "
                            f"results/evidence/) to compare with.")
    _header, entries = read_bundle(bundle)
    committed = {str(e["run_id"]): e["files"] for e in entries}
    local = {d.name: d for d in finished_run_dirs(root, experiment)}
    if not local:
        raise RagreproError(f"{experiment}: no finished runs here to compare with its "
                            f"committed evidence. Run the experiment first (for Table 1: "
                            f"make reproduce-table1).")
    out = []
    for run_id in sorted(set(committed) | set(local)):
        if run_id not in local:
            out.append(RunCheck(run_id, "not run here"))
        elif run_id not in committed:
            out.append(RunCheck(run_id, "not committed"))
        else:
            out.append(check_run(local_files(local[run_id]), committed[run_id], run_id, noise))
    return out


def report(root: Path, experiments: Sequence[str],
           noise: float = DEFAULT_NOISE) -> tuple[str, int]:
    """(printed text, number of runs that differ or are missing here)."""
    lines, bad = [], 0
    for experiment in experiments:
        checks = check_experiment(root, experiment, noise)
        cpus = sorted({(c.cpu_here, c.cpu_committed) for c in checks if c.cpu_here})
        lines.append(f"== runs of {experiment} against results/evidence/{experiment}.jsonl.gz")
        for here, comm in cpus:
            lines.append(f"  machine here: {here}; committed: {comm}")
        lines += [f"  {c.line()}" for c in checks]
        counts = {s: sum(c.status == s for c in checks) for s in
                  STATUSES}
        lines.append(f"== {experiment}: " + ", ".join(f"{n} {s}" for s, n in counts.items())
                     + f" (noise: relative {noise:g})")
        bad += counts["differs"] + counts["not run here"]
    return "\n".join(lines) + "\n", bad
