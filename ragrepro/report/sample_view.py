"""`ragrepro samples <experiment> [key=value ...] [filters]`: read a run's samples in a
terminal (prompt tail, output, parsed answer, gold, finish reason, evidence).

A weak row must be traceable to its samples. Which record field is the prompt, the output,
the gold answer or the evidence is declared in conf/report/samples.yaml as lists of field
names, first present wins: the viewer knows no method. Finish reasons and emptiness come
from the core's per-stage `generation` mapping (ragrepro.generation) when a record has one.

Exit codes: 0 samples printed; 1 no sample matched the filters; 2 a usage error (unknown
experiment, no finished run, a settings filter no run has).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import attest, evidence_manifest
from ..errors import ConfigError, did_you_mean
from ..generation import finish_reasons
from ..methods import MethodProfile, registered
from ..paths import CONF_DIR, results_dir
from ..run_files import read_records
from .keyed import varying
from .runs import RunRecord, is_missing, load_runs, to_float

log = logging.getLogger(__name__)

SAMPLES_FILE = CONF_DIR / "report" / "samples.yaml"
ROLES = ("id", "group", "question", "prompt", "output", "answer", "gold", "evidence", "score",
         "finish")


@dataclass(frozen=True)
class ViewConfig:
    fields: dict[str, tuple[str, ...]]
    correct_at: float = 1.0
    prompt_tail: int = 300
    max_chars: int = 600


def load_view_config(path: Path = SAMPLES_FILE,
                     profiles: Sequence[MethodProfile] | None = None) -> ViewConfig:
    """conf/report/samples.yaml's field lists, each followed by the methods' own names for
    that role (their profiles' `sample_fields`, in profile order)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    fields = {r: list(names or ()) for r, names in (data.get("fields") or {}).items()}
    unknown = set(fields) - set(ROLES)
    if unknown:
        raise ConfigError(f"{path}: unknown role(s) {sorted(unknown)} under fields; roles are "
                          f"{list(ROLES)}.")
    for profile in registered() if profiles is None else profiles:
        for role, names in profile.sample_fields.items():
            if role not in ROLES:
                raise ConfigError(f"Method {profile.name}: sample_fields names the unknown "
                                  f"role {role!r}; roles are {list(ROLES)}.")
            have = fields.setdefault(role, [])
            have += [n for n in names if n not in have]
    return ViewConfig({r: tuple(fields.get(r) or ()) for r in ROLES},
                      float(data.get("correct_at", 1.0)), int(data.get("prompt_tail", 300)),
                      int(data.get("max_chars", 600)))


@dataclass(frozen=True)
class Filters:
    """What to show: samples whose finish reason (any stage) is `finish`, empty ones, wrong
    ones, at most `limit` per run."""

    finish: str | None = None
    empty: bool = False
    wrong: bool = False
    limit: int | None = 10


# -- one record ----------------------------------------------------------------------------
def pick(record: Mapping[str, Any], names: Iterable[str], text_only: bool = False) -> Any:
    """The first of `names` the record has a value for (text_only: skip mappings, so an old
    text field name now used for a mapping is passed over)."""
    for name in names:
        value = record.get(name)
        if is_missing(value) or value in ([], ()) or (text_only and isinstance(value, dict)):
            continue
        return value
    return None


def finishes(record: Mapping[str, Any], cfg: ViewConfig) -> dict[str, str]:
    """stage -> finish reason, from the `generation` mapping or else the `finish` field."""
    gen = record.get("generation")
    if isinstance(gen, dict):
        return {str(stage): str(rec.get("finish")) for stage, rec in gen.items()
                if isinstance(rec, dict) and rec.get("finish")}
    value = pick(record, cfg.fields["finish"])
    return {"": str(value)} if value is not None else {}


def is_empty(record: Mapping[str, Any], cfg: ViewConfig) -> bool:
    """An empty stage output (the `generation` mapping) or an empty parsed answer."""
    gen = record.get("generation")
    if isinstance(gen, dict) and any(isinstance(r, dict) and r.get("empty")
                                     for r in gen.values()):
        return True
    names = [n for n in cfg.fields["answer"] if n in record]
    return bool(names) and not str(record.get(names[0]) or "").strip()


def is_wrong(record: Mapping[str, Any], cfg: ViewConfig) -> bool | None:
    """Below the score that counts as correct; None when the record has no score."""
    score = to_float(pick(record, cfg.fields["score"]))
    return None if score is None else score < cfg.correct_at


def matches(record: Mapping[str, Any], cfg: ViewConfig, flt: Filters) -> bool:
    if flt.finish and flt.finish not in finishes(record, cfg).values():
        return False
    if flt.empty and not is_empty(record, cfg):
        return False
    return not (flt.wrong and is_wrong(record, cfg) is not True)


def one_line(value: Any) -> str:
    """A record field as one line: lists joined by ' | ', mappings and numbers as JSON,
    newlines as ⏎ (shared with `ragrepro compare --flips`)."""
    if isinstance(value, (list, tuple)):
        text = " | ".join(str(v) for v in value)
    elif isinstance(value, (dict, bool, int, float)):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    return text.replace("\r", "").replace("\n", "⏎")


def _text(value: Any, limit: int, tail: bool = False) -> str:
    text = one_line(value)
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"…({cut} chars) {text[-limit:]}" if tail else f"{text[:limit]} …({cut} chars)"


def format_sample(record: Mapping[str, Any], cfg: ViewConfig) -> list[str]:
    """Lines of one sample: a header (id, group, finish, correctness), then one field per
    line, newlines shown as ⏎ so each line is one field."""
    f = cfg.fields
    head = [f"#{_text(pick(record, f['id']), 60)}"]
    group = pick(record, f["group"])
    if group is not None:
        head.append(f"[{_text(group, 40)}]")
    fin = finishes(record, cfg)
    if fin:
        head.append("finish " + ", ".join(f"{s}={r}" if s else r for s, r in fin.items()))
    wrong = is_wrong(record, cfg)
    if wrong is not None:
        score = to_float(pick(record, f["score"]))
        head.append(f"{'wrong' if wrong else 'right'} ({score:g})")
    if is_empty(record, cfg):
        head.append("EMPTY")
    lines = ["  ".join(head)]
    for role, label, tail in (("question", "question", False), ("prompt", "prompt…", True),
                              ("output", "output", False), ("answer", "answer", False),
                              ("gold", "gold", False), ("evidence", "evidence", False)):
        value = pick(record, f[role], text_only=role in ("output", "prompt", "evidence"))
        if value is None and role == "answer" and any(n in record for n in f[role]):
            value = "(empty)"
        if value is None or (role == "question" and pick(record, f["prompt"]) is not None):
            continue
        limit = cfg.prompt_tail if role == "prompt" else cfg.max_chars
        lines.append(f"  {label:<9}{_text(value, limit, tail)!s}")
    return lines


# -- runs ------------------------------------------------------------------------------------
def _flat(prefix: str, node: Any, out: dict[str, Any]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = node


def run_settings(run: RunRecord) -> dict[str, Any]:
    """What a `key=value` filter reads: the row's settings, then the flattened config."""
    flat: dict[str, Any] = {}
    _flat("", run.config or {}, flat)
    return {**flat, **{k: v for k, v in run.row.items() if not is_missing(v)},
            **(run.settings or {})}


def _same(value: Any, wanted: str) -> bool:
    if str(value) == wanted or str(value).lower() == wanted.lower():
        return True
    a, b = to_float(value), to_float(wanted)
    return a is not None and a == b


def select_runs(runs: Sequence[RunRecord], experiment: str, run_prefix: str | None,
                where: Mapping[str, str], root: Path | None = None) -> list[RunRecord]:
    """The experiment's finished runs (with a folder) matching the id prefix and every
    key=value; a key no run of the experiment has is refused with the known keys (and, given
    the results root, what the evidence manifest says of the experiment's committed table)."""
    mine = [r for r in runs if r.experiment == experiment and r.dir is not None]
    if not mine:
        known = sorted({r.experiment for r in runs})
        note = evidence_manifest.pending_note(root, experiment) if root is not None else ""
        raise ConfigError(f"No finished run of experiment {experiment!r}."
                          f"{did_you_mean(experiment, known)} Experiments with "
                          f"runs: {', '.join(known) or '(none)'}.{note}")
    settings = {r.run_id: run_settings(r) for r in mine}
    for key in where:
        if not any(key in s for s in settings.values()):
            names = sorted({k for s in settings.values() for k in s if "." not in k})
            raise ConfigError(f"No run of {experiment} records the setting {key!r}; filter "
                              f"on one of: {', '.join(names)}.")
    return [r for r in mine if (not run_prefix or r.run_id.startswith(run_prefix))
            and all(_same(settings[r.run_id].get(k), v) for k, v in where.items())]


def run_header(run: RunRecord, shown: Sequence[str]) -> str:
    """`== experiment/run_id  settings  attestation=...`: the run's hash of its per-sample
    outputs (ragrepro.attest; computed from the samples for runs that predate recording it),
    so two people reading the same run's samples can tell they read the same outputs."""
    s = run_settings(run)
    parts = [f"{k}={s.get(k)}" for k in shown if k in s]
    parts.append(f"attestation={attest.of_run(run.dir, run.metrics_json).shown()}")
    return f"== {run.experiment}/{run.run_id}  " + " ".join(parts)


def _header_keys(runs: Sequence[RunRecord], where: Mapping[str, str]) -> list[str]:
    """model, the filtered keys, then the settings that tell the chosen runs apart."""
    apart = varying([r.settings or {} for r in runs]) if len(runs) > 1 else []
    return list(dict.fromkeys(["model", *where, *apart]))


def render(root: Path, experiment: str, where: Mapping[str, str], flt: Filters,
           run_prefix: str | None = None, cfg: ViewConfig | None = None) -> tuple[str, int]:
    """(the text to print, how many samples it shows) for the experiment's chosen runs."""
    cfg = cfg or load_view_config()
    # only this experiment's bundle is unpacked; every run, for the did-you-mean, when none
    runs = select_runs(load_runs(root, experiment) or load_runs(root), experiment, run_prefix,
                       where, root)
    if not runs:
        raise ConfigError(f"No run of {experiment} matches "
                          f"{run_prefix or ''} {dict(where) or ''}".rstrip() + ".")
    keys = _header_keys(runs, where)
    out, shown = [], 0
    for run in runs:
        records = read_records(run.dir / "samples.jsonl", finished=True) if run.dir else []
        hits = [r for r in records if matches(r, cfg, flt)]
        picked = hits if flt.limit is None else hits[:flt.limit]
        out.append(run_header(run, keys) + f"  ({len(picked)} shown of {len(hits)} matching,"
                   f" {len(records)} samples)")
        for rec in picked:
            out += format_sample(rec, cfg)
        out.append("")
        shown += len(picked)
    return "\n".join(out), shown


def parse_where(items: Sequence[str]) -> dict[str, str]:
    where = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"settings filter {item!r}: write key=value (e.g. model="
                              f"smollm2-135m).")
        where[key] = value
    return where


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="ragrepro samples", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="experiment name, e.g. ralm/table4")
    ap.add_argument("where", nargs="*", help="settings filters key=value (model=..., k=3)")
    ap.add_argument("--run", default=None, help="run id prefix")
    ap.add_argument("--finish", default=None, help="finish reason: eos, stop, length, or a "
                    "method's own (RICHES: key_closed)")
    ap.add_argument("--empty", action="store_true", help="only empty outputs or answers")
    ap.add_argument("--wrong", action="store_true", help="only samples scored below correct")
    ap.add_argument("--limit", type=int, default=10, help="samples per run (0: all)")
    ap.add_argument("--results", type=Path, default=None, help="results folder")
    args = ap.parse_args(argv)
    flt = Filters(args.finish, args.empty, args.wrong, args.limit or None)
    try:
        if args.finish and args.finish not in finish_reasons():
            raise ConfigError(f"--finish {args.finish}: use one of "
                              f"{', '.join(finish_reasons())}.")
        text, shown = render(args.results or results_dir(), args.experiment,
                             parse_where(args.where), flt, args.run)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    sys.stdout.write(text + "\n")
    if not shown:
        print("no sample matches these filters", file=sys.stderr)
        raise SystemExit(1)
